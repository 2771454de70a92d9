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
		ThroughputPart: ThroughputPart{Throughput: []ThroughputRow{{Scenario: "baseline", Summary: sum(10)}, {Scenario: "2-vnf", Summary: sum(4)},
			{Scenario: "2-vnf-splice", Summary: sum(5)}, {Scenario: "2-vnf-sfclb", Summary: sum(8)}, {Scenario: "2-vnf-nftlb", Summary: sum(9)}}},
		CPUPart: CPUPart{CPU: []CPURow{{Scenario: "2-vnf", Node: "lb", Total: sum(1)}, {Scenario: "2-vnf-splice", Node: "lb", Total: sum(0.5)},
			{Scenario: "2-vnf-sfclb", Node: "lb", Total: sum(0.4)}, {Scenario: "2-vnf-sfclb", Node: "fw", Total: sum(0.9)}}},
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

// TestBalancersTCG checks that a balancer in VMs under TCG is marked and never set against one
// on a real CPU: the fastest is picked among the real ones and no ratio names the TCG scenario.
func TestBalancersTCG(t *testing.T) {
	sum := func(v float64) stats.Summary { return stats.Summary{N: 2, Mean: v} }
	for _, tc := range []struct {
		name, env string
		want      []string
		notWant   []string
	}{
		{"netns beside TCG", "netns-2-vnf=lb:haproxy;vm-2-vnf=lb:haproxy",
			[]string{"Fastest terminating balancer: haproxy (netns-2-vnf, 8.00 Gbit/s)", "vm-2-vnf ran in VMs under TCG", "| vm-2-vnf (" + EmulatedMark + ") |"},
			[]string{"x of haproxy's throughput (vm-2-vnf)"}},
		{"TCG only", "vm-2-vnf=lb:haproxy",
			[]string{"Fastest terminating balancer: haproxy (vm-2-vnf (" + EmulatedMark + "), 0.50 Gbit/s)"},
			[]string{"not compared with the others"}},
	} {
		r := &Report{
			Run:            results.Run{Env: map[string]string{EnvBalancers: tc.env, EnvVMAccel: "tcg: no KVM"}},
			Runtimes:       map[string]string{"netns-2-vnf": "netns", "vm-2-vnf": "vm"},
			Scenarios:      []string{"netns-2-vnf", "vm-2-vnf"},
			ThroughputPart: ThroughputPart{Throughput: []ThroughputRow{{Scenario: "netns-2-vnf", Summary: sum(8)}, {Scenario: "vm-2-vnf", Summary: sum(0.5)}}},
		}
		sec, ok := r.balancerSection()
		if !ok {
			t.Fatalf("%s: no balancer section", tc.name)
		}
		var text string
		for _, b := range sec.blocks {
			text += b.para
			if b.table != nil {
				for _, row := range b.table.rows {
					text += "| " + strings.Join(row, " | ") + " |"
				}
			}
		}
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: section lacks %q: %s", tc.name, w, text)
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(text, w) {
				t.Errorf("%s: section has %q: %s", tc.name, w, text)
			}
		}
	}
}

// TestCPUFindingTCGMark checks that the CPU section's finding for a scenario that ran VMs under
// TCG carries the mark, as its table rows do, and one on a real CPU does not.
func TestCPUFindingTCGMark(t *testing.T) {
	sum := func(v float64) stats.Summary { return stats.Summary{N: 2, Mean: v} }
	r := &Report{
		Run:      results.Run{Env: map[string]string{EnvVMAccel: "tcg: no KVM"}},
		Runtimes: map[string]string{"netns-1-vnf": "netns", "vm-1-vnf": "vm"},
		CPUPart: CPUPart{CPU: []CPURow{{Scenario: "netns-1-vnf", Node: "fw", Total: sum(0.1), User: sum(0.05), System: sum(0.05)},
			{Scenario: "vm-1-vnf", Node: "fw", Total: sum(0.9), User: sum(0.6), System: sum(0.3)}}},
	}
	if f := r.cpuFinding("vm-1-vnf"); !strings.HasPrefix(f, "vm-1-vnf ("+EmulatedMark+"): ") {
		t.Errorf("TCG finding = %q, want it to start with the marked scenario", f)
	}
	if f := r.cpuFinding("netns-1-vnf"); !strings.HasPrefix(f, "netns-1-vnf: ") {
		t.Errorf("netns finding = %q", f)
	}
}

// TestOtherTCGMark checks that the Other measurements table marks a scenario that ran VMs
// under TCG (iperf3's process_cpu measured in a guest, say) and not one on a real CPU.
func TestOtherTCGMark(t *testing.T) {
	r := &Report{
		Run:      results.Run{Env: map[string]string{EnvVMAccel: "tcg: no KVM"}},
		Runtimes: map[string]string{"netns": "netns", "vm-server": "vm"},
		OtherPart: OtherPart{Other: []OtherRow{{Probe: "iperf3", Metric: "process_cpu", Unit: "%", Scenario: "vm-server", Summary: stats.Summary{N: 1, Mean: 50}},
			{Probe: "iperf3", Metric: "process_cpu", Unit: "%", Scenario: "netns", Summary: stats.Summary{N: 1, Mean: 10}}}},
	}
	sec, ok := r.otherSection()
	if !ok {
		t.Fatal("no Other measurements section")
	}
	rows := sec.blocks[0].table.rows
	if rows[0][2] != "vm-server ("+EmulatedMark+")" || rows[1][2] != "netns" {
		t.Errorf("scenario cells %q, %q; want the TCG one marked, the netns one not", rows[0][2], rows[1][2])
	}
}

// TestRatioTCGMark checks that a paired ratio of a TCG scenario (against another TCG one, which
// may be compared) carries the mark in the ratios table.
func TestRatioTCGMark(t *testing.T) {
	r := &Report{
		Run:       results.Run{Env: map[string]string{EnvVMAccel: "tcg: no KVM"}},
		Runtimes:  map[string]string{"vm-server": "vm", "vm-client": "vm"},
		Scenarios: []string{"vm-server", "vm-client"},
		Baseline:  "vm-server",
		ThroughputPart: ThroughputPart{Throughput: []ThroughputRow{{Scenario: "vm-server", Trials: []int{1, 2}, Gbits: []float64{1, 1.2}},
			{Scenario: "vm-client", Trials: []int{1, 2}, Gbits: []float64{2, 2.2}}}},
	}
	sec, ok := r.ratioSection()
	if !ok {
		t.Fatal("no ratios section")
	}
	if got := sec.blocks[0].table.rows[0][0]; got != "vm-client ("+EmulatedMark+")" {
		t.Errorf("scenario cell %q; want it marked", got)
	}
}
