package report

import (
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/results"
)

// flowsInput is a synthetic run of study C's data plane: two chains measured in two modes,
// Fig. 6's three flows (1, 2, 3 Mbit/s for 3, 6, 9 s, sampled every second) and two taps, one
// on the previous hop's host and one elsewhere; two trials each.
func flowsInput() Input {
	const e = "study-c"
	in := Input{
		Run:       results.Run{Experiment: e, Study: "C", Started: t0, Ended: t0.Add(5 * time.Minute), Complete: true, Env: map[string]string{"sfclab": "v0.1.0-test"}},
		Scenarios: []string{"c0", "c2", "c0-routed", "c2-routed", "fig6", "tap-local", "tap-remote"},
		Baseline:  "c0",
		Published: &Published{
			Study: "C. test", Reference: "A. B, \"T\", V, 2019",
			Rows: []PublishedRow{{Scenario: "c0", Metric: MetricThroughput, Text: "above 8 Gbit/s"}},
			Modes: &ModeTable{Title: "Steering modes", Intro: "Transparent and routed.", Columns: []string{"transparent", "routed"},
				Rows:   []ModeRow{{Case: "C0", Scenarios: []string{"c0", "c0-routed"}}, {Case: "C2", Scenarios: []string{"c2", "c2-routed"}}, {Case: "X", Scenarios: []string{"x", ""}}},
				Ratios: []RatioColumn{{Of: 0, To: 1}, {Of: 1, To: 0}, {Of: 0, To: 2}}}, // the last names no column: left out
		},
	}
	n := 0
	add := func(sc string, trial int, probe, metric string, v float64, unit string, labels map[string]string) {
		n++
		in.Samples = append(in.Samples, results.Sample{Experiment: e, Scenario: sc, Trial: trial, Probe: probe, Metric: metric,
			Value: v, Unit: unit, Time: t0.Add(time.Duration(n) * time.Millisecond), Labels: labels})
	}
	thr := map[string][]float64{"c0": {9.1, 9.3}, "c2": {3.1, 3.3}, "c0-routed": {20.0, 21.0}, "c2-routed": {12.0, 12.6}}
	for _, sc := range in.Scenarios {
		for trial := 1; trial <= 2; trial++ {
			in.Trials = append(in.Trials, results.Trial{Experiment: e, Scenario: sc, Trial: trial, Status: results.TrialOK, Started: t0, Ended: t0.Add(time.Minute)})
			if g, ok := thr[sc]; ok {
				add(sc, trial, "iperf3", "throughput", g[trial-1]*1e9, "bit/s", map[string]string{"side": "receiver", "protocol": "tcp", "streams": "1"})
			}
		}
	}
	// Fig. 6: sfp3 (v3, v4, v5) 1M for 3 s, sfp2 (v2, v4, v6) 2M for 6 s, sfp1 (v1, v4, v7) 3M for 9 s.
	flows := []struct {
		chain, rate string
		mbit, secs  float64
		nodes       []string
	}{{"sfp3", "1M", 1, 3, []string{"v3", "v5"}}, {"sfp2", "2M", 2, 6, []string{"v2", "v6"}}, {"sfp1", "3M", 3, 9, []string{"v1", "v7"}}}
	hosts := map[string]string{"v1": "contr01", "v2": "comp02", "v3": "comp02", "v4": "comp03", "v5": "contr01", "v6": "comp04", "v7": "comp03"}
	for trial := 1; trial <= 2; trial++ {
		for t := 1; t <= 10; t++ {
			rates := map[string]float64{}
			for _, f := range flows {
				if float64(t) <= f.secs {
					for _, nd := range f.nodes {
						rates[nd] += f.mbit * 1e6
					}
					rates["v4"] += f.mbit * 1e6
				}
			}
			for _, nd := range []string{"v1", "v2", "v3", "v4", "v5", "v6", "v7"} {
				add("fig6", trial, "flows", "egress_rate", rates[nd]*(1+0.01*float64(trial-1)), "bit/s", map[string]string{"node": nd, "host": hosts[nd], "t": fmt.Sprint(t)})
			}
		}
		for _, f := range flows {
			l := map[string]string{"flow": f.chain, "bitrate": f.rate, "duration": fmt.Sprintf("%gs", f.secs)}
			add("fig6", trial, "flows", "flow_throughput", f.mbit*1e6*0.999, "bit/s", with(l, "side", "receiver"))
			add("fig6", trial, "flows", "flow_throughput", f.mbit*1e6, "bit/s", with(l, "side", "sender"))
			add("fig6", trial, "flows", "flow_loss", 0.1*float64(trial), "%", l)
		}
		for _, tap := range []struct{ sc, host string }{{"tap-local", "contr01"}, {"tap-remote", "comp03"}} {
			add(tap.sc, trial, "flows", "egress_bytes", 12.5e6, "bytes", map[string]string{"node": "v1", "host": "contr01"})
			add(tap.sc, trial, "flows", "egress_bytes", 12.5e6, "bytes", map[string]string{"node": "v6", "host": "comp04"})
			add(tap.sc, trial, "flows", "tap_bytes", 12.5e6, "bytes", map[string]string{"node": "tap", "host": tap.host, "prev": "v1", "prev_host": "contr01"})
			add(tap.sc, trial, "flows", "tap_rate", 10e6, "bit/s", map[string]string{"node": "tap", "host": tap.host, "t": "1"})
		}
	}
	return in
}

