package bench

import (
	"context"
	"testing"
	"time"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/cpu"
	"github.com/sfclab/sfclab/probe/iperf3"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// delaySYN makes the server drop the first SYN from each source to iperf3's port, so the
// client's connect waits for the kernel's SYN retransmission (the initial RTO, 1 s): a real
// 1 s connect delay at the start of the client's run. The data connection's SYN passes at
// once (its source is in the set by then). The table goes with the lab's namespace.
//
// Equivalent to: nft -f - in the server node, with the ruleset below.
const delaySYN = `table inet sfclab_test_delay {
	set seen { type ipv4_addr; flags dynamic, timeout; timeout 1m; }
	chain in {
		type filter hook input priority 0; policy accept;
		tcp dport 5201 tcp flags & (syn | ack) == syn ip saddr != @seen add @seen { ip saddr } drop
	}
}
`

// TestCPUWindowIsTheTransfer runs a 2 s iperf3 test with CPU sampled as the bench does, once
// as is and once with a 1 s connect delay, and checks that the delay does not dilute the
// client's CPU figure: the window is the transfer the -J report dates, not the client's run.
// A sampler over the whole run (what the window was before) shows the dilution the delay
// causes, so the test also proves the delay was there.
func TestCPUWindowIsTheTransfer(t *testing.T) {
	requireRoot(t)
	lab, err := spec.Decode([]byte("name: t-bcw\nendpoints: {client: {}, server: {}}\nchains: [{from: client, to: server}]\n"), "t-bcw.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(lab)
	if err != nil {
		t.Fatal(err)
	}
	d := &deploy.Deployer{Journal: journal.Journal{Root: t.TempDir()}}
	ctx := context.Background()
	if _, err := d.Deploy(ctx, p, "t-bcw.yaml"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Destroy(ctx, p.Lab); err != nil {
			t.Errorf("destroy: %v", err)
		}
		assertNoLabs(t, p.Lab)
	})
	env := probe.Env{Plan: p, Chain: p.Chains[0], LogDir: t.TempDir(),
		Node: func(name string) (probe.Node, error) { return d.Node(p, name) }}

	// run returns the client's CPU (user + system, cores) within the transfer and the span
	// used (s), and over the probe's whole run (a sampler started before it and stopped
	// after) and that span (s).
	type fig struct {
		within, window, whole, span float64
		bound                       string
	}
	run := func(t *testing.T) fig {
		t.Helper()
		all, err := cpu.Start(env, []string{"client"})
		if err != nil {
			t.Fatal(err)
		}
		var samples []results.Sample
		if err := runStep(ctx, env, experiment.Step{Name: iperf3.Name, Probes: []probe.Probe{iperf3.New(iperf3.Config{Duration: 2 * time.Second})},
			CPU: experiment.CPUMeasured}, func(x results.Sample) { samples = append(samples, x) }); err != nil {
			t.Fatal(err)
		}
		ws, err := all.Stop()
		if err != nil {
			t.Fatal(err)
		}
		var f fig
		for _, x := range samples {
			switch {
			case x.Probe == cpu.Name && x.Labels["node"] == "client" && (x.Metric == "cpu_user" || x.Metric == "cpu_system"):
				f.within += x.Value
			case x.Probe == cpu.Name && x.Metric == cpu.WindowMetric:
				f.window, f.bound = x.Value, x.Labels["bound"]
			}
		}
		for _, x := range ws {
			switch {
			case x.Labels["node"] == "client":
				f.whole += x.Value
			case x.Metric == cpu.WindowMetric:
				f.span = x.Value
			}
		}
		return f
	}

	plain := run(t)
	srv, err := d.Node(p, "server")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := srv.Output(ctx, []byte(delaySYN), "nft", "-f", "-"); err != nil {
		t.Fatalf("add the SYN delay: %v: %s", err, out)
	}
	del := run(t)
	t.Logf("client CPU, cores: no delay: %.3f within the transfer (%s, %.3f s), %.3f over the probe's %.2f s; "+
		"1 s connect delay: %.3f within (%s, %.3f s), %.3f over the probe's %.2f s",
		plain.within, plain.bound, plain.window, plain.whole, plain.span, del.within, del.bound, del.window, del.whole, del.span)

	if del.span < plain.span+0.8 {
		t.Fatalf("the delayed probe took %.2f s, the plain one %.2f s: the SYN delay did not happen", del.span, plain.span)
	}
	for _, r := range []struct {
		name string
		f    fig
	}{{"plain", plain}, {"delayed", del}} {
		// A 2 s transfer read every 100 ms: the snapshots inside it span 1.8 to 2 s (less
		// when the shared host delays the sampler's reads).
		if r.f.bound != "inside" || r.f.window < 1.4 || r.f.window > 2.05 {
			t.Errorf("%s run: window %.3f s bound %q, want inside the 2 s transfer", r.name, r.f.window, r.f.bound)
		}
		if r.f.within <= 0.05 {
			t.Fatalf("%s run: the client used %.3f cores during a 2 s iperf3 transfer: nothing measured", r.name, r.f.within)
		}
		// Not under-stated: the window holds (nearly) all the CPU seconds the client used in
		// the probe's whole run, divided by the transfer's time, not the run's. (A check
		// within one run: the host is shared, so two runs' rates differ by more than the
		// dilution.)
		if sec, all := r.f.within*r.f.window, r.f.whole*r.f.span; sec < 0.6*all {
			t.Errorf("%s run: %.3f CPU s within the transfer of %.3f within the whole run: the window misses the transfer", r.name, sec, all)
		}
	}
	// The delay is outside the window: the whole run's figure is diluted by it, the
	// transfer's is not.
	if del.span-del.window < 0.9 || del.whole > 0.8*del.within {
		t.Errorf("delayed run: window %.3f s of a %.2f s run, %.3f cores over the run vs %.3f within: want the delay outside the window and the run's figure diluted",
			del.window, del.span, del.whole, del.within)
	}
}
