package report

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/results"
)

// rttSamples makes the rtt probe's samples of one scenario: n echoes at base+i*step ms.
func rttSamples(scenario string, count int, kind string, n int, base, step float64) []results.Sample {
	labels := func(kv ...string) map[string]string {
		l := map[string]string{"rate": "1000", "protocol": "icmp", "size": "64"}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	out := []results.Sample{{Scenario: scenario, Trial: 1, Probe: "load", Metric: "background_nodes", Value: float64(count), Unit: "count",
		Labels: map[string]string{"kind": kind, "side": "sender"}}}
	for i := range n {
		seq := strconv.Itoa(i)
		out = append(out,
			results.Sample{Scenario: scenario, Trial: 1, Probe: "rtt", Metric: "rtt", Unit: "ms", Value: base + float64(i)*step, Labels: labels("seq", seq)},
			results.Sample{Scenario: scenario, Trial: 1, Probe: "rtt", Metric: "path", Unit: "ms", Value: base / 2, Labels: labels("seq", seq)})
	}
	out = append(out,
		results.Sample{Scenario: scenario, Trial: 1, Probe: "rtt", Metric: "rate_requested", Unit: "pps", Value: 1000, Labels: labels("rate_reached", "true")},
		results.Sample{Scenario: scenario, Trial: 1, Probe: "rtt", Metric: "rate_achieved", Unit: "pps", Value: 990, Labels: labels("rate_reached", "true")},
		results.Sample{Scenario: scenario, Trial: 1, Probe: "rtt", Metric: "loss", Unit: "%", Value: 0, Labels: labels()})
	return out
}

func TestRTTSection(t *testing.T) {
	var samples []results.Sample
	// RTT grows with background nodes for veth; macvlan is half of veth in every cell.
	for _, c := range []int{0, 8, 32} {
		name := func(base string) string {
			if c == 0 {
				return base + ".bg-0"
			}
			return base + ".bg-network-sender-" + strconv.Itoa(c)
		}
		// Four trials per cell, each a little apart: the trend is tested on 12 trial medians.
		for trial := 1; trial <= 4; trial++ {
			for _, s := range append(rttSamples(name("veth"), c, "network", 20, 0.02*float64(1+c)*(1+0.01*float64(trial)), 0.001),
				rttSamples(name("macvlan"), c, "network", 20, 0.01*float64(1+c)*(1+0.01*float64(trial)), 0.0005)...) {
				s.Trial = trial
				samples = append(samples, s)
			}
		}
	}
	r, err := Build(Input{Run: results.Run{Experiment: "t", Complete: true}, Samples: samples})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.RTT) != 6 || r.RTT[0].RTT.N != 80 || r.RTT[0].Background != 0 || !r.RTT[0].Reached {
		t.Fatalf("rows %+v", r.RTT)
	}
	if len(r.RTTTrends) != 2 {
		t.Fatalf("trends %+v", r.RTTTrends)
	}
	for _, tr := range r.RTTTrends {
		if tr.Tau < 0.5 || tr.P > 0.001 || len(tr.Counts) != 3 || tr.N != 12 || tr.Echoes != 240 {
			t.Errorf("trend %+v: want a strong, significant positive tau over counts 0, 8, 32 (12 trials, 240 echoes)", tr)
		}
	}
	if len(r.RTTPairs) != 1 || r.RTTPairs[0].Pairs != 3 || r.RTTPairs[0].Ratio < 0.49 || r.RTTPairs[0].Ratio > 0.51 {
		t.Errorf("pairs %+v", r.RTTPairs)
	}
	md := renderMarkdown(t, r)
	for _, want := range []string{"## Round trips (rtt probe)", "Kendall tau-b", "Wilcoxon W", "veth.bg-network-sender-32"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	for _, n := range r.Notes {
		if strings.Contains(n, "rtt") {
			t.Errorf("note about rtt samples: %s", n)
		}
	}
}

// TestHostCPU: per-host samples of two trials become one row per scenario and host, with the
// busy share summarized over trials, and a table in the rtt section; none is an ignored note.
func TestHostCPU(t *testing.T) {
	samples := rttSamples("veth.bg-0", 0, "", 5, 0.02, 0.001)
	host := func(trial int, h, metric, unit string, v float64) results.Sample {
		return results.Sample{Scenario: "veth.bg-0", Trial: trial, Probe: "cpu", Metric: metric, Unit: unit, Value: v,
			Labels: map[string]string{"host": h, "cores": map[string]string{"sender": "0", "responder": "1"}[h]}}
	}
	for trial, usr := range map[int]float64{1: 10, 2: 20} {
		for _, h := range []string{"responder", "sender"} {
			samples = append(samples, host(trial, h, "host_usr", "%", usr), host(trial, h, "host_sys", "%", 5),
				host(trial, h, "host_soft", "%", 1), host(trial, h, "host_nodes_user", "cores", 0.1), host(trial, h, "host_nodes_system", "cores", 0.05))
		}
	}
	r, err := Build(Input{Run: results.Run{Experiment: "t", Complete: true}, Samples: samples})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.HostCPU) != 2 || r.HostCPU[0].Host != "responder" || r.HostCPU[1].Cores != "0" {
		t.Fatalf("rows %+v", r.HostCPU)
	}
	x := r.HostCPU[1]
	if x.Usr != 15 || x.Sys != 5 || x.Soft != 1 || x.Busy.N != 2 || x.Busy.Min != 16 || x.Busy.Max != 26 || x.NodesUser != 0.1 {
		t.Errorf("sender row %+v", x)
	}
	md := renderMarkdown(t, r)
	for _, want := range []string{"CPU per emulated host", "| veth.bg-0 | sender | 0 | 15.00 | 5.00 | 1.00 | 16.00 | 21.00 | 26.00 |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	for _, n := range r.Notes {
		if strings.Contains(n, "host_") {
			t.Errorf("note about host samples: %s", n)
		}
	}
}

