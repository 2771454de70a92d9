package studies

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/results"
)

// runA is a synthetic run of study A's scenarios: throughput per trial (Gbit/s), ping RTT and
// CPU per node, and, when busy has the scenario, the host-wide busy share of the machine's two
// cores per trial (%), as the cpu probe's per-core sampling reports a shared host.
func runA(thr map[string][3]float64, ping map[string]float64, cpu map[string]map[string]float64, busy map[string][3]float64) report.Input {
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
				f := 0.3 + 0.01*float64(trial)
				if node == "server" && sc == "2-vnf" && cpu[sc]["lb"] > 0 && c > 1 {
					f = 0.3 + 0.05*float64(trial-2) // a busy server varies trial to trial
				}
				add("cpu", "cpu_user", "cores", c*f, map[string]string{"node": node})
				add("cpu", "cpu_system", "cores", c*0.7, map[string]string{"node": node})
			}
			if b, ok := busy[sc]; ok {
				host := map[string]string{"host": "machine", "cores": "0-1 (shared)"}
				add("cpu", "host_usr", "%", b[trial-1]*0.5, host)
				add("cpu", "host_sys", "%", b[trial-1]*0.3, host)
				add("cpu", "host_soft", "%", b[trial-1]*0.2, host)
			}
		}
	}
	return in
}

// publishedA is study A's published figures as a run: Table 3's throughput and Table 4's
// ping RTT with 1 % spread, Table 5's CPU, and a host whose busy CPU per Gbit/s is the same
// with and without the firewall.
func publishedA() (thr map[string][3]float64, ping map[string]float64, cpu map[string]map[string]float64, busy map[string][3]float64) {
	thr = map[string][3]float64{"baseline": {29.0, 29.5, 30.0}, "1-vnf": {19.5, 19.7, 20.1}, "2-vnf": {2.30, 2.36, 2.41}}
	ping = map[string]float64{"baseline": 0.089, "1-vnf": 0.177}
	cpu = map[string]map[string]float64{
		"baseline": {"client": 0.9, "server": 1.0},
		"1-vnf":    {"client": 0.8, "fw": 0.001, "server": 0.9},
		"2-vnf":    {"client": 0.2, "fw": 0.001, "lb": 1.18, "server": 0.2},
	}
	// 2 cores, 100 % busy at baseline's 29.0/29.5/30.0 Gbit/s: 2/29.5 cores per Gbit/s.
	// 1-vnf's busy share follows its throughput (fwBusy) unless a case sets it.
	busy = map[string][3]float64{"baseline": {100, 100, 100}, "1-vnf": {-1}}
	return
}

