package studies

import (
	"fmt"
	"math"
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

// runBTable is a synthetic run of every cell of study B's published table but KVM's: each
// trial's total time is the published mean, scaled per trial by a small paired spread
// (×0.999, ×1, ×1.001, the Docker cells slightly more), and scale multiplies chosen cells.
func runBTable(scale map[string]float64) report.Input {
	t0 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	runtimes := map[string]string{"native": "netns", "docker-routed": "docker", "docker-nat": "docker"}
	in := report.Input{Run: results.Run{Experiment: "b", Study: "http-proxy", Started: t0, Ended: t0.Add(time.Hour), Complete: true},
		Baseline: "native-nocache", Published: Published("http-proxy")}
	seen := map[string]bool{}
	for _, p := range publishedB() {
		if strings.HasPrefix(p.Scenario, "kvm") {
			continue
		}
		if !seen[p.Scenario] {
			seen[p.Scenario] = true
			in.Scenarios = append(in.Scenarios, p.Scenario)
		}
		platform := strings.TrimSuffix(strings.TrimSuffix(p.Scenario, "-nocache"), "-cache")
		for trial := 1; trial <= 3; trial++ {
			spread := 1 + 0.001*float64(trial-2)
			if platform != "native" {
				spread = 1 + 0.0015*float64(trial-2)
			}
			v := p.Seconds * spread
			if f, ok := scale[fmt.Sprintf("%s/%s/%d", p.Scenario, p.Object, p.Concurrency)]; ok {
				v *= f
			}
			labels := map[string]string{"object": p.Object, "concurrency": fmt.Sprint(p.Concurrency), "via": "proxy", "keepalive": "false"}
			in.Samples = append(in.Samples,
				results.Sample{Experiment: "b", Scenario: p.Scenario, Trial: trial, Probe: "http", Metric: "total_time", Unit: "s", Value: v, Time: t0, Labels: labels},
				results.Sample{Experiment: "b", Scenario: p.Scenario, Trial: trial, Probe: "http", Metric: "requests", Unit: "count", Value: 10000, Time: t0, Labels: labels},
				results.Sample{Experiment: "b", Scenario: p.Scenario, Trial: trial, Probe: "deploy", Metric: "deploy_time", Unit: "s", Value: 0.3, Time: t0, Labels: map[string]string{"runtime": runtimes[platform], "nodes": "3"}})
		}
	}
	for _, sc := range in.Scenarios {
		for trial := 1; trial <= 3; trial++ {
			in.Trials = append(in.Trials, results.Trial{Experiment: "b", Scenario: sc, Trial: trial, Status: results.TrialOK, Started: t0, Ended: t0})
		}
	}
	return in
}

// TestClaimsBPublishedTable feeds every cell of study B's published table (28 Docker cells,
// cache on and off, concurrency 1 and 100) into the Docker claim: the study's own figures must
// hold against the margin derived from them, and a Docker cell clearly beyond the study's
// worst must not. The 1.25 margin of before called the published table "does not hold"
// (Docker NAT, 10k, concurrency 100: 2.78 against 2.07 s, +34 %).
func TestClaimsBPublishedTable(t *testing.T) {
	if littleMargin.cell == "" || math.Abs(littleMargin.point-2.78/2.07) > 1e-12 || math.Abs(littleMargin.upper-2.79/2.06) > 1e-12 {
		t.Fatalf("margin %+v, want the 10k/c100 NAT cell 2.78/2.07 at its CI top 2.79/2.06", littleMargin)
	}
	for _, tt := range []struct {
		name  string
		scale map[string]float64
		want  string
		says  string
	}{
		{"the published table", nil, report.Holds, "every one of 28 Docker cells"},
		{"one cell 1.5 times the study's", map[string]float64{"docker-routed-nocache/100k/1": 1.5}, report.DoesNotHold, "1 of 28 Docker cells"},
		{"the worst cell 5 % worse", map[string]float64{"docker-nat-nocache/10k/100": 1.05}, report.DoesNotHold, "docker-nat-nocache, 10k objects at concurrency 100"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := report.Build(runBTable(tt.scale))
			if err != nil {
				t.Fatal(err)
			}
			res := claimsB[0].Check(r)
			if res.Outcome != tt.want || !strings.Contains(res.Evidence, tt.says) {
				t.Errorf("%s (%s), want %s saying %q", res.Outcome, res.Evidence, tt.want, tt.says)
			}
		})
	}
	if !strings.Contains(claimsB[0].Rule, "1.354×") || !strings.Contains(claimsB[0].Text, "+34 % in the study's own table: Docker NAT, 10k objects at concurrency 100, cache off: 2.78 against native's 2.07 s") {
		t.Errorf("claim %q, rule %q: want the derived margin named", claimsB[0].Text, claimsB[0].Rule)
	}
}