// rttInput is a synthetic study-D run: drivers veth and macvlan, background cells 0, and 8
// and 32 cpu nodes on the sender's host, rates 1000 and max, two trials of 40 echoes each.
// The path is flat over background counts (macvlan's 0.8 of veth's) while the sender's stack
// RX grows with the count, as when the probe's reader waits for a core: the report's headline
// must follow the path, with the application's RTT beside it. With unstamped, the echoes of
// macvlan's count-8 cells carry no kernel timestamps.
func rttInput(unstamped bool) Input { return rttInputEnds(unstamped, false) }

// rttInputEnds is rttInput; with legacyPathEnd its runs record no path end (as before the tc
// stamps: the socket's).
func rttInputEnds(unstamped, legacyPathEnd bool) Input {
	const e = "rtt-background-load"
	in := Input{
		Run: results.Run{Experiment: e, Study: "D", Started: t0, Ended: t0.Add(3 * time.Minute), Complete: true,
			Env: map[string]string{"sfclab": "v0.1.0-test"}},
		Baseline: "veth.bg-0",
	}
	n := 0
	add := func(sc string, trial int, metric string, v float64, unit string, labels map[string]string) {
		n++
		in.Samples = append(in.Samples, results.Sample{Experiment: e, Scenario: sc, Trial: trial, Probe: "rtt", Metric: metric,
			Value: v, Unit: unit, Time: t0.Add(time.Duration(n) * time.Millisecond), Labels: labels})
	}
	for _, driver := range []struct {
		name string
		path float64 // ms
	}{{"veth", 0.030}, {"macvlan", 0.024}} {
		for _, count := range []int{0, 8, 32} {
			sc := driver.name + ".bg-0"
			if count > 0 {
				sc = driver.name + ".bg-cpu-sender-" + strconv.Itoa(count)
			}
			in.Scenarios = append(in.Scenarios, sc)
			for trial := 1; trial <= 2; trial++ {
				kind := map[bool]string{true: "cpu", false: ""}[count > 0]
				in.Samples = append(in.Samples, results.Sample{Experiment: e, Scenario: sc, Trial: trial, Probe: "load", Metric: "background_nodes",
					Value: float64(count), Unit: "count", Labels: map[string]string{"kind": kind, "side": "sender"}})
				for _, rate := range []string{"1000", "max"} {
					l := func(kv ...string) map[string]string {
						m := map[string]string{"protocol": "icmp", "size": "64", "rate": rate}
						for i := 0; i+1 < len(kv); i += 2 {
							m[kv[i]] = kv[i+1]
						}
						return m
					}
					for i := range 40 {
						path := driver.path * (1 + 0.01*float64(i%5))
						stx, srx := 0.004, 0.006+0.002*float64(count)*(1+0.1*float64(i%3))
						seq := strconv.Itoa(i)
						add(sc, trial, "rtt", path+stx+srx, "ms", l("seq", seq))
						if unstamped && driver.name == "macvlan" && count == 8 {
							continue
						}
						add(sc, trial, "path", path, "ms", l("seq", seq, "tx_stamp", "driver"))
						add(sc, trial, "stack_tx", stx, "ms", l("seq", seq, "tx_stamp", "driver"))
						add(sc, trial, "stack_rx", srx, "ms", l("seq", seq))
					}
					req, ach, reached := 1000.0, 999.0, "true"
					if rate == "max" {
						req, ach = -1, 21000-500*float64(count)
					} else if count == 32 {
						ach, reached = 970, "false"
					}
					if !legacyPathEnd {
						add(sc, trial, "path_end", 40, "count", l("end", "tc"))
						off := map[string]float64{"veth": -0.0014, "macvlan": -0.022}[driver.name]
						add(sc, trial, "socket_tx_offset", 0.0005, "ms", l("end", "tc"))
						add(sc, trial, "socket_rx_offset", off, "ms", l("end", "tc"))
					}
					add(sc, trial, "rate_requested", req, "pps", l())
					add(sc, trial, "rate_achieved", ach, "pps", l("rate_reached", reached))
					add(sc, trial, "loss", 0, "%", l())
				}
			}
		}
	}
	return in
}

