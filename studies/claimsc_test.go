package studies

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/results"
)

// runC is a synthetic run of study C's data plane: throughput (Gbit/s) per scenario for three
// trials, Fig. 6 egress series where v4 carries v4share of the three flows' sum, and a tap on
// another host getting tapShare of what the hop before it sent.
func runC(thr map[string]float64, v4share, tapShare float64) report.Input {
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	in := report.Input{Run: results.Run{Experiment: "c", Study: OpenStackSFC, Started: t0, Ended: t0.Add(time.Hour), Complete: true},
		Baseline: "c0", Published: Published(OpenStackSFC)}
	for _, s := range []string{"c0", "c1", "c2", "c3", "c4", "c5", "c6", "same-d", "other", "c6-1host", "c6-routed-4hosts", "c6-routed", "fig6", "tap-local", "tap-remote"} {
		in.Scenarios = append(in.Scenarios, s)
	}
	for _, sc := range in.Scenarios {
		for trial := 1; trial <= 3; trial++ {
			in.Trials = append(in.Trials, results.Trial{Experiment: "c", Scenario: sc, Trial: trial, Status: results.TrialOK, Started: t0, Ended: t0})
			add := func(metric, unit string, v float64, labels map[string]string) {
				probe := "flows"
				if metric == "throughput" {
					probe = "iperf3"
				}
				in.Samples = append(in.Samples, results.Sample{Experiment: "c", Scenario: sc, Trial: trial, Probe: probe, Metric: metric, Unit: unit, Value: v, Time: t0, Labels: labels})
			}
			if g, ok := thr[sc]; ok {
				add("throughput", "bit/s", g*(1+0.01*float64(trial-2))*1e9, map[string]string{"side": "receiver", "protocol": "tcp", "streams": "1"})
			}
			switch sc {
			case "fig6":
				for t := 1; t <= 9; t++ {
					v := map[string]float64{"v1": 3e6}
					if t <= 6 {
						v["v2"] = 2e6
					}
					if t <= 3 {
						v["v3"] = 1e6
					}
					v["v4"] = (v["v1"] + v["v2"] + v["v3"]) * v4share
					for node, bits := range v {
						add("egress_rate", "bit/s", bits, map[string]string{"node": node, "t": fmt.Sprint(t)})
					}
				}
				for i, f := range []string{"sfp3", "sfp2", "sfp1"} {
					add("flow_throughput", "bit/s", float64(i+1)*1e6, map[string]string{"flow": f, "side": "receiver", "duration": fmt.Sprintf("%ds", 3*(i+1))})
				}
			case "tap-local", "tap-remote":
				host := map[string]string{"tap-local": "contr01", "tap-remote": "comp03"}[sc]
				share := map[string]float64{"tap-local": 1, "tap-remote": tapShare}[sc]
				add("egress_bytes", "bytes", 1e7, map[string]string{"node": "v1", "host": "contr01"})
				add("tap_bytes", "bytes", 1e7*share, map[string]string{"node": "tap", "host": host, "prev": "v1", "prev_host": "contr01"})
			}
		}
	}
	return in
}

func TestClaimsC(t *testing.T) {
	thr := map[string]float64{"c0": 9, "c1": 7, "c2": 4, "c3": 3, "c4": 2.5, "c5": 2, "c6": 1.8, "same-d": 3.4, "other": 2, "c6-1host": 6, "c6-routed-4hosts": 3, "c6-routed": 6}
	check := func(in report.Input, want []string) {
		t.Helper()
		r, err := report.Build(in)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range claimsC {
			res := c.Check(r)
			if res.Outcome != want[i] || res.Evidence == "" {
				t.Errorf("%q: %s (%s), want %s", c.Text, res.Outcome, res.Evidence, want[i])
			}
			// The crossing claim shows routed steering's four hosts against its one host beside
			// the transparent chains' (c6-routed-4hosts 3 over c6-routed 6 Gbit/s).
			if strings.HasPrefix(c.Text, "crossing") && !strings.Contains(res.Evidence, "routed steering, C6 on four hosts over C6 on one host: 0.50×") {
				t.Errorf("%q lacks the routed comparison: %s", c.Text, res.Evidence)
			}
		}
	}
	// Like the study, but with a tap that works across hosts (the study's did not).
	check(runC(thr, 1, 1), []string{report.Holds, report.Holds, report.Holds, report.Holds, report.DoesNotHold})
	// A tap that gets nothing on another host: the study's finding.
	check(runC(thr, 1, 0), []string{report.Holds, report.Holds, report.Holds, report.Holds, report.Holds})

	// C3 faster than C2, with D slower than on another node, hosts cost nothing, v4 short
	// of the sum.
	thr["c3"], thr["same-d"], thr["c6-1host"] = 4.5, 1.5, 1.8
	check(runC(thr, 0.5, 1), []string{report.HoldsDirection, report.DoesNotHold, report.NotShown, report.DoesNotHold, report.DoesNotHold})
}