var htmlSampleFlows = flag.String("html-sample-flows", "", "also write the sample flows (study C) HTML report to this file")

func TestFlowsReport(t *testing.T) {
	r, err := Build(flowsInput())
	if err != nil {
		t.Fatal(err)
	}
	// v4 carries the sum of the running flows in each window: 6, 5, 3 Mbit/s.
	var v4 []float64
	for _, w := range r.FlowWindows {
		if w.Scenario == "fig6" {
			v4 = append(v4, math.Round(w.Bits["v4"]/1e4)/1e2)
		}
	}
	if want := []float64{6.03, 5.03, 3.02}; fmt.Sprint(v4) != fmt.Sprint(want) {
		t.Errorf("v4 per window = %v Mbit/s, want %v", v4, want)
	}
	if len(r.Taps) != 2 || r.Taps[0].Ratio != 1 || r.Taps[1].Host == r.Taps[1].PrevHost {
		t.Errorf("taps = %+v", r.Taps)
	}
	if q, ok := r.ModeRatio("c2", "c2-routed"); !ok || q.Value > 0.27 || q.Value < 0.25 {
		t.Errorf("c2 / c2-routed = %+v, %v", q, ok)
	}
	md := renderMarkdown(t, r)
	for _, notes := range r.Notes {
		if strings.Contains(notes, "flows") {
			t.Errorf("flows samples counted as unread: %s", notes)
		}
	}
	golden(t, "flows.md", md.Bytes())
	charts, err := r.charts()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range charts {
		names = append(names, c.name)
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "flows-fig6") || !strings.Contains(got, "flows-tap-remote") {
		t.Errorf("charts = %s, want flows-fig6 and flows-tap-remote", got)
	}
	if !strings.Contains(renderHTML(t, r, *htmlSampleFlows), "Egress rate over time: fig6") {
		t.Error("HTML lacks the Fig. 6 chart")
	}
}

// TestModesTCGMark checks that the modes table (study C's transparent and routed columns)
// marks every figure of a scenario whose VMs ran under TCG, gives a mode ratio between two
// such scenarios with the mark, and none between an emulated and a real one.
func TestModesTCGMark(t *testing.T) {
	for _, tt := range []struct {
		name    string
		vm      []string // scenarios on runtime vm
		cells   int      // cells with the mark (throughput and ratio)
		ratioC0 string   // what the C0 row's transparent ÷ routed cell holds
	}{
		{"none", nil, 0, "0.45×"},
		{"all", []string{"c0", "c2", "c0-routed", "c2-routed"}, 8, "0.45× [0.38, 0.53] (TCG)"},
		{"routed only", []string{"c0-routed", "c2-routed"}, 6, "| " + notComparable + " |"},
	} {
		in := flowsInput()
		in.Run.Env[EnvVMAccel] = "tcg: PVM host"
		for _, sc := range in.Scenarios {
			rt := "netns"
			if slices.Contains(tt.vm, sc) {
				rt = "vm"
			}
			for trial := 1; trial <= 2; trial++ {
				in.Samples = append(in.Samples, results.Sample{Experiment: in.Run.Experiment, Scenario: sc, Trial: trial, Probe: "deploy", Metric: "deploy_time",
					Unit: "s", Value: 1, Time: t0, Labels: map[string]string{"runtime": rt}})
			}
		}
		r, err := Build(in)
		if err != nil {
			t.Fatal(err)
		}
		md := renderMarkdown(t, r)
		var table []string
		for _, l := range strings.Split(md.String(), "\n") {
			if strings.HasPrefix(l, "| C0 ") || strings.HasPrefix(l, "| C2 ") {
				table = append(table, l)
			}
		}
		got := strings.Count(strings.Join(table, "\n"), "(TCG)")
		if len(table) != 2 || got != tt.cells || !strings.Contains(table[0], tt.ratioC0) {
			t.Errorf("%s: %d marks in the modes rows, want %d, C0 with %q:\n%s", tt.name, got, tt.cells, tt.ratioC0, strings.Join(table, "\n"))
		}
		// The short mark is spelled out under the table, once.
		note := "(TCG): the scenario ran VMs under TCG, " + EmulatedMark
		if n := strings.Count(md.String(), note); (n == 1) != (tt.cells > 0) {
			t.Errorf("%s: %d notes %q under the modes table, want one when a cell is marked", tt.name, n, note)
		}
	}
}

