package report

import (
	"math"
	"strings"
	"testing"
)

func TestPairedRatio(t *testing.T) {
	// Trial 2 of the scenario failed; trial 4 has no baseline: two pairs, 2× and 8×.
	q := pairedRatio("s", "b", []int{1, 3, 4}, []float64{2, 16, 5}, []int{1, 2, 3}, []float64{1, 7, 2})
	if q.Pairs != 2 || math.Abs(q.Value-4) > 1e-12 || !(q.Low < 4 && q.High > 4 && q.Low > 0) {
		t.Errorf("pairedRatio = %+v; want 2 pairs, geometric mean 4, a positive CI around it", q)
	}
	if !strings.Contains(q.Text(), "4.00× b (geometric mean of 2 paired repetitions, 95 % CI") {
		t.Errorf("Text = %q", q.Text())
	}
	// No common repetition: the ratio of the means, said so, no CI, no test.
	q = pairedRatio("s", "b", []int{1}, []float64{3}, []int{2}, []float64{1.5})
	if q.Pairs != 0 || q.Value != 2 || !math.IsNaN(q.P) || q.PErr == "" || q.Excludes(1) || !strings.Contains(q.Text(), "no CI") {
		t.Errorf("unpaired = %+v %q", q, q.Text())
	}
	// A CI wholly above 1 excludes no change upwards, not downwards.
	q = pairedRatio("s", "b", []int{1, 2, 3}, []float64{2, 2.1, 1.9}, []int{1, 2, 3}, []float64{1, 1, 1})
	if !q.Excludes(1) || q.Excludes(-1) {
		t.Errorf("Excludes on %+v", q)
	}
}

func TestTrendItems(t *testing.T) {
	r := &Report{Scenarios: []string{"c0", "c2", "c6"}}
	for i, s := range r.Scenarios {
		nodes := []string{"2", "4", "8"}[i]
		r.Deploy = append(r.Deploy, DeployRow{Scenario: s, Nodes: nodes})
		base := []float64{30, 20, 8}[i]
		r.Throughput = append(r.Throughput, ThroughputRow{Scenario: s, Trials: []int{1, 2, 3}, Gbits: []float64{base, base + 1, base - 1}})
	}
	items := r.trendItems()
	if len(items) != 1 || !strings.Contains(items[0], "Trend of throughput with the lab's number of nodes (chain length): Kendall tau-b -0.87 over 9 trials, p = 0.003") {
		t.Errorf("trend items %q", items)
	}
	// Two distinct chain lengths are no trend to test.
	r.Deploy[2].Nodes = "4"
	if items := r.trendItems(); len(items) != 0 {
		t.Errorf("trend over two values: %q", items)
	}
}

func TestBaselineFor(t *testing.T) {
	r := &Report{Baseline: "baseline", Scenarios: []string{"baseline", "fw", "netns-baseline", "netns-fw", "other"},
		Runtimes: map[string]string{"baseline": "docker", "fw": "docker", "netns-baseline": "netns", "netns-fw": "netns", "other": "kvm"}}
	for s, want := range map[string]string{"fw": "baseline", "netns-fw": "netns-baseline", "netns-baseline": "baseline", "other": "baseline"} {
		if got := r.BaselineFor(s); got != want {
			t.Errorf("BaselineFor(%s) = %s, want %s", s, got, want)
		}
	}
	// Variants of one runtime: c3-routed against c0-routed, c3 and c3-x against c0.
	r = &Report{Baseline: "c0", Scenarios: []string{"c0", "c3", "c0-routed", "c3-routed", "c3-x", "c0-1host", "c6-1host"}}
	for s, want := range map[string]string{"c3": "c0", "c3-routed": "c0-routed", "c3-x": "c0", "c6-1host": "c0-1host", "c0-routed": "c0"} {
		if got := r.BaselineFor(s); got != want {
			t.Errorf("BaselineFor(%s) = %s, want %s", s, got, want)
		}
	}
}
