package probe_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/internal/plantest"
	"github.com/sfclab/sfclab/internal/testroot"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/cpu"
	"github.com/sfclab/sfclab/probe/iperf3"
	"github.com/sfclab/sfclab/probe/ping"
	"github.com/sfclab/sfclab/probe/tcprtt"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/runtime"
)

var _ probe.Node = (runtime.Node)(nil)

func requireRoot(t *testing.T) { testroot.Require(t, "probe tests deploy real labs") }

// lab deploys an example under another name into a private journal and registers its
// destruction, checking that nothing of it is left afterwards. It returns the chain's env.
func lab(t *testing.T, example, name string) probe.Env {
	t.Helper()
	p := plantest.LoadAs(t, "../examples/"+example+".yaml", name)
	d := &deploy.Deployer{Journal: journal.Journal{Root: t.TempDir()}}
	t.Cleanup(func() {
		if err := d.Destroy(context.Background(), p.Lab); err != nil {
			t.Errorf("destroy: %v", err)
		}
		left, _ := netdev.ListNetns(plan.NetnsName(p.Lab, ""))
		if _, err := os.Stat(filepath.Join(netdev.NetnsDir, plan.FabricName(p.Lab))); err == nil {
			left = append(left, plan.FabricName(p.Lab))
		}
		if len(left) > 0 {
			t.Errorf("lab %s left namespaces %v", p.Lab, left)
		}
	})
	timing, err := d.Deploy(context.Background(), p, "test")
	if err != nil {
		t.Fatalf("deploy %s: %v", p.Lab, err)
	}
	t.Logf("deployed %s in %s", p.Lab, timing)
	return probe.Env{Plan: p, Chain: p.Chains[0], LogDir: t.TempDir(),
		Node: func(name string) (probe.Node, error) { return d.Node(p, name) }}
}

// run runs a probe and returns what it emitted and how long it took.
func run(t *testing.T, ctx context.Context, pr probe.Probe, env probe.Env) ([]results.Sample, time.Duration, error) {
	t.Helper()
	var got []results.Sample
	t0 := time.Now()
	err := pr.Run(ctx, env, func(s results.Sample) { got = append(got, s) })
	return got, time.Since(t0), err
}

func pick(samples []results.Sample, metric string, labels ...string) []results.Sample {
	var out []results.Sample
	for _, s := range samples {
		ok := s.Metric == metric
		for i := 0; ok && i+1 < len(labels); i += 2 {
			ok = s.Labels[labels[i]] == labels[i+1]
		}
		if ok {
			out = append(out, s)
		}
	}
	return out
}