// TestVerdictNamesTheVariantRule: in a run whose chains with functions ran as VMs and whose
// C0 scenarios (no function) on namespaces (study C with --vm), c2-routed is compared with
// c0-routed by the variant rule, and the verdict says so; it does not say the VM scenarios are
// compared with "the baseline on their own runtime", which c0-routed (netns) is not.
func TestVerdictNamesTheVariantRule(t *testing.T) {
	in := flowsInput()
	in.Run.Env[EnvVMAccel] = "tcg: PVM host"
	for _, sc := range in.Scenarios {
		rt := "vm"
		if sc == "c0" || sc == "c0-routed" {
			rt = "netns"
		}
		for trial := 1; trial <= 2; trial++ {
			in.Samples = append(in.Samples, results.Sample{Experiment: in.Run.Experiment, Scenario: sc, Trial: trial, Probe: "deploy", Metric: "deploy_time",
				Unit: "s", Value: 1, Time: t0, Labels: map[string]string{"runtime": rt}})
		}
	}
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if b := r.BaselineFor("c2-routed"); b != "c0-routed" {
		t.Fatalf("c2-routed is compared with %s, want c0-routed", b)
	}
	md := renderMarkdown(t, r)
	if !strings.Contains(md.String(), "A scenario NAME-VARIANT is compared with c0-VARIANT where the run has it (c0-routed).") {
		t.Errorf("the verdict does not name the variant rule for c0-routed:\n%s", md.String())
	}
	if strings.Contains(md.String(), "the baseline on their own runtime") {
		t.Errorf("the verdict says a VM scenario is compared with a baseline on its own runtime:\n%s", md.String())
	}
}

// TestFlowsTCGMark: with fig6 and the taps run as VMs under TCG, the flows and tap tables,
// the window table's caption and the flows charts' titles carry the mark; under netns none do.
func TestFlowsTCGMark(t *testing.T) {
	for _, vm := range []bool{false, true} {
		in := flowsInput()
		in.Run.Env[EnvVMAccel] = "tcg: PVM host"
		rt := "netns"
		if vm {
			rt = "vm"
		}
		for _, sc := range []string{"fig6", "tap-local", "tap-remote"} {
			in.Samples = append(in.Samples, results.Sample{Experiment: in.Run.Experiment, Scenario: sc, Trial: 1, Probe: "deploy", Metric: "deploy_time",
				Unit: "s", Value: 1, Time: t0, Labels: map[string]string{"runtime": rt}})
		}
		r, err := Build(in)
		if err != nil {
			t.Fatal(err)
		}
		m := renderMarkdown(t, r).String()
		for _, want := range []string{
			"| fig6 (" + EmulatedMark + ") | sfp1 |",
			"| tap-remote (" + EmulatedMark + ") | tap (",
			"Scenario fig6 (" + EmulatedMark + "): mean egress rate",
		} {
			if got := strings.Contains(m, want); got != vm {
				t.Errorf("vm %v: report has %q: %v, want %v", vm, want, got, vm)
			}
		}
		if got := strings.HasSuffix(r.chartTitleOf(flowsChartName("fig6")), "(mean over trials, 1 point per interval) ("+EmulatedMark+")"); got != vm {
			t.Errorf("vm %v: flows chart title %q marked %v", vm, r.chartTitleOf(flowsChartName("fig6")), got)
		}
	}
}

// modesSectionMD is the Markdown of r's modes section: from its heading to the next.
func modesSectionMD(t *testing.T, r *Report, title string) string {
	t.Helper()
	md := renderMarkdown(t, r).String()
	i := strings.Index(md, "\n## "+title+"\n")
	if i < 0 {
		t.Fatalf("no section %q:\n%s", title, md)
	}
	sec := md[i+1:]
	if j := strings.Index(sec[3:], "\n## "); j >= 0 {
		sec = sec[:j+3]
	}
	return sec
}