var htmlSampleRTT = flag.String("html-sample-rtt", "", "also write the sample rtt (study D) HTML report to this file")

// TestRTTHeadlineIsPath: the rows, the trend, the pairs and the verdict are on the path RTT;
// the application's RTT, inflated by the sender's stack, is beside it and labelled.
func TestRTTHeadlineIsPath(t *testing.T) {
	r, err := Build(rttInput(false))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.RTT) != 12 {
		t.Fatalf("%d rows, want 2 drivers x 3 cells x 2 rates", len(r.RTT))
	}
	for _, row := range r.RTT {
		wantPath := map[string]float64{"veth": 0.0306, "macvlan": 0.02448}[baseOf(row.Scenario)] // the median of path x (1, 1.01, ..., 1.04)
		wantApp := wantPath + 0.004 + 0.006 + 0.002*float64(row.Background)*1.1
		if math.Abs(row.Path.Median-wantPath) > 1e-9 || row.Path.N != 80 || math.Abs(row.RTT.Median-wantApp) > 1e-3*wantApp {
			t.Errorf("%s at %s: path median %g (n %d), app median %g; want %g, 80, ~%g", row.Scenario, row.Rate, row.Path.Median, row.Path.N, row.RTT.Median, wantPath, wantApp)
		}
	}
	if len(r.RTTTrends) != 4 {
		t.Fatalf("trends %+v", r.RTTTrends)
	}
	for _, tr := range r.RTTTrends {
		// The path is flat over counts: no trend, though the app RTT grows with them.
		if tr.Figure != FigurePath || math.Abs(tr.Tau) > 0.01 || tr.P < 0.5 || tr.N != 6 || tr.Echoes != 240 {
			t.Errorf("trend %+v: want the path's, tau ~0, not significant, over 6 trials (240 echoes)", tr)
		}
	}
	if len(r.RTTPairs) != 1 {
		t.Fatalf("pairs %+v", r.RTTPairs)
	}
	// The app RTT's ratio: the median cell is count 8, both rates; the stack adds the same to both.
	stack8 := 0.004 + 0.006 + 0.002*8*1.1
	wantApp := (0.02448 + stack8) / (0.0306 + stack8)
	if p := r.RTTPairs[0]; p.Figure != FigurePath || p.Pairs != 6 || math.Abs(p.Ratio-0.8) > 1e-9 || math.Abs(p.AppRatio-wantApp) > 1e-3 {
		t.Errorf("pair %+v: want the path's ratio 0.80 over 6 cells, the app RTT's %.3f", p, wantApp)
	}
	md := renderMarkdown(t, r)
	for _, want := range []string{
		"veth.bg-0 at 1000 pps: path RTT median 30.6 µs, p99 31.2 µs (app RTT incl. sender stack: median 40.6 µs).",
		"macvlan vs veth: path RTT median ratio macvlan/veth 0.80 over 6 paired cells",
		"| veth.bg-0 | 1000 | 80 | 30.0 µs | 30.6 µs | 30.6 µs | 31.2 µs | 31.2 µs | 0.4 µs | 999 | 0.00 |",
		"| veth.bg-cpu-sender-32 | max | 111.0 µs | 118.0 µs | 4.0 µs | 76.4 µs | 30.6 µs |",
		"App RTT (incl. sender stack)",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	for _, n := range r.Notes {
		t.Errorf("note: %s", n)
	}
	golden(t, "rtt.md", md.Bytes())
	if *htmlSampleRTT != "" {
		renderHTML(t, r, *htmlSampleRTT)
	}
}

