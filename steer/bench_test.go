package steer_test

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/probe/iperf3"
	"github.com/sfclab/sfclab/sfc"
)

// BenchmarkChainChange changes one chain (adds and removes a hop) 20 times while a UDP flow
// runs on another chain: it reports how long each change takes to be in the maps (the next
// packet uses it; checked with a ping per change), and the UDP datagrams lost meanwhile.
func BenchmarkChainChange(b *testing.B) {
	requireRoot(b)
	for i := 0; i < b.N; i++ {
		benchChainChange(b, fmt.Sprintf("steer-bc%d", i))
	}
}

func benchChainChange(t *testing.B, name string) {
	var res struct {
		applyMs []float64
		lost    int
		sent    int
		wrong   int
	}
	{
		{
			l := buildLab(t, name, []string{"h1"}, []fnode{
				{name: "s", host: "h1", ports: []string{"eth0"}},
				{name: "d", host: "h1", ports: []string{"eth0"}},
				{name: "f1", host: "h1", ports: []string{"eth0"}, pairs: [][2]string{{"eth0", "eth0"}}},
				{name: "f2", host: "h1", ports: []string{"eth0"}, pairs: [][2]string{{"eth0", "eth0"}}},
				{name: "f3", host: "h1", ports: []string{"eth0"}, pairs: [][2]string{{"eth0", "eth0"}}},
			})
			l.model.PortPairs = []sfc.PortPair{{Name: "p1", Ingress: "f1.eth0", Egress: "f1.eth0"},
				{Name: "p2", Ingress: "f2.eth0", Egress: "f2.eth0"}, {Name: "p3", Ingress: "f3.eth0", Egress: "f3.eth0"}}
			l.model.PortPairGroups = []sfc.PortPairGroup{{Name: "g1", PortPairs: []string{"p1"}},
				{Name: "g2", PortPairs: []string{"p2"}}, {Name: "g3", PortPairs: []string{"p3"}}}
			l.model.FlowClassifiers = []sfc.FlowClassifier{
				{Name: "udp", Protocol: "udp", DestinationPortRangeMin: 6000, DestinationPortRangeMax: 6000, LogicalSourcePort: "s.eth0"},
				{Name: "icmp", Protocol: "icmp", LogicalSourcePort: "s.eth0"}}
			l.model.PortChains = []sfc.PortChain{{Name: "udp", FlowClassifiers: []string{"udp"}, PortPairGroups: []string{"g1"}},
				{Name: "icmp", FlowClassifiers: []string{"icmp"}, PortPairGroups: []string{"g2"}}}
			tab := l.apply(t)
			icmp := tab.ChainPath("icmp")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			srv := exec.CommandContext(ctx, "ip", "netns", "exec", l.ns("d"), "iperf3", "-s", "-1", "-p", "6000")
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
			time.Sleep(200 * time.Millisecond)
			cli := exec.CommandContext(ctx, "ip", "netns", "exec", l.ns("s"), "iperf3", "-c", l.addr["d.eth0"].String(),
				"-p", "6000", "-u", "-b", "50M", "-l", "1200", "-t", "3", "-J")
			var out strings.Builder
			cli.Stdout = &out
			if err := cli.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond)
			for k := 0; k < 20; k++ {
				groups := []string{"g2"}
				if k%2 == 0 {
					groups = []string{"g2", "g3"}
				}
				l.model.PortChains[1].PortPairGroups = groups
				tb, err := sfc.Compile(l.model, l.bind)
				if err != nil {
					t.Fatal(err)
				}
				before := l.counters(t)[[2]uint32{icmp, 1}]
				t0 := time.Now()
				if err := l.dp.Apply(tb); err != nil {
					t.Fatal(err)
				}
				res.applyMs = append(res.applyMs, float64(time.Since(t0).Microseconds())/1000)
				if o, err := l.run(t, "s", "ping", "-c", "1", "-W", "1", l.addr["d.eth0"].String()); err != nil {
					t.Fatalf("ping after change %d: %v\n%s", k, err, o)
				}
				// With g3 added, hop 1 is g3: the very next echo request must have gone there.
				if after := l.counters(t)[[2]uint32{icmp, 1}]; k%2 == 0 && after != before+1 {
					res.wrong++
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err := cli.Wait(); err != nil {
				t.Fatalf("iperf3 UDP: %v\n%s", err, out.String())
			}
			r, err := iperf3.Parse([]byte(out.String()))
			if err != nil {
				t.Fatal(err)
			}
			res.lost, res.sent = int(r.LostPackets), int(r.Packets)
		}
	}
	b := t
	slices.Sort(res.applyMs)
	b.ReportMetric(res.applyMs[len(res.applyMs)/2], "change-ms-median")
	b.ReportMetric(res.applyMs[len(res.applyMs)-1], "change-ms-max")
	b.ReportMetric(float64(res.lost), "udp-lost")
	b.ReportMetric(float64(res.sent), "udp-sent")
	b.ReportMetric(float64(res.wrong), "changes-not-in-effect")
}
