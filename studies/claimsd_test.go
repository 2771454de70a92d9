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
		want    [3][]string // evidence parts of each claim
	}{
		{"network load", true, [3][]string{
			{"The grid has no SR-IOV driver", "macvlan/ebpf-redirect 2.00× (sender's host, 1000 pps)", "veth/ebpf-redirect 2.50× (sender's host, 1000 pps)", "with 8 background nodes of network load", "Published: about 10-15×"},
			{"responder host: ebpf-redirect 2.00 %, macvlan 2.50 %, veth 3.00 %", "sender host:"},
			{"The grid has no SR-IOV driver", "no background-driver factor"},
		}},
		{"cpu load only", false, [3][]string{
			{"The grid has no SR-IOV driver", "no cell with network load"},
			{"responder host: ebpf-redirect 2.00 %"},
			{"no background-driver factor"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := report.Build(runD(path, busy, tt.network))
			if err != nil {
				t.Fatal(err)
			}
			if len(claimsD) != 3 {
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

// TestClaimsDBackgroundDriver: with the background nodes' driver as a factor (study D §5.2),
// the third claim gives each series' path RTT and names the highest, and the first keeps the
// cells of each background driver apart.
func TestClaimsDBackgroundDriver(t *testing.T) {
	path := map[string]float64{"veth": 0.05, "macvlan": 0.04, "ebpf-redirect": 0.02}
	in := runD(path, map[string]float64{"veth": 3, "macvlan": 2.5, "ebpf-redirect": 2}, true)
	var extra []results.Sample
	for i, x := range in.Samples {
		if !strings.HasSuffix(x.Scenario, "-sender-8") {
			continue
		}
		in.Samples[i].Scenario += "-on-same"
		if x.Probe == "load" {
			in.Samples[i].Labels = map[string]string{"kind": "network", "side": "sender", "driver": "same", "bitrate": "max"}
		}
		if strings.HasPrefix(x.Scenario, "macvlan.") { // the main pair on the bridge, the background on the fast path
			y := x
			y.Scenario += "-on-ebpf-redirect"
			if y.Probe == "load" {
				y.Labels = map[string]string{"kind": "network", "side": "sender", "driver": "ebpf-redirect", "bitrate": "max"}
			}
			if y.Probe == "rtt" {
				y.Value *= 0.75
			}
			extra = append(extra, y)
		}
	}
	in.Samples = append(in.Samples, extra...)
	for i, sc := range in.Scenarios {
		if strings.HasSuffix(sc, "-sender-8") {
			in.Scenarios[i] += "-on-same"
		}
	}
	in.Scenarios = append(in.Scenarios, "macvlan.bg-network-sender-8-on-ebpf-redirect")
	r, err := report.Build(in)
	if err != nil {
		t.Fatal(err)
	}
	res := claimsD[2].Check(r)
	for _, w := range []string{"main ebpf-redirect, background ebpf-redirect 41.6 µs", "main macvlan, background ebpf-redirect 62.4 µs", "main macvlan, background macvlan 83.2 µs",
		"highest: main veth, background veth"} {
		if !strings.Contains(res.Evidence, w) {
			t.Errorf("evidence %q lacks %q", res.Evidence, w)
		}
	}
	if res := claimsD[0].Check(r); !strings.Contains(res.Evidence, "macvlan/ebpf-redirect 2.00× (sender's host, 1000 pps, unthrottled, background on the main pair's driver)") ||
		strings.Contains(res.Evidence, "background on ebpf-redirect") {
		t.Errorf("network claim mixes background drivers: %s", res.Evidence)
	}
}
