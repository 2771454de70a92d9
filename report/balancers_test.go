package report

import (
	"math"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/stats"
)

func TestBalancers(t *testing.T) {
	sum := func(v float64) stats.Summary { return stats.Summary{N: 3, Mean: v} }
	r := &Report{
		Run:       results.Run{Env: map[string]string{EnvBalancers: "2-vnf=lb:haproxy;2-vnf-splice=lb:haproxy-splice;2-vnf-sfclb=lb:sfclab;2-vnf-nftlb=lb:nft"}},
		Scenarios: []string{"baseline", "2-vnf", "2-vnf-splice", "2-vnf-sfclb", "2-vnf-nftlb"},
		Throughput: []ThroughputRow{{Scenario: "baseline", Summary: sum(10)}, {Scenario: "2-vnf", Summary: sum(4)},
			{Scenario: "2-vnf-splice", Summary: sum(5)}, {Scenario: "2-vnf-sfclb", Summary: sum(8)}, {Scenario: "2-vnf-nftlb", Summary: sum(9)}},
		CPU: []CPURow{{Scenario: "2-vnf", Node: "lb", Total: sum(1)}, {Scenario: "2-vnf-splice", Node: "lb", Total: sum(0.5)},
			{Scenario: "2-vnf-sfclb", Node: "lb", Total: sum(0.4)}, {Scenario: "2-vnf-sfclb", Node: "fw", Total: sum(0.9)}},
	}
	rows := r.Balancers()
	want := []struct {
		scenario, impl string
		perGbit        float64
	}{{"2-vnf", "haproxy", 0.25}, {"2-vnf-splice", "haproxy-splice", 0.1}, {"2-vnf-sfclb", "sfclab", 0.05}, {"2-vnf-nftlb", "nft", math.NaN()}}
	if len(rows) != len(want) {
		t.Fatalf("rows = %+v", rows)
	}
	for i, w := range want {
		got := rows[i]
		if got.Scenario != w.scenario || got.Impl != w.impl || !(math.Abs(got.PerGbit-w.perGbit) < 1e-9 || math.IsNaN(w.perGbit) && math.IsNaN(got.PerGbit)) {
			t.Errorf("row %d = %+v, want %s %s %.3f cores per Gbit/s", i, got, w.scenario, w.impl, w.perGbit)
		}
	}
	sec, ok := r.balancerSection()
	if !ok {
		t.Fatal("no balancer section")
	}
	var text string
	for _, b := range sec.blocks {
		text += b.para
	}
	// nft moved more but does not terminate TCP: the fastest terminating one is sfclab.
	if !strings.Contains(text, "Fastest terminating balancer: sfclab (2-vnf-sfclb, 8.00 Gbit/s)") ||
		!strings.Contains(text, "1.60x of haproxy-splice's throughput (2-vnf-splice)") {
		t.Errorf("section text: %s", text)
	}
	if _, ok := (&Report{}).balancerSection(); ok {
		t.Error("a run without balancers got a balancer section")
	}
}