// TestRTTWithoutTimestamps: cells without kernel timestamps leave the path columns empty and
// move the statistics that need them to the app RTT, saying so.
func TestRTTWithoutTimestamps(t *testing.T) {
	r, err := Build(rttInput(true))
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range r.RTTTrends {
		want := FigurePath
		if tr.Base == "macvlan" {
			want = FigureApp
		}
		if tr.Figure != want {
			t.Errorf("trend %s %s: figure %q, want %q", tr.Base, tr.Rate, tr.Figure, want)
		}
	}
	if len(r.RTTPairs) != 1 || r.RTTPairs[0].Figure != FigureApp || r.RTTPairs[0].Ratio != r.RTTPairs[0].AppRatio {
		t.Errorf("pairs %+v: want the app RTT's", r.RTTPairs)
	}
	md := renderMarkdown(t, r)
	for _, want := range []string{"| macvlan.bg-cpu-sender-8 | 1000 | 0 of 80 | — | — |", `n is "K of N"`, "app RTT (incl. sender stack; some cells have no kernel timestamps)"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
}

// TestRTTBoxes: one box-plot chart per background kind, host and rate, with every driver's
// boxes by count (the count-0 cell in each), on the path RTT unless a cell lacks it.
func TestRTTBoxes(t *testing.T) {
	for _, tt := range []struct {
		unstamped bool
		figure    string
		ylabel    string
	}{{false, FigurePath, "path RTT (µs)"}, {true, FigureApp, "app RTT incl. sender stack (µs)"}} {
		r, err := Build(rttInput(tt.unstamped))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.RTTBoxes) != 2 {
			t.Fatalf("boxes %+v", r.RTTBoxes)
		}
		for _, g := range r.RTTBoxes {
			if g.Kind != "cpu" || g.Side != "sender" || fmt.Sprint(g.Counts) != "[0 8 32]" || fmt.Sprint(g.Bases) != "[veth macvlan]" ||
				fmt.Sprint(g.Cells["macvlan"]) != "[macvlan.bg-0 macvlan.bg-cpu-sender-8 macvlan.bg-cpu-sender-32]" || g.Figure != tt.figure {
				t.Errorf("group %+v, want figure %q", g, tt.figure)
			}
		}
		charts, err := r.charts()
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, c := range charts {
			if strings.HasPrefix(c.name, "rtt-box-cpu-sender-") {
				found++
				if !strings.Contains(string(c.svg), tt.ylabel) || strings.HasPrefix(c.title, "Path") != (tt.figure == FigurePath) {
					t.Errorf("%s: title %q, y label not %q", c.name, c.title, tt.ylabel)
				}
			}
		}
		if found != 2 {
			t.Errorf("%d box charts, want 2", found)
		}
	}
}

