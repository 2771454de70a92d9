package l4lb_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/cpu"
	"github.com/sfclab/sfclab/probe/iperf3"
	"github.com/sfclab/sfclab/results"
)

// hostCPU is the "cpu" line of /proc/stat in USER_HZ ticks: busy (user, nice, system, irq,
// softirq), softirq alone, steal, and the sum of all eight fields.
type hostCPU struct{ busy, softirq, steal, total uint64 }

func readHostCPU(tb testing.TB) hostCPU {
	tb.Helper()
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		tb.Fatal(err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		tb.Fatalf("/proc/stat: unexpected first line %q", line)
	}
	var v [8]uint64
	for i := range v {
		if v[i], err = strconv.ParseUint(f[i+1], 10, 64); err != nil {
			tb.Fatal(err)
		}
	}
	// user nice system idle iowait irq softirq steal
	h := hostCPU{busy: v[0] + v[1] + v[2] + v[5] + v[6], softirq: v[6], steal: v[7]}
	for _, x := range v {
		h.total += x
	}
	return h
}

// coreFigures is one single-stream run: its throughput and the cores it took.
type coreFigures struct {
	gbits                     float64
	busy, softirq, steal, all float64            // host-wide, cores (all: the CPUs' ticks per second)
	nodes                     map[string]float64 // user+system of each node's cgroup, cores
}

// BenchmarkChainCores measures how many of the host's cores one iperf3 TCP stream takes with
// no chain (baseline: client and server on one bridge) and through study A's 2-VNF chain with
// sfclab's balancer (splice and accel sockmap) and with HAProxy splicing, interleaved: host-wide busy cores from
// /proc/stat (user, nice, system, irq, softirq; steal apart) around the client's run, and
// each node's cgroup (user+system, which includes the softirq work done in its processes'
// context: the two figures overlap). It answers whether the single-stream targets
// can be reached on this machine: if the baseline already keeps the host's cores busy, a
// terminating proxy, which runs both TCP stacks a second time, cannot keep 0.85 of it.
// With accel sockmap the balancer's bytes move in kernel workers outside its cgroup, so only
// the host's busy cores show what it costs.
//
// Run: flock /tmp/sfclab-suite.lock go test -run '^$' -bench ChainCores -benchtime 2x ./vnf/l4lb/
func BenchmarkChainCores(b *testing.B) {
	labtest.RequireRoot(b)
	labtest.Exclusive(b)
	scenarios := []chainScenario{scenario("baseline"), scenario("sfclab"), scenario("sfclab-sockmap"), scenario("haproxy-splice")}
	sums := map[string]*coreFigures{}
	for i := 0; i < b.N; i++ {
		for _, sc := range scenarios {
			f := measureCores(b, sc, 1)
			s := sums[sc.name]
			if s == nil {
				s = &coreFigures{nodes: map[string]float64{}}
				sums[sc.name] = s
			}
			s.gbits += f.gbits
			s.busy += f.busy
			s.softirq += f.softirq
			s.steal += f.steal
			s.all += f.all
			var nodes []string
			for _, n := range []string{"client", "server", "fw", "lb"} {
				if v, ok := f.nodes[n]; ok {
					s.nodes[n] += v
					nodes = append(nodes, fmt.Sprintf("%s %.2f", n, v))
				}
			}
			b.Logf("trial %d %-15s %.2f Gbit/s; host busy %.2f of %.2f cores (softirq %.2f, steal %.2f); cgroups: %s; %.3f busy cores per Gbit/s",
				i+1, sc.name, f.gbits, f.busy, f.all, f.softirq, f.steal, strings.Join(nodes, ", "), f.busy/f.gbits)
		}
	}
	k := float64(b.N)
	base, sfc, hspl := sums["baseline"], sums["sfclab"], sums["haproxy-splice"]
	b.ReportMetric(base.gbits/k, "baseline-Gbit/s")
	b.ReportMetric(base.busy/k, "baseline-busy-cores")
	b.ReportMetric(sfc.gbits/k, "sfclab-Gbit/s")
	b.ReportMetric(sfc.busy/k, "sfclab-busy-cores")
	b.ReportMetric(sfc.gbits/base.gbits, "sfclab/baseline-1stream")
	b.ReportMetric(hspl.gbits/base.gbits, "haproxy-splice/baseline-1stream")
	// Busy cores per Gbit/s: what one Gbit/s costs the host with and without the chain.
	b.ReportMetric((sfc.busy/sfc.gbits)/(base.busy/base.gbits), "sfclab/baseline-cores-per-Gbit")
	b.ReportMetric((hspl.busy/hspl.gbits)/(base.busy/base.gbits), "haproxy-splice/baseline-cores-per-Gbit")
	sm := sums["sfclab-sockmap"]
	b.ReportMetric(sm.gbits/base.gbits, "sfclab-sockmap/baseline-1stream")
	b.ReportMetric(sm.gbits/sfc.gbits, "sfclab-sockmap/sfclab-1stream")
	b.ReportMetric((sm.busy/sm.gbits)/(base.busy/base.gbits), "sfclab-sockmap/baseline-cores-per-Gbit")
	b.ReportMetric((sm.busy/sm.gbits)/(sfc.busy/sfc.gbits), "sfclab-sockmap/sfclab-cores-per-Gbit")
}