// TestModesPanels: a modes table split into panels (study C: four hosts, one host) renders a
// table per panel under its title, with the panel's short labels, the ratios of its own
// columns only, no row without a scenario in it, every TCG figure marked short and the mark
// spelled out once below; no Markdown row is wider than maxModesRow, where the one table of
// four modes, two ratios and the full mark in every cell was over 300 characters.
func TestModesPanels(t *testing.T) {
	const maxModesRow = 110
	in := flowsInput()
	in.Run.Env[EnvVMAccel] = "tcg: PVM host"
	in.Scenarios = nil
	in.Published.Modes = &ModeTable{Title: "Steering modes", Columns: []string{"transparent, 4 hosts", "routed, 4 hosts", "transparent, 1 host", "routed, 1 host"},
		Ratios: []RatioColumn{{Of: 0, To: 1}, {Of: 2, To: 3}},
		Panels: []ModePanel{{Title: "On four hosts:", Columns: []int{0, 1}, Labels: []string{"transparent", "routed"}},
			{Title: "On one host:", Columns: []int{2, 3}, Labels: []string{"transparent", "routed"}}}}
	in.Samples, in.Trials = nil, nil
	for _, c := range []string{"c0", "c1", "c2"} {
		in.Published.Modes.Rows = append(in.Published.Modes.Rows, ModeRow{Case: strings.ToUpper(c), Scenarios: []string{c, c + "-routed-4hosts", c + "-1host", c + "-routed"}})
	}
	in.Published.Modes.Rows = append(in.Published.Modes.Rows, ModeRow{Case: "Table II, with D", Scenarios: []string{"same-d", "same-d-routed-4hosts", "", ""}})
	for _, row := range in.Published.Modes.Rows {
		for k, sc := range row.Scenarios {
			if sc == "" {
				continue
			}
			in.Scenarios = append(in.Scenarios, sc)
			rt := "vm"
			if strings.HasPrefix(sc, "c0") {
				rt = "netns"
			}
			for trial := 1; trial <= 2; trial++ {
				in.Trials = append(in.Trials, results.Trial{Scenario: sc, Trial: trial, Status: results.TrialOK})
				in.Samples = append(in.Samples,
					results.Sample{Scenario: sc, Trial: trial, Probe: "deploy", Metric: MetricDeployTime, Value: 1, Unit: "s", Labels: map[string]string{"runtime": rt}},
					results.Sample{Scenario: sc, Trial: trial, Probe: "iperf3", Metric: "throughput", Unit: "bit/s", Value: (10 + float64(k) + 0.1*float64(trial)) * 1e9,
						Labels: map[string]string{"side": "receiver"}})
			}
		}
	}
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	sec := modesSectionMD(t, r, "Steering modes")
	header := "| case | transparent Gbit/s [95 % CI] | routed Gbit/s [95 % CI] | transparent ÷ routed [95 % CI] |"
	if n := strings.Count(sec, header+"\n"); n != 2 {
		t.Errorf("%d tables with header %q, want 2 (one per panel):\n%s", n, header, sec)
	}
	four, one, ok := strings.Cut(sec, "On one host:")
	if !ok || !strings.Contains(four, "On four hosts:") {
		t.Fatalf("the panels' titles are missing:\n%s", sec)
	}
	if !strings.Contains(four, "| Table II, with D |") || strings.Contains(one, "Table II") {
		t.Errorf("Table II's row belongs to the four-host panel only:\n%s", sec)
	}
	if !strings.Contains(four, "| C1 | 10.15 [9.51, 10.79] (TCG) | 11.15 [10.51, 11.79] (TCG) | 0.91× ") || !strings.Contains(four, "| C0 | 10.15 [9.51, 10.79] | 11.15 [10.51, 11.79] | 0.91× [0.91, 0.92] |") {
		t.Errorf("C0 (namespaces) and C1 (VMs under TCG) rows:\n%s", four)
	}
	if n := strings.Count(sec, EmulatedMark); n != 1 {
		t.Errorf("the full mark %d times in the modes section, want once (the note):\n%s", n, sec)
	}
	for _, l := range strings.Split(sec, "\n") {
		if strings.HasPrefix(l, "|") && len([]rune(l)) > maxModesRow {
			t.Errorf("modes row of %d characters, want at most %d: %s", len([]rune(l)), maxModesRow, l)
		}
	}
}
