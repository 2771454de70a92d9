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
	per := map[string][3]float64{}
	for sc, g := range thr {
		per[sc] = [3]float64{g * 0.99, g, g * 1.01}
	}
	return runC3(per, v4share, tapShare)
}

// runC3 is runC with each trial's throughput given.
func runC3(thr map[string][3]float64, v4share, tapShare float64) report.Input {
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
				add("throughput", "bit/s", g[trial-1]*1e9, map[string]string{"side": "receiver", "protocol": "tcp", "streams": "1"})
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
			// Fig. 6's and the tap's fixed cut-offs are said next to the outcome.
			if i >= 3 && !strings.Contains(res.Evidence, "fixed cut-off") {
				t.Errorf("%q does not say its cut-off: %s", c.Text, res.Evidence)
			}
			if c.Rule == "" {
				t.Errorf("%q states no rule", c.Text)
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
	// (Page's trend test still shows the fall over C0..C6: one step's mean rising no longer
	// decides.)
	check(runC(thr, 0.5, 1), []string{report.Holds, report.DoesNotHold, report.NotShown, report.DoesNotHold, report.DoesNotHold})
}

// TestChainFalls checks study C's "falls with each function" is decided by Page's trend test
// on the per-trial throughput, each repetition a block, and not by counting the steps where
// the mean fell.
func TestChainFalls(t *testing.T) {
	for _, tt := range []struct {
		name string
		thr  [7][3]float64
		want string
		says string
	}{
		{"falls", [7][3]float64{{9, 9.1, 8.9}, {7, 7.2, 6.9}, {4, 4.1, 3.9}, {3, 3.1, 2.9}, {2.5, 2.6, 2.4}, {2, 2.1, 1.9}, {1.8, 1.9, 1.7}}, report.Holds, "every step's mean fell"},
		// Every step's mean falls and C6 is below C0 in every repetition (its CI excludes no
		// change), but the repetitions order the middle chains at random: counting means
		// called it "holds"; Page's test gives p = 0.132 (SciPy 1.10.1 page_trend_test of the
		// negated data, method "exact": 0.13194).
		{"means fall by chance", [7][3]float64{{4.76, 5.9, 5.44}, {4.98, 5.33, 5.3}, {5.81, 4.03, 5.69}, {5.43, 4.88, 5.18}, {5.63, 4.3, 5.38}, {5.28, 5.44, 4.5}, {4.33, 5.38, 4.95}}, report.NotShown, "one-sided p = 0.132"},
		{"rises", [7][3]float64{{1, 1.1, 0.9}, {2, 2.1, 1.9}, {3, 3.1, 2.9}, {4, 4.1, 3.9}, {5, 5.1, 4.9}, {6, 6.1, 5.9}, {7, 7.1, 6.9}}, report.DoesNotHold, "the rising order is significant"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			per := map[string][3]float64{}
			for i, v := range tt.thr {
				per[fmt.Sprintf("c%d", i)] = v
			}
			r, err := report.Build(runC3(per, 1, 0))
			if err != nil {
				t.Fatal(err)
			}
			res := claimsC[0].Check(r)
			if res.Outcome != tt.want || !strings.Contains(res.Evidence, tt.says) {
				t.Errorf("%s (%s), want %s saying %q", res.Outcome, res.Evidence, tt.want, tt.says)
			}
		})
	}
}
