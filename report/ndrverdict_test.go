package report

import (
	"strings"
	"testing"
)

// TestNDRVerdict checks that the verdict gives each scenario's NDR per frame size as its
// section's table does: a lower bound marked "≥" with its reason, a search the generator could
// not decide as not found, and nothing for a scenario without NDR searches.
func TestNDRVerdict(t *testing.T) {
	r := &Report{Scenarios: []string{"baseline", "1-vnf", "other"}}
	r.NDR = []NDRRow{
		{Scenario: "baseline", Frame: "64", Trial: 1, NDR: 120e3, Converged: true},
		{Scenario: "baseline", Frame: "64", Trial: 2, NDR: 118e3, Stopped: "no loss below 150.0 kpps, which the generator could not hold"},
		{Scenario: "baseline", Frame: "imix", Trial: 1, NDR: 90e3, AtLeast: true},
		{Scenario: "1-vnf", Frame: "1518", Trial: 1, Limited: true, Reason: "generator"},
	}
	items := r.ndrVerdict()
	want := []string{
		"No-drop rate (UDP) of baseline, kpps per frame size: 64 B: 120.0, ≥ 118.0 (no loss below 150.0 kpps, which the generator could not hold); imix: ≥ 90.0 (no loss at the max rate)",
		"No-drop rate (UDP) of 1-vnf, kpps per frame size: 1518 B: not found: generator-limited (no loss at its maximum)",
	}
	if len(items) != len(want) {
		t.Fatalf("items = %q, want %d", items, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(items[i], w) {
			t.Errorf("item %d = %q, want it to start %q", i, items[i], w)
		}
	}
	if got := (&Report{Scenarios: []string{"a"}}).ndrVerdict(); len(got) != 0 {
		t.Errorf("a run without NDR searches got %q", got)
	}
}

// TestNDRTextNoPass checks that a search in which no trial passed never prints its NDR field's
// 0 as a rate: it says what the lowest rate tried lost, and every other kind of NDR keeps its
// wording.
func TestNDRTextNoPass(t *testing.T) {
	lost := []NDRStep{
		{Iteration: 1, Offered: 400e3, Loss: 62.5},
		{Iteration: 2, Offered: 119.6e3, Loss: 4.25},
		{Iteration: 3, Offered: 160e3, Loss: 20},
	}
	cases := []struct {
		name string
		row  NDRRow
		want string
	}{
		{"no pass, not converged", NDRRow{NDRHi: 119.6e3, Path: lost}, "not converged: lowest rate tried 119.6 kpps lost 4.2 %"},
		{"no pass, path not recorded", NDRRow{NDRHi: 119.6e3}, "not converged: every trial lost packets, the lowest at 119.6 kpps"},
		{"no pass, nothing recorded", NDRRow{}, "not converged: no trial ran without loss"},
		{"no pass, generator short", NDRRow{Stopped: "no loss below 150.0 kpps, which the generator could not hold", Path: lost},
			"no NDR (no loss below 150.0 kpps, which the generator could not hold): lowest rate tried 119.6 kpps lost 4.2 %"},
		{"passed, not converged", NDRRow{NDR: 100e3, Path: []NDRStep{{Offered: 100e3, PassNDR: true}}}, "100.0 (not converged)"},
		{"converged", NDRRow{NDR: 120e3, Converged: true}, "120.0"},
		{"at max", NDRRow{NDR: 90e3, AtLeast: true}, "≥ 90.0 (no loss at the max rate)"},
		{"limited", NDRRow{Limited: true, Reason: "generator"}, "not found: generator-limited (no loss at its maximum)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.row.ndrText(); got != c.want {
				t.Errorf("ndrText() = %q, want %q", got, c.want)
			}
			if got := c.row.ndrText(); strings.HasPrefix(got, "0.0") || strings.HasPrefix(got, "≥ 0.0") {
				t.Errorf("ndrText() = %q prints a zero rate", got)
			}
		})
	}
	r := &Report{Scenarios: []string{"baseline"}}
	r.NDR = []NDRRow{{Scenario: "baseline", Frame: "imix", Trial: 1, NDRHi: 119.6e3, Path: lost}}
	if items := r.ndrVerdict(); len(items) != 1 || !strings.Contains(items[0], "imix: not converged: lowest rate tried 119.6 kpps lost 4.2 %") {
		t.Errorf("verdict = %q, want the lowest rate tried and its loss", items)
	}
}
