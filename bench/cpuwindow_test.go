package bench

import (
	"context"
	"testing"
	"time"

	"github.com/sfclab/sfclab/bench/probe"
	"github.com/sfclab/sfclab/bench/probe/cpu"
	"github.com/sfclab/sfclab/bench/probe/iperf3"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/plan"
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

	// run returns the client's CPU (user + system, cores) within the transfer, over the
	// probe's whole run, the window used (s) and its bound.
	run := func(t *testing.T) (within, whole, window float64, bound string, took time.Duration) {
		t.Helper()
		all, err := cpu.Start(env, []string{"client"})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var samples []results.Sample
		if err := runIperf3(ctx, env, iperf3.Config{Duration: 2 * time.Second}, true, func(x results.Sample) { samples = append(samples, x) }); err != nil {
			t.Fatal(err)
		}
		took = time.Since(start)
		ws, err := all.Stop()
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range samples {
			switch {
			case x.Probe == cpu.Name && x.Labels["node"] == "client" && (x.Metric == "cpu_user" || x.Metric == "cpu_system"):
				within += x.Value
			case x.Probe == cpu.Name && x.Metric == cpu.WindowMetric:
				window, bound = x.Value, x.Labels["bound"]
			}
		}
		for _, x := range ws {
			if x.Labels["node"] == "client" {
				whole += x.Value
			}
		}
		return within, whole, window, bound, took
	}

	plainWithin, plainWhole, plainWindow, plainBound, plainTook := run(t)
	srv, err := d.Node(p, "server")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := srv.Output(ctx, []byte(delaySYN), "nft", "-f", "-"); err != nil {
		t.Fatalf("add the SYN delay: %v: %s", err, out)
	}
	delWithin, delWhole, delWindow, delBound, delTook := run(t)
	t.Logf("client CPU, cores: no delay: %.3f within the transfer (%s, %.3f s), %.3f over the probe's %.2f s run; "+
		"1 s connect delay: %.3f within (%s, %.3f s), %.3f over the probe's %.2f s run",
		plainWithin, plainBound, plainWindow, plainWhole, plainTook.Seconds(), delWithin, delBound, delWindow, delWhole, delTook.Seconds())

	if delTook < plainTook+800*time.Millisecond {
		t.Fatalf("the delayed run took %s, the plain one %s: the SYN delay did not happen", delTook, plainTook)
	}
	for _, r := range []struct {
		name   string
		bound  string
		window float64
	}{{"plain", plainBound, plainWindow}, {"delayed", delBound, delWindow}} {
		// A 2 s transfer read every 100 ms: the snapshots inside it span 1.8 to 2 s.
		if r.bound != "inside" || r.window < 2-2*cpu.TrackInterval.Seconds()-0.05 || r.window > 2.05 {
			t.Errorf("%s run: window %.3f s bound %q, want inside the 2 s transfer", r.name, r.window, r.bound)
		}
	}
	if plainWithin <= 0.05 {
		t.Fatalf("the client used %.3f cores during a 2 s iperf3 transfer: nothing measured", plainWithin)
	}
	// Not under-stated: the delayed figure is the plain one, within the noise of a shared
	// 2-core host, while the whole run's figure falls by about the delay's share (1 of 3 s).
	if ratio := delWithin / plainWithin; ratio < 0.8 || ratio > 1.25 {
		t.Errorf("client CPU within the transfer: %.3f cores with a 1 s connect delay vs %.3f without (ratio %.2f), want the same within 20 %%",
			delWithin, plainWithin, ratio)
	}
	if ratio := delWhole / delWithin; ratio > 0.8 {
		t.Errorf("client CPU over the delayed run's whole span %.3f vs %.3f within its transfer (ratio %.2f): want the whole span diluted below 0.8",
			delWhole, delWithin, ratio)
	}
}