// scenario is the chain scenario of that name.
func scenario(name string) chainScenario {
	for _, sc := range chainScenarios {
		if sc.name == name {
			return sc
		}
	}
	panic("no chain scenario " + name)
}

// measureCores deploys one scenario and runs iperf3 with streams streams for 5 s, with the
// host's and the nodes' CPU read around the client's run.
func measureCores(b *testing.B, sc chainScenario, streams int) (f coreFigures) {
	b.Helper()
	p := labtest.Plan(b, chainLab(sc.lab, sc.params))
	d := &deploy.Deployer{Journal: journal.Journal{Root: b.TempDir()}}
	ctx := context.Background()
	defer func() {
		if err := d.Destroy(ctx, p.Lab); err != nil && !errors.Is(err, journal.ErrNotDeployed) {
			b.Errorf("destroy %s: %v", p.Lab, err)
		}
	}()
	if _, err := d.Deploy(ctx, p, "bench"); err != nil {
		b.Fatalf("deploy %s: %v", p.Lab, err)
	}
	env := probe.Env{Plan: p, Chain: p.Chain("web"), LogDir: b.TempDir(),
		Node: func(name string) (probe.Node, error) { return d.Node(p, name) }}
	nodes := []string{"client", "server"}
	if sc.params != "" {
		nodes = append(nodes, "fw", "lb")
	}
	var cs []results.Sample
	around := func(client func() (probe.Window, bool)) error {
		sampler, err := cpu.Start(env, nodes)
		if err != nil {
			return err
		}
		h0, t0 := readHostCPU(b), time.Now()
		client()
		h1, t1 := readHostCPU(b), time.Now()
		cs, err = sampler.Stop()
		wall := t1.Sub(t0).Seconds() * cpu.UserHZ()
		f.busy = float64(h1.busy-h0.busy) / wall
		f.softirq = float64(h1.softirq-h0.softirq) / wall
		f.steal = float64(h1.steal-h0.steal) / wall
		f.all = float64(h1.total-h0.total) / wall
		return err
	}
	err := iperf3.New(iperf3.Config{Duration: 5 * time.Second, Streams: streams, Around: around}).Run(ctx, env, func(s results.Sample) {
		if s.Metric == "throughput" && s.Labels["side"] == "receiver" {
			f.gbits = s.Value / 1e9
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	f.nodes = map[string]float64{}
	for _, s := range cs {
		if s.Metric == "cpu_user" || s.Metric == "cpu_system" {
			if n := s.Labels["node"]; n != "host" {
				f.nodes[n] += s.Value
			}
		}
	}
	return f
}

// BenchmarkChainCoresP100 is BenchmarkChainCores with 100 parallel streams, baseline and
// sfclab's balancer (splice, accel sockmap) interleaved.
//
// Run: flock /tmp/sfclab-suite.lock go test -run '^$' -bench ChainCoresP100 -benchtime 2x ./vnf/l4lb/
func BenchmarkChainCoresP100(b *testing.B) {
	labtest.RequireRoot(b)
	labtest.Exclusive(b)
	var base, sfc, sm coreFigures
	for i := 0; i < b.N; i++ {
		for _, sc := range []chainScenario{scenario("baseline"), scenario("sfclab"), scenario("sfclab-sockmap")} {
			f := measureCores(b, sc, 100)
			b.Logf("trial %d %-14s -P 100 %.2f Gbit/s; host busy %.2f of %.2f cores (softirq %.2f, steal %.2f); client %.2f, server %.2f, lb %.2f; %.3f busy cores per Gbit/s",
				i+1, sc.name, f.gbits, f.busy, f.all, f.softirq, f.steal, f.nodes["client"], f.nodes["server"], f.nodes["lb"], f.busy/f.gbits)
			t := map[string]*coreFigures{"baseline": &base, "sfclab": &sfc, "sfclab-sockmap": &sm}[sc.name]
			t.gbits += f.gbits
			t.busy += f.busy
		}
	}
	b.ReportMetric(sfc.gbits/base.gbits, "sfclab/baseline-P100")
	b.ReportMetric(base.busy/float64(b.N), "baseline-busy-cores")
	b.ReportMetric(sfc.busy/float64(b.N), "sfclab-busy-cores")
	b.ReportMetric((sfc.busy/sfc.gbits)/(base.busy/base.gbits), "sfclab/baseline-cores-per-Gbit")
	b.ReportMetric(sm.gbits/base.gbits, "sfclab-sockmap/baseline-P100")
	b.ReportMetric(sm.gbits/sfc.gbits, "sfclab-sockmap/sfclab-P100")
	b.ReportMetric((sm.busy/sm.gbits)/(sfc.busy/sfc.gbits), "sfclab-sockmap/sfclab-cores-per-Gbit")
}
