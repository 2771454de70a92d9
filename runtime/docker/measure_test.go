package docker_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/plan"
	iperf3probe "github.com/sfclab/sfclab/probe/iperf3"
	"github.com/sfclab/sfclab/spec"
)

// BenchmarkRuntimes measures what the docker runtime costs beside netns, interleaved in one
// run: the deploy time of examples/chain-6.yaml on both, and iperf3 (TCP, one stream, 5 s)
// through baseline, fw and fw-lb on both. It reports each docker figure over the netns one
// (docker/netns); figures of one run on a shared host, so read the ratios, not the absolutes.
//
//	flock /tmp/sfclab-suite.lock go test ./runtime/docker -run '^$' -bench Runtimes -benchtime 1x
func BenchmarkRuntimes(b *testing.B) {
	requireEngine(b)
	cc, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
	b.Logf("host TCP congestion control: %s", strings.TrimSpace(string(cc)))
	deploySecs := map[string]float64{}
	gbits := map[string]float64{}
	for i := 0; i < b.N; i++ {
		for _, rt := range []string{"netns", "docker"} {
			d := deployer(b)
			p := loadLab(b, "../../examples/chain-6.yaml", "m-c6-"+rt[:2], func(l *spec.Lab) { l.Runtime = rt })
			timing, err := d.Deploy(context.Background(), p, "measure")
			if err != nil {
				b.Fatalf("deploy chain-6 on %s: %v", rt, err)
			}
			start := time.Now()
			if err := d.Destroy(context.Background(), p.Lab); err != nil {
				b.Fatal(err)
			}
			deploySecs[rt] += timing.Total.Seconds()
			b.Logf("chain-6 (%d nodes, %d segments) on %-6s: deploy %s; destroy %s", len(p.Nodes), len(p.Segments), rt, timing, time.Since(start).Round(time.Millisecond))
		}
		for _, ex := range []string{"baseline", "fw", "fw-lb"} {
			for _, rt := range []string{"netns", "docker"} {
				d := deployer(b)
				p := loadLab(b, "../../examples/"+ex+".yaml", "m-"+ex+"-"+rt[:2], func(l *spec.Lab) { l.Runtime = rt })
				if _, err := d.Deploy(context.Background(), p, "measure"); err != nil {
					b.Fatalf("deploy %s on %s: %v", ex, rt, err)
				}
				bps := measureIperf(b, d, p)
				if err := d.Destroy(context.Background(), p.Lab); err != nil {
					b.Fatal(err)
				}
				if bps <= 0 {
					b.Fatalf("iperf3 %s on %s: no throughput", ex, rt)
				}
				gbits[ex+"/"+rt] += bps / 1e9
				b.Logf("iperf3 %-8s on %-6s: %.2f Gbit/s", ex, rt, bps/1e9)
			}
		}
	}
	b.ReportMetric(deploySecs["docker"]/deploySecs["netns"], "deploy-docker/netns")
	for _, ex := range []string{"baseline", "fw", "fw-lb"} {
		b.ReportMetric(gbits[ex+"/docker"]/gbits[ex+"/netns"], "iperf3-"+ex+"-docker/netns")
	}
}

// measureIperf runs iperf3 for 5 s from the chain's source to its target on any runtime.
func measureIperf(t testing.TB, d *deploy.Deployer, p *plan.Plan) float64 {
	c := p.Chains[0]
	server, err := d.Node(p, c.To)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.Daemon([]string{"iperf3", "-s", "-1"}, d.Journal.NodeDir(p.Lab)+"/iperf3.log"); err != nil {
		t.Fatal(err)
	}
	client, err := d.Node(p, c.From)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"iperf3", "-c", c.Target.String(), "-t", "5", "-J"}
	if c.Port != 0 {
		args = append(args, "-p", fmt.Sprint(c.Port))
	}
	var out []byte
	for try := 0; try < 20; try++ {
		if out, err = client.Output(context.Background(), nil, args...); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3: %v\n%s", err, out)
	}
	res, err := iperf3probe.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	return res.ReceivedBPS
}