func values(samples []results.Sample) []float64 {
	v := make([]float64, len(samples))
	for i, s := range samples {
		v[i] = s.Value
	}
	return v
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// assertNoIperf3 fails if an iperf3 process is still running in any node of the lab.
func assertNoIperf3(t *testing.T, env probe.Env) {
	t.Helper()
	for _, n := range env.Plan.Nodes {
		g, err := cgroup.Open("labs/" + env.Plan.Lab + "/" + n.Name)
		if err != nil {
			t.Errorf("open cgroup of %s: %v", n.Name, err)
			continue
		}
		pids, err := g.Procs()
		if err != nil {
			t.Errorf("list processes of %s: %v", n.Name, err)
		}
		for _, pid := range pids {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "iperf3" {
				t.Errorf("iperf3 (pid %d) still runs in node %s", pid, n.Name)
			}
		}
	}
}

// TestFwLB runs every probe through study A's 2-VNF chain: client -> iptables firewall ->
// HAProxy -> server.
func TestFwLB(t *testing.T) {
	requireRoot(t)
	env := lab(t, "fw-lb", "t-probe-fwlb")
	ctx := context.Background()

	t.Run("iperf3+cpu", func(t *testing.T) {
		nodes := []string{"client", "lb", "server"}
		sampler, err := cpu.Start(env, nodes)
		if err != nil {
			t.Fatal(err)
		}
		got, took, err := run(t, ctx, iperf3.New(iperf3.Config{Duration: time.Second}), env)
		cs, cerr := sampler.Stop()
		if err != nil {
			t.Fatal(err)
		}
		if cerr != nil {
			t.Fatal(cerr)
		}
		assertNoIperf3(t, env)
		rx := pick(got, "throughput", "side", "receiver")
		if len(rx) != 1 || rx[0].Value <= 0 || rx[0].Unit != "bit/s" {
			t.Fatalf("receiver throughput %+v", rx)
		}
		if rx[0].Labels["cc"] == "" || rx[0].Labels["protocol"] != "tcp" || rx[0].Labels["streams"] != "1" {
			t.Errorf("labels %v", rx[0].Labels)
		}
		if len(pick(got, "retransmits")) != 1 {
			t.Errorf("no retransmits sample in %+v", got)
		}
		t.Logf("iperf3 through fw -> HAProxy: %.2f Gbit/s received (cc %s, %d retransmits) in %s",
			rx[0].Value/1e9, rx[0].Labels["cc"], int(pick(got, "retransmits")[0].Value), took.Round(time.Millisecond))
		byNode := map[string]float64{}
		for _, s := range cs {
			if s.Metric == cpu.WindowMetric {
				if s.Unit != "s" || s.Labels["bound"] != "whole" || s.Value < took.Seconds() {
					t.Errorf("window sample %+v, want bound=whole over at least the probe's %s", s, took)
				}
				continue
			}
			t.Logf("cpu %s %s = %.3f %s", s.Labels["node"], s.Metric, s.Value, s.Unit)
			if s.Metric == "cpu_user" || s.Metric == "cpu_system" {
				byNode[s.Labels["node"]] += s.Value
			}
		}
		if byNode["lb"] <= 0 {
			t.Errorf("HAProxy used no CPU while iperf3 ran: %+v", cs)
		}
		// user and system per node, memory and its peak per node, softirq, window.
		if len(cs) != 4*len(nodes)+2 {
			t.Errorf("%d cpu samples, want %d (user, system, memory and memory peak per node, softirq, window)", len(cs), 4*len(nodes)+2)
		}
	})

	t.Run("ping has no ICMP path", func(t *testing.T) {
		got, took, err := run(t, ctx, ping.New(ping.Config{Count: 20, Interval: 10 * time.Millisecond}), env)
		if err != nil {
			t.Fatal(err)
		}
		if rtt := pick(got, "rtt"); len(rtt) != 0 {
			t.Errorf("ping through an L4 proxy got %d replies", len(rtt))
		}
		loss := pick(got, "loss")
		if len(loss) != 1 || loss[0].Value != 100 || loss[0].Labels["icmp_path"] != "none" {
			t.Fatalf("loss %+v, want 100 labelled icmp_path=none", loss)
		}
		t.Logf("ping to %s: loss %v%% in %s", probe.DestinationAddr(env.Plan, env.Chain), loss[0].Value, took.Round(time.Millisecond))
	})

	t.Run("tcprtt through HAProxy", func(t *testing.T) {
		got, took, err := run(t, ctx, tcprtt.New(tcprtt.Config{Connects: 20, Requests: 50, Size: 64, Timeout: time.Second}), env)
		if err != nil {
			t.Fatal(err)
		}
		conn, rtt := pick(got, "connect"), pick(got, "rtt")
		if len(conn) != 20 || len(rtt) != 50 {
			t.Fatalf("%d connect and %d rtt samples, want 20 and 50", len(conn), len(rtt))
		}
		for _, s := range append(conn, rtt...) {
			if s.Value <= 0 || s.Unit != "ms" || s.Probe != "tcprtt" || s.Labels["seq"] == "" {
				t.Errorf("sample %+v", s)
			}
		}
		t.Logf("tcprtt via HAProxy: connect median %.3f ms, rtt median %.3f ms (64 B) in %s",
			median(values(conn)), median(values(rtt)), took.Round(time.Millisecond))
	})

	t.Run("iperf3 udp through HAProxy fails with iperf3's text", func(t *testing.T) {
		_, took, err := run(t, ctx, iperf3.New(iperf3.Config{Duration: time.Second, Protocol: "udp"}), env)
		var ie *iperf3.Error
		if !errors.As(err, &ie) {
			t.Fatalf("error %v, want iperf3's own error", err)
		}
		t.Logf("udp through HAProxy: %v (%s)", err, took.Round(time.Millisecond))
		assertNoIperf3(t, env)
	})
}

// TestFw runs the probes through study A's 1-VNF chain, then through the same chain made
// dead by a silent drop in the firewall.
func TestFw(t *testing.T) {
	requireRoot(t)
	env := lab(t, "fw", "t-probe-fw")
	ctx := context.Background()

	t.Run("ping", func(t *testing.T) {
		got, took, err := run(t, ctx, ping.New(ping.Config{Count: 20, Interval: 10 * time.Millisecond}), env)
		if err != nil {
			t.Fatal(err)
		}
		rtt, loss := pick(got, "rtt"), pick(got, "loss")
		if len(rtt) != 20 || len(loss) != 1 || loss[0].Value != 0 {
			t.Fatalf("%d rtt samples, loss %+v; want 20 and 0", len(rtt), loss)
		}
		for _, s := range rtt {
			if s.Value <= 0 || s.Labels["seq"] == "" {
				t.Errorf("rtt %+v", s)
			}
		}
		t.Logf("ping through fw: rtt median %.3f ms, loss 0 %% in %s", median(values(rtt)), took.Round(time.Millisecond))
	})

	t.Run("iperf3 udp+softirq", func(t *testing.T) {
		sampler, err := cpu.Start(env, []string{"fw"})
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := run(t, ctx, iperf3.New(iperf3.Config{Duration: time.Second, Protocol: "udp", Bitrate: "200M"}), env)
		cs, cerr := sampler.Stop()
		if err != nil || cerr != nil {
			t.Fatal(err, cerr)
		}
		assertNoIperf3(t, env)
		rx, loss, jitter := pick(got, "throughput", "side", "receiver"), pick(got, "loss"), pick(got, "jitter")
		if len(rx) != 1 || rx[0].Value <= 0 || len(loss) != 1 || len(jitter) != 1 {
			t.Fatalf("samples %+v", got)
		}
		si := pick(cs, "softirq", "node", "host")
		if len(si) != 1 {
			t.Fatalf("cpu samples %+v", cs)
		}
		t.Logf("iperf3 udp 200M through fw: %.1f Mbit/s received, jitter %.3f ms, loss %.2f %%; fw %.3f+%.3f cores, host softirq %.3f cores",
			rx[0].Value/1e6, jitter[0].Value, loss[0].Value, pick(cs, "cpu_user")[0].Value, pick(cs, "cpu_system")[0].Value, si[0].Value)
	})

	t.Run("dead chain", func(t *testing.T) {
		fw, err := env.Node("fw")
		if err != nil {
			t.Fatal(err)
		}
		// Drop everything the firewall forwards, silently (no ICMP error back).
		rules := "table ip t_dead {\n\tchain c {\n\t\ttype filter hook forward priority -300; policy drop;\n\t}\n}\n"
		if out, err := fw.Output(ctx, []byte(rules), "nft", "-f", "-"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		defer fw.Output(ctx, nil, "nft", "delete", "table", "ip", "t_dead")

		// A chain with an ICMP path and no reply is a failed trial, not a figure.
		got, took, err := run(t, ctx, ping.New(ping.Config{Count: 5, Interval: 10 * time.Millisecond}), env)
		if !errors.Is(err, ping.ErrNoReply) || len(got) != 0 || !strings.Contains(err.Error(), "5 requests sent") {
			t.Errorf("ping on a dead chain: %v, %+v; want ErrNoReply after 5 requests and no samples", err, got)
		}
		t.Logf("ping on a dead chain: %v (%s)", err, took.Round(time.Millisecond))

		got, took, err = run(t, ctx, tcprtt.New(tcprtt.Config{Connects: 3, Requests: 3, Timeout: 300 * time.Millisecond}), env)
		if err == nil || len(got) != 0 || took > 3*time.Second {
			t.Errorf("tcprtt on a dead chain: %v, %d samples, %s", err, len(got), took)
		}
		t.Logf("tcprtt on a dead chain: %v (%s)", err, took.Round(time.Millisecond))

		short, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		got, took, err = run(t, short, iperf3.New(iperf3.Config{Duration: time.Second}), env)
		if err == nil || len(got) != 0 || took > 3*time.Second+iperf3.StopTimeout+time.Second {
			t.Errorf("iperf3 on a dead chain: %v, %d samples, %s", err, len(got), took)
		}
		t.Logf("iperf3 on a dead chain, 3 s budget: %v (%s)", err, took.Round(time.Millisecond))
		assertNoIperf3(t, env)
	})
}

// TestLB3 runs through an nft load balancer hashing per flow over three servers: tcprtt works
// (every server echoes), iperf3 with 8 streams is stopped with ErrSplitFlows as soon as its
// connections land on two servers.
func TestLB3(t *testing.T) {
	requireRoot(t)
	env := lab(t, "lb-3", "t-probe-lb3")
	ctx := context.Background()

	got, _, err := run(t, ctx, tcprtt.New(tcprtt.Config{Connects: 10, Requests: 20, Timeout: time.Second}), env)
	if err != nil {
		t.Fatal(err)
	}
	if len(pick(got, "connect")) != 10 || len(pick(got, "rtt")) != 20 {
		t.Fatalf("samples %+v", got)
	}
	t.Logf("tcprtt via nft lb: connect median %.3f ms, rtt median %.3f ms", median(values(pick(got, "connect"))), median(values(pick(got, "rtt"))))

	got, took, err := run(t, ctx, iperf3.New(iperf3.Config{Duration: time.Second, Streams: 8}), env)
	switch {
	case errors.Is(err, iperf3.ErrSplitFlows):
		t.Logf("iperf3 -P 8 through a per-flow hash: %v (%s)", err, took.Round(time.Millisecond))
	case err == nil:
		// All 9 connections hashed to one server: probability 3^-8.
		t.Logf("iperf3 -P 8: all connections reached one server by chance: %.2f Gbit/s", pick(got, "throughput", "side", "receiver")[0].Value/1e9)
	default:
		t.Fatalf("iperf3 -P 8 through a per-flow hash: %v, want %v", err, iperf3.ErrSplitFlows)
	}
	if took > 5*time.Second {
		t.Errorf("iperf3 took %s to give up on split flows", took)
	}
	assertNoIperf3(t, env)
}
