package report

import (
	"strings"
	"testing"

	"github.com/sfclab/sfclab/results"
)

// TestRTTAttempts: a run repeated until every echo came back reports the runs each trial
// needed, and its figures are of each trial's last run only (an earlier, lossy run with
// 10x the round trip stays out of them).
func TestRTTAttempts(t *testing.T) {
	var samples []results.Sample
	for trial, runs := range map[int]int{1: 2, 2: 1} {
		for attempt := 1; attempt <= runs; attempt++ {
			final := attempt == runs
			base := 0.030
			if !final {
				base = 0.300
			}
			for _, s := range rttSamples("veth.bg-0", 0, "", 10, base, 0) {
				s.Trial = trial
				if s.Probe == "rtt" {
					s.Labels["attempt"] = string(rune('0' + attempt))
					s.Labels["final"] = map[bool]string{true: "true", false: "false"}[final]
				}
				samples = append(samples, s)
			}
		}
		l := map[string]string{"rate": "1000", "protocol": "icmp", "size": "64", "complete": "true"}
		samples = append(samples,
			results.Sample{Scenario: "veth.bg-0", Trial: trial, Probe: "rtt", Metric: "attempts", Unit: "count", Value: float64(runs), Labels: l},
			results.Sample{Scenario: "veth.bg-0", Trial: trial, Probe: "rtt", Metric: "attempt_cap", Unit: "count", Value: 5, Labels: l})
	}
	r, err := Build(Input{Run: results.Run{Experiment: "t", Complete: true}, Samples: samples})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.RTT) != 1 {
		t.Fatalf("rows %+v", r.RTT)
	}
	row := r.RTT[0]
	if row.RTT.N != 20 || row.RTT.Max > 0.031 || len(row.Attempts) != 2 || row.Attempts[0] != 2 || row.Attempts[1] != 1 || row.AttemptCap != 5 || row.Incomplete != 0 {
		t.Errorf("row: n %d, max %g, attempts %v cap %d incomplete %d; want the last runs' 20 echoes, attempts [2 1] of at most 5", row.RTT.N, row.RTT.Max, row.Attempts, row.AttemptCap, row.Incomplete)
	}
	md := renderMarkdown(t, r)
	for _, want := range []string{"| veth.bg-0 | 1000 | 2, 1 | 5 | 0 |", "Runs repeated until every echo came back: 1 of 2 trials needed more than one run; 0 still lost echoes at the bound"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md.String())
		}
	}
}
