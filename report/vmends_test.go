package report

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/results"
)

// TestRTTNDRTCGMark: rtt and ndr figures of a scenario that ran VMs under TCG (a VM
// destination answering rtt's echoes, counting ndr's search) carry the mark in their tables,
// those of a namespace scenario do not.
func TestRTTNDRTCGMark(t *testing.T) {
	var samples []results.Sample
	for _, sc := range []struct{ name, runtime string }{{"vm-server", "netns/vm"}, {"netns", "netns"}} {
		for _, rt := range strings.Split(sc.runtime, "/") {
			samples = append(samples, results.Sample{Scenario: sc.name, Trial: 1, Probe: "deploy", Metric: MetricDeployTime, Value: 2, Unit: "s",
				Labels: map[string]string{"nodes": "3", "runtime": rt}})
		}
		samples = append(samples, rttSamples(sc.name, 0, "cpu", 20, 0.5, 0.01)...)
		samples = append(samples, ndrSamples(sc.name, [][2]float64{{40e3, 20}, {20e3, 0}, {30e3, 5}}, false)...)
	}
	r, err := Build(Input{Run: results.Run{Experiment: "e", Complete: true, Env: map[string]string{EnvVMAccel: "tcg: no KVM"}}, Samples: samples,
		Trials: []results.Trial{{Scenario: "vm-server", Trial: 1, Status: "ok"}, {Scenario: "netns", Trial: 1, Status: "ok"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Emulated("vm-server") || r.Emulated("netns") {
		t.Fatalf("Emulated: vm-server %v, netns %v", r.Emulated("vm-server"), r.Emulated("netns"))
	}
	var md strings.Builder
	if err := r.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	marked := "vm-server (" + EmulatedMark + ")"
	for _, sec := range []section{r.rttSection(), r.ndrSection()} {
		var cells []string
		for _, b := range sec.blocks {
			if b.table == nil {
				continue
			}
			for _, row := range b.table.rows {
				cells = append(cells, row[0])
			}
		}
		if !contains(cells, marked) || !contains(cells, "netns") || contains(cells, "vm-server") {
			t.Errorf("%s: scenario cells %q; want %q and netns", sec.title, cells, marked)
		}
	}
}

func contains(v []string, s string) bool {
	for _, x := range v {
		if x == s {
			return true
		}
	}
	return false
}

// TestRTTTrendsPairsTCGGuard: rtt's trends (Kendall tau-b over background counts) and pairs
// (Wilcoxon over two bases' common cells) are taken over scenarios that all ran on a real CPU
// or all ran VMs under TCG, and never over a mix: a trend whose cells mix an emulated CPU with a
// real one is left out with a note, and a pair of a TCG base with a real-CPU base is not made.
func TestRTTTrendsPairsTCGGuard(t *testing.T) {
	// cells gives base's scenarios at background counts 0, 8 and 32, four trials each, on the
	// runtimes rt(count) ("netns" or "netns/vm"); RTT grows with the count, b is half of a.
	cells := func(base string, scale float64, rt func(count int) string) []results.Sample {
		var out []results.Sample
		for _, c := range []int{0, 8, 32} {
			name := base + ".bg-0"
			if c > 0 {
				name = base + ".bg-cpu-sender-" + strconv.Itoa(c)
			}
			for _, r := range strings.Split(rt(c), "/") {
				out = append(out, results.Sample{Scenario: name, Trial: 1, Probe: "deploy", Metric: MetricDeployTime, Value: 2, Unit: "s",
					Labels: map[string]string{"nodes": "3", "runtime": r}})
			}
			for trial := 1; trial <= 4; trial++ {
				for _, s := range rttSamples(name, c, "cpu", 20, scale*float64(1+c)*(1+0.01*float64(trial)), scale/20) {
					s.Trial = trial
					out = append(out, s)
				}
			}
		}
		return out
	}
	const netns, vm = "netns", "netns/vm"
	all := func(rt string) func(int) string { return func(int) string { return rt } }
	for _, tc := range []struct {
		name   string
		a, b   func(int) string
		trends int  // trends made (one per base whose cells may be compared)
		pair   bool // a and b set against each other
		note   string
	}{
		{"both real CPU", all(netns), all(netns), 2, true, ""},
		{"both TCG", all(vm), all(vm), 2, true, ""},
		{"one TCG, one not", all(vm), all(netns), 2, false, ""},
		{"a's trend mixes TCG and a real CPU", func(c int) string {
			if c == 0 {
				return netns
			}
			return vm
		}, all(netns), 1, false, "No RTT trend for a (rate 1000): some of its scenarios ran VMs under TCG"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			samples := append(cells("a", 0.02, tc.a), cells("b", 0.01, tc.b)...)
			r, err := Build(Input{Run: results.Run{Experiment: "e", Complete: true, Env: map[string]string{EnvVMAccel: "tcg: no KVM"}}, Samples: samples})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.RTTTrends) != tc.trends {
				t.Errorf("trends %+v: want %d", r.RTTTrends, tc.trends)
			}
			for _, tr := range r.RTTTrends {
				if len(tr.Counts) != 3 || tr.Tau < 0.5 {
					t.Errorf("trend %+v: want counts 0, 8, 32 and a strong positive tau", tr)
				}
			}
			if got := len(r.RTTPairs) == 1; got != tc.pair {
				t.Errorf("pairs %+v: want a pair of a and b: %v", r.RTTPairs, tc.pair)
			} else if got && (r.RTTPairs[0].Pairs != 3 || r.RTTPairs[0].Ratio < 0.49 || r.RTTPairs[0].Ratio > 0.51) {
				t.Errorf("pair %+v: want 3 cells, b/a 0.5", r.RTTPairs[0])
			}
			var noted bool
			for _, n := range r.Notes {
				noted = noted || (tc.note != "" && strings.Contains(n, tc.note))
				if tc.note == "" && strings.Contains(n, "No RTT trend") {
					t.Errorf("unexpected note %q", n)
				}
			}
			if tc.note != "" && !noted {
				t.Errorf("notes %q lack %q", r.Notes, tc.note)
			}
		})
	}
}

// TestHTTPChangeTCGGuard: an HTTP scenario that ran VMs under TCG gets no change against a
// baseline on a real CPU (its table cell and its verdict line say not comparable, with no
// percentage), while a second TCG scenario is still compared with a TCG baseline and a namespace
// scenario with a namespace one. Without the guard the verdict read "vm-client (...): HTTP total
// time +884.8 % against ns-client" under a first line saying no such ratio is given.
func TestHTTPChangeTCGGuard(t *testing.T) {
	httpRun := func(runtimes map[string]string, baseline string, totals map[string]float64) *Report {
		t.Helper()
		var samples []results.Sample
		var trials []results.Trial
		var scenarios []string
		for sc, rts := range runtimes {
			scenarios = append(scenarios, sc)
			for trial := 1; trial <= 2; trial++ {
				trials = append(trials, results.Trial{Scenario: sc, Trial: trial, Status: results.TrialOK})
				for _, rt := range strings.Split(rts, "/") {
					samples = append(samples, results.Sample{Scenario: sc, Trial: trial, Probe: "deploy", Metric: MetricDeployTime, Value: 2, Unit: "s",
						Labels: map[string]string{"nodes": "3", "runtime": rt}})
				}
				labels := map[string]string{"object": "1k", "concurrency": "1", "keepalive": "false", "via": "fwd"}
				for _, m := range []struct {
					metric string
					v      float64
				}{{"total_time", totals[sc] * (1 + 0.01*float64(trial))}, {"requests", 100}, {"errors", 0}, {"non2xx", 0}, {"rps", 100 / totals[sc]}} {
					samples = append(samples, results.Sample{Scenario: sc, Trial: trial, Probe: "http", Metric: m.metric, Value: m.v, Unit: "s", Labels: labels})
				}
			}
		}
		slices.Sort(scenarios)
		r, err := Build(Input{Run: results.Run{Experiment: "e", Complete: true, Env: map[string]string{EnvVMAccel: "tcg: no KVM"}}, Baseline: baseline,
			Scenarios: scenarios, Samples: samples, Trials: trials})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	verdictHTTP := func(r *Report) string {
		out, _ := r.httpVerdict()
		return strings.Join(out, "\n")
	}
	change := func(r *Report, s string) float64 {
		for _, row := range r.HTTP {
			if row.Scenario == s {
				return row.Change
			}
		}
		t.Fatalf("no HTTP row of %s", s)
		return 0
	}

	// Must hold back: a TCG client against a namespace baseline.
	mixed := httpRun(map[string]string{"ns-client": "netns", "vm-client": "netns/vm", "ns-other": "netns"}, "ns-client",
		map[string]float64{"ns-client": 1, "vm-client": 9.8, "ns-other": 1.5})
	if c := change(mixed, "vm-client"); !math.IsNaN(c) {
		t.Errorf("vm-client against ns-client: change %.1f %%; want none (TCG against a real CPU)", c)
	}
	v := verdictHTTP(mixed)
	if !strings.Contains(v, "ns-other: HTTP total time +") {
		t.Errorf("verdict:\n%s\nwant ns-other's change", v)
	}
	for _, line := range strings.Split(v, "\n") {
		if strings.Contains(line, "vm-client") && (strings.Contains(line, "%") || !strings.Contains(line, notComparable)) {
			t.Errorf("verdict line %q: want vm-client said not comparable, with no percentage", line)
		}
	}
	var md strings.Builder
	if err := mixed.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), notComparable) {
		t.Errorf("the HTTP table does not say %q for vm-client", notComparable)
	}

	// Must compare: two TCG scenarios with each other.
	tcg := httpRun(map[string]string{"vm-a": "netns/vm", "vm-b": "netns/vm"}, "vm-a", map[string]float64{"vm-a": 2, "vm-b": 3})
	if c := change(tcg, "vm-b"); math.IsNaN(c) || c < 45 || c > 55 {
		t.Errorf("vm-b against vm-a (both TCG): change %.1f %%; want about +50 %%", c)
	}
	if v := verdictHTTP(tcg); !strings.Contains(v, "vm-b ("+EmulatedMark+"): HTTP total time +") {
		t.Errorf("verdict:\n%s\nwant vm-b's change, marked", v)
	}
}
