package studies

import (
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/results"
)

// runB is a synthetic run of study B's no-cache scenarios: per scenario and trial, the total
// time of 10,000 requests of 1k at concurrency 1, s.
func runB(totals map[string][]float64) report.Input {
	t0 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	runtimes := map[string]string{"native-nocache": "netns", "native-cache": "netns", "docker-routed-nocache": "docker", "docker-nat-nocache": "docker"}
	in := report.Input{Run: results.Run{Experiment: "b", Study: "http-proxy", Started: t0, Ended: t0.Add(time.Hour), Complete: true},
		Scenarios: []string{"native-nocache", "docker-routed-nocache", "docker-nat-nocache", "native-cache"}}
	for _, sc := range in.Scenarios {
		for i, v := range totals[sc] {
			trial := i + 1
			in.Trials = append(in.Trials, results.Trial{Experiment: "b", Scenario: sc, Trial: trial, Status: results.TrialOK, Started: t0, Ended: t0})
			add := func(probe, metric, unit string, v float64, labels map[string]string) {
				in.Samples = append(in.Samples, results.Sample{Experiment: "b", Scenario: sc, Trial: trial, Probe: probe, Metric: metric, Unit: unit, Value: v, Time: t0, Labels: labels})
			}
			add("deploy", "deploy_time", "s", 0.3, map[string]string{"runtime": runtimes[sc], "nodes": "3"})
			add("http", "total_time", "s", v, map[string]string{"object": "1k", "concurrency": "1", "via": "proxy", "keepalive": "false"})
			add("http", "requests", "count", 10000, map[string]string{"object": "1k", "concurrency": "1", "via": "proxy", "keepalive": "false"})
		}
	}
	return in
}

// TestClaimsB checks study B's Docker claim is judged on each Docker cell's paired ratio and
// its CI, never on a point estimate alone, and that native-cache (netns against netns) is not
// taken for a Docker cell.
func TestClaimsB(t *testing.T) {
	for _, tt := range []struct {
		name   string
		totals map[string][]float64
		want   string
		says   string
	}{
		{"the published figures", map[string][]float64{
			"native-nocache":        {6.96, 6.98, 7.00},
			"docker-routed-nocache": {7.46, 7.48, 7.50},
			"docker-nat-nocache":    {7.47, 7.48, 7.49},
		}, report.Holds, "every one of 2 Docker cells"},
		{"docker clearly slower", map[string][]float64{
			"native-nocache":        {7.0, 7.1, 6.9},
			"docker-routed-nocache": {10.4, 10.6, 10.3},
			"docker-nat-nocache":    {7.5, 7.4, 7.6},
		}, report.DoesNotHold, "1 of 2 Docker cells"},
		// A mean +45 % from one slow trial: the CI reaches both sides of 1.25.
		{"noise decides nothing", map[string][]float64{
			"native-nocache":        {7.0, 14.0, 21.0},
			"docker-routed-nocache": {21.0, 14.0, 10.0},
			"docker-nat-nocache":    {7.1, 14.1, 21.2},
		}, report.NotShown, "cannot tell"},
		// native-cache far slower than native-nocache is no Docker overhead.
		{"native cache is not docker", map[string][]float64{
			"native-nocache":        {6.96, 6.98, 7.00},
			"docker-routed-nocache": {7.46, 7.48, 7.50},
			"docker-nat-nocache":    {7.47, 7.48, 7.49},
			"native-cache":          {30, 31, 32},
		}, report.Holds, "every one of 2 Docker cells"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := report.Build(runB(tt.totals))
			if err != nil {
				t.Fatal(err)
			}
			res := claimsB[0].Check(r)
			if res.Outcome != tt.want || !strings.Contains(res.Evidence, tt.says) {
				t.Errorf("%s (%s), want %s saying %q", res.Outcome, res.Evidence, tt.want, tt.says)
			}
		})
	}
}
