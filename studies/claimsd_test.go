package studies

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/results"
)

// runD is a synthetic run of study D's grid: per driver, count 0 and count 8 of network load
// on the sender's host, at 1000 pps; path RTTs in ms per driver, the app RTT 10 µs more; the
// responder host's busy share per driver (%).
func runD(path map[string]float64, busy map[string]float64, network bool) report.Input {
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	in := report.Input{Run: results.Run{Experiment: "d", Study: "rtt-background-load", Started: t0, Ended: t0.Add(time.Hour), Complete: true},
		Published: Published("rtt-background-load")}
	kind := "cpu"
	if network {
		kind = "network"
	}
	for _, driver := range []string{"veth", "macvlan", "ebpf-redirect"} {
		for _, count := range []int{0, 8} {
			sc := driver + ".bg-0"
			if count > 0 {
				sc = driver + ".bg-" + kind + "-sender-8"
			}
			in.Scenarios = append(in.Scenarios, sc)
			add := func(probe, metric, unit string, v float64, labels map[string]string) {
				in.Samples = append(in.Samples, results.Sample{Experiment: "d", Scenario: sc, Trial: 1, Probe: probe, Metric: metric, Unit: unit, Value: v, Time: t0, Labels: labels})
			}
			add("load", "background_nodes", "count", float64(count), map[string]string{"kind": map[bool]string{true: kind}[count > 0], "side": "sender"})
			for i := range 9 {
				l := map[string]string{"rate": "1000", "seq": strconv.Itoa(i)}
				p := path[driver] * float64(1+count/8) * (1 + 0.01*float64(i))
				add("rtt", "path", "ms", p, l)
				add("rtt", "rtt", "ms", p+0.01, l)
			}
			for _, h := range []string{"sender", "responder"} {
				add("cpu", "host_usr", "%", busy[driver], map[string]string{"host": h, "cores": "0"})
			}
		}
	}
	return in
}

func TestClaimsD(t *testing.T) {
	path := map[string]float64{"veth": 0.05, "macvlan": 0.04, "ebpf-redirect": 0.02}
	busy := map[string]float64{"veth": 3, "macvlan": 2.5, "ebpf-redirect": 2}
	for _, tt := range []struct {
		name    string
		network bool
		want    [2][]string // evidence parts of each claim
	}{
		{"network load", true, [2][]string{
			{"SR-IOV is not available on this host", "macvlan/ebpf-redirect 2.00× (sender's host, 1000 pps)", "veth/ebpf-redirect 2.50× (sender's host, 1000 pps)", "with 8 background nodes of network load", "Published: about 10-15×"},
			{"responder host: ebpf-redirect 2.00 %, macvlan 2.50 %, veth 3.00 %", "sender host:"},
		}},
		{"cpu load only", false, [2][]string{
			{"SR-IOV is not available on this host", "no cell with network load"},
			{"responder host: ebpf-redirect 2.00 %"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := report.Build(runD(path, busy, tt.network))
			if err != nil {
				t.Fatal(err)
			}
			if len(claimsD) != 2 {
				t.Fatalf("%d claims", len(claimsD))
			}
			for i, c := range claimsD {
				res := c.Check(r)
				if res.Outcome != report.NotShown {
					t.Errorf("%q: %s, want %s: this host has no SR-IOV", c.Text, res.Outcome, report.NotShown)
				}
				for _, w := range tt.want[i] {
					if !strings.Contains(res.Evidence, w) {
						t.Errorf("%q: evidence %q lacks %q", c.Text, res.Evidence, w)
					}
				}
			}
		})
	}
}