func TestClaimsA(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(thr map[string][3]float64, ping map[string]float64, cpu map[string]map[string]float64, busy map[string][3]float64)
		want   [5]string
		says   [5]string
	}{
		{"the published figures", func(map[string][3]float64, map[string]float64, map[string]map[string]float64, map[string][3]float64) {
		},
			[5]string{report.Holds, report.Holds, report.Holds, report.Holds, report.Holds},
			[5]string{"TOST against [0.57, 0.77]: p < 0.001", "TOST against [0.00, 0.18]", "TOST against [1.50, 2.50]", "95 % CI [", "lb (1.20 cores) over "}},
		// A 22 % drop is no "about 33 %", however tight its CI: today's CI-overlap rule with a
		// ±25 % band called it "holds".
		{"a 22 % drop", func(thr map[string][3]float64, _ map[string]float64, _ map[string]map[string]float64, _ map[string][3]float64) {
			thr["1-vnf"] = [3]float64{29.0 * 0.78, 29.5 * 0.779, 30.0 * 0.781}
		}, [5]string{report.HoldsDirection, report.Holds, report.Holds, report.Holds, report.Holds},
			[5]string{"lies wholly outside [0.57, 0.77]"}},
		// A 44 % drop, just beyond the band the other way.
		{"a 48 % drop", func(thr map[string][3]float64, _ map[string]float64, _ map[string]map[string]float64, _ map[string][3]float64) {
			thr["1-vnf"] = [3]float64{29.0 * 0.52, 29.5 * 0.521, 30.0 * 0.519}
		}, [5]string{report.HoldsDirection, report.Holds, report.Holds, report.Holds, report.Holds},
			[5]string{"lies wholly outside [0.57, 0.77]"}},
		// A 33 % drop on average, but repetitions too spread to pin its size.
		{"a spread drop", func(thr map[string][3]float64, _ map[string]float64, _ map[string]map[string]float64, _ map[string][3]float64) {
			thr["1-vnf"] = [3]float64{29.0 * 0.58, 29.5 * 0.66, 30.0 * 0.76}
		}, [5]string{report.NotShown, report.Holds, report.Holds, report.Holds, report.Holds},
			[5]string{"its size is not shown to be the published one"}},
		{"no drop, latency +20 %, the firewall costs the host, the server busiest", func(thr map[string][3]float64, ping map[string]float64, cpu map[string]map[string]float64, busy map[string][3]float64) {
			thr["1-vnf"] = [3]float64{29.2, 29.4, 30.1}
			ping["1-vnf"] = 0.107
			cpu["2-vnf"]["server"] = 1.5
			busy["1-vnf"] = [3]float64{100, 100, 100} // 2 cores for ~29.5 Gbit/s against 2 for 29.5: no extra ...
			busy["baseline"] = [3]float64{80, 80, 80} // ... but the baseline needed 1.6
		}, [5]string{report.NotShown, report.Holds, report.HoldsDirection, report.DoesNotHold, report.DoesNotHold},
			[5]string{"the CI includes no change", "", "lies wholly outside [1.50, 2.50]", "", "the load balancer is not the busiest node"}},
		// The firewall's own cgroup reads busy but the host spends nothing extra: the cgroup
		// decided the old rule ("does not hold"), the host decides now.
		{"busy cgroup, idle host", func(_ map[string][3]float64, _ map[string]float64, cpu map[string]map[string]float64, _ map[string][3]float64) {
			cpu["1-vnf"]["fw"] = 0.2
		}, [5]string{report.Holds, report.Holds, report.Holds, report.Holds, report.Holds},
			[5]string{"", "", "", "fw's own cgroup: 0.204 cores, which cannot show it"}},
		{"no host-wide CPU", func(_ map[string][3]float64, _ map[string]float64, _ map[string]map[string]float64, busy map[string][3]float64) {
			delete(busy, "1-vnf")
		}, [5]string{report.Holds, report.Holds, report.Holds, report.NotShown, report.Holds},
			[5]string{"", "", "", "not measurable here"}},
		{"lb not told apart", func(_ map[string][3]float64, _ map[string]float64, cpu map[string]map[string]float64, _ map[string][3]float64) {
			cpu["2-vnf"]["server"] = 1.17
		}, [5]string{report.Holds, report.Holds, report.Holds, report.Holds, report.NotShown},
			[5]string{"", "", "", "", "not told apart"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			thr, ping, cpu, busy := publishedA()
			tt.change(thr, ping, cpu, busy)
			if b, ok := busy["1-vnf"]; ok && b[0] < 0 {
				for i, g := range thr["1-vnf"] {
					b[i] = 100 * g / thr["baseline"][i]
				}
				busy["1-vnf"] = b
			}
			r, err := report.Build(runA(thr, ping, cpu, busy))
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range claimsA {
				res := c.Check(r)
				if res.Outcome != tt.want[i] || res.Evidence == "" || !strings.Contains(res.Evidence, tt.says[i]) {
					t.Errorf("%q: %s (%s), want %s saying %q", c.Text, res.Outcome, res.Evidence, tt.want[i], tt.says[i])
				}
				if c.Rule == "" {
					t.Errorf("%q states no rule", c.Text)
				}
			}
		})
	}
}

