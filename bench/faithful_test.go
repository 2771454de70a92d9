package bench

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/internal/plantest"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/iperf3"
	"github.com/sfclab/sfclab/results"
)

// faithfulTolerance is how far the probe's median may be from the median by hand.
const faithfulTolerance = 0.03

// BenchmarkIperf3Faithfulness compares iperf3 through the bench probe with iperf3 run by hand
// (`ip netns exec ... iperf3`) in the same lab, alternating, and reports the ratio of the
// medians: it must stay within 3 % of 1, or the benchmark fails. `make bench` runs it.
func BenchmarkIperf3Faithfulness(b *testing.B) {
	requireRoot(b)
	p := plantest.LoadAs(b, "../examples/fw.yaml", "t-faith")
	d := &deploy.Deployer{Journal: journal.Journal{Root: b.TempDir()}}
	if _, err := d.Deploy(context.Background(), p, "bench"); err != nil {
		b.Fatal(err)
	}
	defer d.Destroy(context.Background(), p.Lab)
	c := p.Chains[0]
	env := probe.Env{Plan: p, Chain: c, LogDir: b.TempDir(),
		Node: func(name string) (probe.Node, error) { return d.Node(p, name) }}
	const secs = 3
	var viaProbe, byHand []float64
	server, _ := d.Node(p, "server")
	for i := 0; i < max(b.N, 8); i++ {
		var got float64
		err := iperf3.New(iperf3.Config{Duration: secs * time.Second, Protocol: "tcp", Streams: 1}).Run(context.Background(), env, func(s results.Sample) {
			if s.Metric == "throughput" && s.Labels["side"] == "receiver" {
				got = s.Value
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		viaProbe = append(viaProbe, got)
		if _, err := server.Daemon([]string{"iperf3", "-s", "-1"}, b.TempDir()+"/s.log"); err != nil {
			b.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		out, err := exec.Command("ip", "netns", "exec", p.Node("client").Netns, "iperf3", "-c", c.Target.String(), "-t", "3", "-J").Output()
		if err != nil {
			b.Fatalf("iperf3 by hand: %v", err)
		}
		res, err := iperf3.Parse(out)
		if err != nil {
			b.Fatal(err)
		}
		byHand = append(byHand, res.ReceivedBPS)
	}
	median := func(xs []float64) float64 { s := slices.Clone(xs); slices.Sort(s); return s[len(s)/2] }
	b.ReportMetric(median(viaProbe)/1e9, "probe-Gbit/s")
	b.ReportMetric(median(byHand)/1e9, "hand-Gbit/s")
	ratio := median(viaProbe) / median(byHand)
	b.ReportMetric(ratio, "probe/hand")
	b.Logf("probe %v, by hand %v", viaProbe, byHand)
	if ratio < 1-faithfulTolerance || ratio > 1+faithfulTolerance {
		b.Errorf("iperf3 through the probe is %.3f× iperf3 by hand (medians of %d alternations), outside 1 ± %.0f %%", ratio, len(byHand), 100*faithfulTolerance)
	}
}