func TestPercentile(t *testing.T) {
	xs := make([]float64, 101)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	for _, tt := range []struct {
		xs   []float64
		p    float64
		want float64
	}{{xs, 0.01, 2}, {xs, 0.99, 100}, {xs, 0.5, 51}, {xs, 1, 101}, {[]float64{1, 2}, 0.5, 1.5}, {[]float64{7}, 0.99, 7}} {
		if got := percentile(tt.xs, tt.p); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("percentile(%d values, %g) = %g, want %g", len(tt.xs), tt.p, got, tt.want)
		}
	}
}

// TestRTTTrendPerTrial: Kendall's tau-b is taken on one value per trial (its median), not on
// the pooled echoes. Three cells of one trial each whose echoes differ by a few nanoseconds
// in the same order: pooled, 600 echoes make that "significant" (p far below 0.05); per
// trial, three medians cannot, and the report says how many trials and echoes it used.
func TestRTTTrendPerTrial(t *testing.T) {
	var samples []results.Sample
	for i, c := range []int{0, 8, 32} {
		name := "veth.bg-0"
		if c > 0 {
			name = "veth.bg-cpu-sender-" + strconv.Itoa(c)
		}
		// 200 echoes around 30 µs, a noise of ±1 µs, shifted 2 ns per cell.
		for j, s := range rttSamples(name, c, "cpu", 200, 0.030+2e-6*float64(i), 0) {
			if s.Metric == "path" {
				s.Value = 0.030 + 2e-6*float64(i) + 1e-3*float64((j*7919)%200-100)/100
			}
			samples = append(samples, s)
		}
	}
	r, err := Build(Input{Run: results.Run{Experiment: "t", Complete: true}, Samples: samples})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.RTTTrends) != 1 {
		t.Fatalf("trends %+v", r.RTTTrends)
	}
	tr := r.RTTTrends[0]
	if tr.N != 3 || tr.Echoes != 600 || !(tr.P > 0.05) {
		t.Errorf("trend %+v: want 3 trials (600 echoes) and p > 0.05", tr)
	}
	md := renderMarkdown(t, r)
	if !strings.Contains(md.String(), "| 3 (600) |") || !strings.Contains(md.String(), "one value each: the median of the trial's echoes") {
		t.Errorf("Markdown does not say the test is per trial:\n%s", md.String())
	}
}

// TestRTTPathEnd: the report says where the path was timed; with tc stamps it shows where the
// socket's timestamps fell per cell, and a comparison of drivers on socket-timed paths carries
// a caution in the verdict.
func TestRTTPathEnd(t *testing.T) {
	r, err := Build(rttInput(false))
	if err != nil {
		t.Fatal(err)
	}
	md := renderMarkdown(t, r)
	for _, want := range []string{"from the echo leaving the sender's interface (its tc egress hook", "to the reply reaching the sender's interface (its tc ingress hook",
		"Path end in this run: the tc points at the sender's interface in every cell.", "| macvlan | 6 | 0.5 µs | -22.0 µs |",
		"- Path RTT: from the echo leaving the sender's interface (tc egress) to the reply reaching it (tc ingress), the same two points for every driver."} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	if len(r.RTTPairs) != 1 || r.RTTPairs[0].SocketEnd || strings.Contains(md.String(), "Caution") {
		t.Errorf("tc-timed pair flagged: %+v", r.RTTPairs)
	}
	r, err = Build(rttInputEnds(false, true))
	if err != nil {
		t.Fatal(err)
	}
	md.Reset()
	if err := r.Markdown(md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Path end in this run: the socket's timestamps in every cell", "- Path RTT: between the socket's timestamps, which each driver takes at its own point", "Caution: some cells' path was timed by the socket's timestamps"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("legacy run: Markdown lacks %q", want)
		}
	}
	if len(r.RTTPairs) != 1 || !r.RTTPairs[0].SocketEnd {
		t.Errorf("socket-timed pair not flagged: %+v", r.RTTPairs)
	}
}