func TestCountCores(t *testing.T) {
	for in, want := range map[string]int{"0-1": 2, "0": 1, "0-3,6": 5, "x": 0, "3-1": 0} {
		if got := countCores(in); got != want {
			t.Errorf("countCores(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestStudyAVMMarks checks the report of study A's VM scenarios on a synthetic run of
// netns-baseline, netns-1-vnf and vm-1-vnf: under TCG vm-1-vnf is labelled with the mark, has
// no ratio, D_th or K_lat against the namespace baseline and the verdict says why; with KVM it
// is compared with netns-baseline, its own runtime's baseline (a VM lab's endpoints are
// namespaces), also when the experiment's baseline is Docker's.
func TestStudyAVMMarks(t *testing.T) {
	thr := map[string]float64{"baseline": 21, "netns-baseline": 13, "netns-1-vnf": 12, "netns-2-vnf": 6, "vm-1-vnf": 2.2, "vm-2-vnf": 0.8}
	ping := map[string]float64{"baseline": 0.05, "netns-baseline": 0.05, "netns-1-vnf": 0.07, "netns-2-vnf": 0.09, "vm-1-vnf": 1.2, "vm-2-vnf": 1.5}
	rt := map[string]string{"baseline": "docker", "netns-baseline": "netns", "netns-1-vnf": "netns", "netns-2-vnf": "netns", "vm-1-vnf": "vm", "vm-2-vnf": "vm"}
	nodes := map[string]string{"baseline": "2", "netns-baseline": "2", "netns-1-vnf": "3", "netns-2-vnf": "4", "vm-1-vnf": "3", "vm-2-vnf": "4"}
	for _, tt := range []struct {
		name, accel, baseline string
		ratio                 bool
		trend                 string // the throughput trend's trial count: the TCG scenarios join no namespace series
	}{
		{"tcg, --runtime vm", "tcg: PVM host", "netns-baseline", false, "over 9 trials"},
		{"kvm, --runtime vm", "kvm: vmx", "netns-baseline", true, "over 15 trials"},
		{"kvm, whole study", "kvm: vmx", "baseline", true, "over 15 trials"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
			in := report.Input{Run: results.Run{Experiment: "a", Study: "single-host-chain", Started: t0, Ended: t0.Add(time.Hour), Complete: true,
				Env: map[string]string{report.EnvVMAccel: tt.accel}}, Baseline: tt.baseline, Published: Published("single-host-chain"),
				Scenarios: []string{"netns-baseline", "netns-1-vnf", "netns-2-vnf", "vm-1-vnf", "vm-2-vnf"}}
			if tt.baseline == "baseline" {
				in.Scenarios = append([]string{"baseline"}, in.Scenarios...)
			}
			for _, sc := range in.Scenarios {
				for trial := 1; trial <= 3; trial++ {
					in.Trials = append(in.Trials, results.Trial{Experiment: "a", Scenario: sc, Trial: trial, Status: results.TrialOK, Started: t0, Ended: t0})
					add := func(probe, metric, unit string, v float64, labels map[string]string) {
						in.Samples = append(in.Samples, results.Sample{Experiment: "a", Scenario: sc, Trial: trial, Probe: probe, Metric: metric, Unit: unit, Value: v, Time: t0, Labels: labels})
					}
					add("deploy", "deploy_time", "s", 1, map[string]string{"runtime": rt[sc], "nodes": nodes[sc]})
					add("iperf3", "throughput", "bit/s", thr[sc]*(1+0.02*float64(trial))*1e9, map[string]string{"side": "receiver", "protocol": "tcp", "streams": "1"})
					for seq := 1; seq <= 5; seq++ {
						add("ping", "rtt", "ms", ping[sc]*(1+0.01*float64(seq+trial)), map[string]string{"seq": fmt.Sprint(seq)})
					}
				}
			}
			rep, err := report.Build(in)
			if err != nil {
				t.Fatal(err)
			}
			var md strings.Builder
			if err := rep.Markdown(&md); err != nil {
				t.Fatal(err)
			}
			q, ok := rep.ThroughputRatio("vm-1-vnf")
			if ok != tt.ratio || (ok && q.Baseline != "netns-baseline") {
				t.Errorf("vm-1-vnf throughput ratio against %q: %v; want %v against netns-baseline", q.Baseline, ok, tt.ratio)
			}
			if _, ok := rep.LatencyRatio(report.MetricPingRTT, "vm-1-vnf"); ok != tt.ratio {
				t.Errorf("vm-1-vnf ping ratio: %v, want %v", ok, tt.ratio)
			}
			if !strings.Contains(md.String(), "Trend of throughput with the lab's number of nodes (chain length), scenarios compared with netns-baseline (netns): Kendall tau-b") ||
				!strings.Contains(md.String(), tt.trend) {
				t.Errorf("throughput trend not over %s:\n%s", tt.trend, md.String())
			}
			for _, want := range []string{"| vm-1-vnf (" + report.EmulatedMark + ") |", "not comparable (TCG)", "vm-1-vnf, vm-2-vnf ran VMs under TCG"} {
				if got := strings.Contains(md.String(), want); got == tt.ratio {
					t.Errorf("report has %q: %v, want %v", want, got, !tt.ratio)
				}
			}
		})
	}
}

// TestClaimsANotRun checks that a claim not shown because the run left the study's scenario out
// (--runtime vm runs the netns and VM scenarios only) gives the run's reason and what to do,
// not only that the figure is missing.
func TestClaimsANotRun(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	why := "not run: --runtime vm runs only the VM scenarios and the scenarios they are compared with; leave out --runtime to run the study's own scenarios"
	in := report.Input{Run: results.Run{Experiment: "a", Study: "single-host-chain", Started: t0, Ended: t0.Add(time.Hour), Complete: true,
		Env: map[string]string{report.EnvNotRun + "1-vnf": why, report.EnvNotRun + "2-vnf": why}},
		Baseline: "netns-baseline", Published: Published("single-host-chain"), Scenarios: []string{"netns-baseline"}}
	for trial := 1; trial <= 2; trial++ {
		in.Trials = append(in.Trials, results.Trial{Experiment: "a", Scenario: "netns-baseline", Trial: trial, Status: results.TrialOK, Started: t0, Ended: t0})
		in.Samples = append(in.Samples, results.Sample{Experiment: "a", Scenario: "netns-baseline", Trial: trial, Probe: "iperf3", Metric: "throughput", Unit: "bit/s",
			Value: 10e9, Time: t0, Labels: map[string]string{"side": "receiver", "protocol": "tcp", "streams": "1"}})
	}
	rep, err := report.Build(in)
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	if err := rep.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"no throughput of 1-vnf and the baseline in this run; 1-vnf " + why,
		"no throughput of 2-vnf and the baseline in this run; 2-vnf " + why,
		"no ping RTT of 1-vnf and the baseline in this run; 1-vnf " + why,
		"no CPU figures of 2-vnf; 2-vnf " + why,
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
