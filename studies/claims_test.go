package studies

import (
	"fmt"
	"testing"
	"time"

	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/results"
)

// runA is a synthetic run of study A's scenarios: throughput per trial, ping
// RTT and CPU per node, scaled by the factors given.
func runA(thr map[string][3]float64, ping map[string]float64, cpu map[string]map[string]float64) report.Input {
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	in := report.Input{Run: results.Run{Experiment: "a", Study: "single-host-chain", Started: t0, Ended: t0.Add(time.Hour), Complete: true},
		Scenarios: []string{"baseline", "1-vnf", "2-vnf"}, Published: Published("single-host-chain")}
	for _, sc := range in.Scenarios {
		for trial := 1; trial <= 3; trial++ {
			in.Trials = append(in.Trials, results.Trial{Experiment: "a", Scenario: sc, Trial: trial, Status: results.TrialOK, Started: t0, Ended: t0})
			add := func(probe, metric, unit string, v float64, labels map[string]string) {
				in.Samples = append(in.Samples, results.Sample{Experiment: "a", Scenario: sc, Trial: trial, Probe: probe, Metric: metric, Unit: unit, Value: v, Time: t0, Labels: labels})
			}
			add("iperf3", "throughput", "bit/s", thr[sc][trial-1]*1e9, map[string]string{"side": "receiver", "protocol": "tcp", "streams": "1"})
			if p, ok := ping[sc]; ok {
				for seq := 1; seq <= 5; seq++ {
					add("ping", "rtt", "ms", p*(1+0.01*float64(seq+trial)), map[string]string{"seq": fmt.Sprint(seq)})
				}
			}
			for node, c := range cpu[sc] {
				add("cpu", "cpu_user", "cores", c*(0.3+0.01*float64(trial)), map[string]string{"node": node})
				add("cpu", "cpu_system", "cores", c*0.7, map[string]string{"node": node})
			}
		}
	}
	return in
}

func TestClaimsA(t *testing.T) {
	thr := map[string][3]float64{"baseline": {29.0, 29.5, 30.0}, "1-vnf": {19.5, 19.7, 20.1}, "2-vnf": {2.30, 2.36, 2.41}}
	ping := map[string]float64{"baseline": 0.089, "1-vnf": 0.177}
	cpu := map[string]map[string]float64{
		"baseline": {"client": 0.9, "server": 1.0},
		"1-vnf":    {"client": 0.8, "fw": 0.001, "server": 0.9},
		"2-vnf":    {"client": 0.2, "fw": 0.001, "lb": 1.18, "server": 0.2},
	}
	check := func(in report.Input, want []string) {
		t.Helper()
		r, err := report.Build(in)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range claimsA {
			res := c.Check(r)
			if res.Outcome != want[i] || res.Evidence == "" {
				t.Errorf("%q: %s (%s), want %s", c.Text, res.Outcome, res.Evidence, want[i])
			}
		}
	}
	// The published figures themselves: every conclusion holds.
	check(runA(thr, ping, cpu), []string{report.Holds, report.Holds, report.Holds, report.Holds, report.Holds})

	// A run where the firewall costs nothing, latency grows by a fifth, the
	// load balancer is not the busiest node and the firewall's cgroup is busy.
	thr["1-vnf"] = [3]float64{29.2, 29.4, 30.1}
	ping["1-vnf"] = 0.107
	cpu["2-vnf"]["server"] = 1.5
	cpu["1-vnf"]["fw"] = 0.2
	check(runA(thr, ping, cpu), []string{report.NotShown, report.Holds, report.HoldsDirection, report.DoesNotHold, report.DoesNotHold})
}
