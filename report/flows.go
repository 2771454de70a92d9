package report

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/results/metric"
)

// flowsProbe is the name of the flows probe (probe/flows) in samples.
const flowsProbe = metric.Flows

// FlowSeries is one counted port's rate over time in one scenario: a function's egress, or
// a tap's ingress (the copies it gets).
type FlowSeries struct {
	Scenario, Node, Host string
	Tap                  bool
	// Points are the mean over trials at each nominal time, sorted by T.
	Points []FlowPoint
}

// FlowPoint is a rate at the end of one interval: T seconds after the flows started.
type FlowPoint struct {
	T    float64
	Bits float64
}

// FlowRow is one flow of the flows probe in one scenario, over its trials.
type FlowRow struct {
	Scenario, Flow, Bitrate string
	// Duration is the flow's length.
	Duration time.Duration
	// Received is the mean receiver throughput in bit/s; Loss the mean UDP loss in % (NaN
	// for TCP).
	Received, Loss float64
	Trials         int
}

// FlowWindow is the mean rate of each counted port while one set of flows was running:
// between two ends of flows (study C's Fig. 6: 0-30 s all three, 30-60 s two, 60-90 s one).
type FlowWindow struct {
	Scenario string
	From, To float64
	// Active are the flows running in the window.
	Active []string
	// Bits maps a node to its mean rate in bit/s over the window's full intervals (the first
	// interval after a change is left out).
	Bits map[string]float64
}

// TapRow is what a tap got in one scenario: its copies against what the hop before it sent.
type TapRow struct {
	Scenario, Node, Host, Prev, PrevHost string
	// TapBytes and PrevBytes are means over trials of the bytes the tap received and the
	// bytes the previous hop sent over the whole flows run.
	TapBytes, PrevBytes float64
	// Ratio is the mean over trials of TapBytes / PrevBytes (NaN without the previous hop).
	Ratio  float64
	Trials int
}

// ModeTable compares scenarios run under different steering modes or placements, case by
// case (study C's chains: transparent and routed, each on four hosts and on one host).
type ModeTable struct {
	// Title heads the table's section; Intro is a paragraph under it.
	Title, Intro string
	// Columns name the modes; every row has one scenario per column ("" for none).
	Columns []string
	Rows    []ModeRow
	// Ratios add a column each after the modes: the paired per-repetition ratio of one
	// column's throughput over another's.
	Ratios []RatioColumn
	// Panels, when set, split the table into one table per panel, each under its title with
	// the case column and the panel's columns, then the ratios of two of them, so that many
	// modes fit a page; a row with no scenario in a panel's columns is left out of it.
	// Without Panels the modes make one table.
	Panels []ModePanel
}

// ModePanel is one table of a ModeTable split by Panels.
type ModePanel struct {
	// Title is said above the panel's table ("On the four emulated hosts:").
	Title string
	// Columns are indexes into the ModeTable's Columns; Labels, when set, name them in this
	// panel's header, one per column (shorter: the title says what they share).
	Columns []int
	Labels  []string
}

// RatioColumn is a ratio column of a ModeTable: column Of's throughput over column To's
// (indexes into Columns).
type RatioColumn struct{ Of, To int }

// valid reports whether the ratio names two different columns of m.
func (q RatioColumn) valid(m *ModeTable) bool {
	return q.Of != q.To && q.Of >= 0 && q.To >= 0 && q.Of < len(m.Columns) && q.To < len(m.Columns)
}

// ModeRow is one case of a ModeTable.
type ModeRow struct {
	Case      string
	Scenarios []string
}

type flowKey struct{ scenario, node string }

// buildFlows gathers the flows probe's samples of trials that did not fail.
func (r *Report) buildFlows(samples []results.Sample, failed map[trialKey]*FailedTrial) {
	type acc struct {
		sum float64
		n   int
	}
	series := map[flowKey]map[float64]*acc{}
	var keys []flowKey
	info := map[flowKey]FlowSeries{}
	flows := map[[2]string]*FlowRow{}
	var flowKeys [][2]string
	loss := map[[2]string][]float64{}
	recv := map[[2]string][]float64{}
	type tapAcc struct {
		row TapRow
		tap map[int]float64
	}
	taps := map[flowKey]*tapAcc{}
	var tapKeys []flowKey
	egress := map[string]map[int]map[string]float64{} // scenario -> trial -> node -> bytes
	for _, x := range samples {
		if x.Probe != flowsProbe || failed[trialKey{x.Scenario, x.Trial}] != nil {
			continue
		}
		switch x.Metric {
		case metric.FlowsEgressRate.Metric, metric.FlowsTapRate.Metric:
			k := flowKey{x.Scenario, x.Labels["node"]}
			t, err := strconv.ParseFloat(x.Labels["t"], 64)
			if err != nil {
				continue
			}
			if series[k] == nil {
				series[k] = map[float64]*acc{}
				keys = append(keys, k)
				info[k] = FlowSeries{Scenario: k.scenario, Node: k.node, Host: x.Labels["host"], Tap: x.Metric == metric.FlowsTapRate.Metric}
			}
			if series[k][t] == nil {
				series[k][t] = &acc{}
			}
			series[k][t].sum += x.Value
			series[k][t].n++
		case metric.FlowsEgressBytes.Metric:
			if egress[x.Scenario] == nil {
				egress[x.Scenario] = map[int]map[string]float64{}
			}
			if egress[x.Scenario][x.Trial] == nil {
				egress[x.Scenario][x.Trial] = map[string]float64{}
			}
			egress[x.Scenario][x.Trial][x.Labels["node"]] = x.Value
		case metric.FlowsTapBytes.Metric:
			k := flowKey{x.Scenario, x.Labels["node"]}
			if taps[k] == nil {
				taps[k] = &tapAcc{row: TapRow{Scenario: x.Scenario, Node: k.node, Host: x.Labels["host"], Prev: x.Labels["prev"], PrevHost: x.Labels["prev_host"]},
					tap: map[int]float64{}}
				tapKeys = append(tapKeys, k)
			}
			taps[k].tap[x.Trial] = x.Value
		case metric.FlowsThroughput.Metric, metric.FlowsLoss.Metric:
			k := [2]string{x.Scenario, x.Labels["flow"]}
			if flows[k] == nil {
				d, _ := time.ParseDuration(x.Labels["duration"])
				flows[k] = &FlowRow{Scenario: k[0], Flow: k[1], Bitrate: x.Labels["bitrate"], Duration: d, Loss: math.NaN()}
				flowKeys = append(flowKeys, k)
			}
			if x.Metric == metric.FlowsLoss.Metric {
				loss[k] = append(loss[k], x.Value)
			} else if x.Labels["side"] == "receiver" {
				recv[k] = append(recv[k], x.Value)
			}
		}
	}
	for _, k := range keys {
		s := info[k]
		for _, t := range sortedKeys(series[k]) {
			a := series[k][t]
			s.Points = append(s.Points, FlowPoint{T: t, Bits: a.sum / float64(a.n)})
		}
		r.FlowSeries = append(r.FlowSeries, s)
	}
	for _, k := range flowKeys {
		f := flows[k]
		f.Received, f.Trials = mean(recv[k]), len(recv[k])
		if len(loss[k]) > 0 {
			f.Loss = mean(loss[k])
		}
		r.Flows = append(r.Flows, *f)
	}
	for _, k := range tapKeys {
		a := taps[k]
		var tb, pb, ratios []float64
		for _, trial := range sortedKeys(a.tap) {
			tb = append(tb, a.tap[trial])
			if p, ok := egress[k.scenario][trial][a.row.Prev]; ok {
				pb = append(pb, p)
				if p > 0 {
					ratios = append(ratios, a.tap[trial]/p)
				}
			}
		}
		a.row.TapBytes, a.row.PrevBytes, a.row.Ratio, a.row.Trials = mean(tb), mean(pb), mean(ratios), len(tb)
		r.Taps = append(r.Taps, a.row)
	}
	r.buildFlowWindows()
}

// buildFlowWindows cuts each scenario with several flows into the windows between the ends
// of its flows.
func (r *Report) buildFlowWindows() {
	byScenario := map[string][]FlowRow{}
	var order []string
	for _, f := range r.Flows {
		if byScenario[f.Scenario] == nil {
			order = append(order, f.Scenario)
		}
		byScenario[f.Scenario] = append(byScenario[f.Scenario], f)
	}
	for _, s := range order {
		fs := byScenario[s]
		var ends []float64
		for _, f := range fs {
			if e := f.Duration.Seconds(); e > 0 && !slices.Contains(ends, e) {
				ends = append(ends, e)
			}
		}
		if len(ends) < 2 {
			continue
		}
		sort.Float64s(ends)
		lo := 0.0
		for _, hi := range ends {
			w := FlowWindow{Scenario: s, From: lo, To: hi, Bits: map[string]float64{}}
			for _, f := range fs {
				if f.Duration.Seconds() >= hi {
					w.Active = append(w.Active, f.Flow)
				}
			}
			sort.Strings(w.Active)
			for _, se := range r.FlowSeries {
				if se.Scenario != s {
					continue
				}
				dt := seriesStep(se.Points)
				var vs []float64
				for _, p := range se.Points {
					// Full intervals inside the window, the first after the change left out.
					if p.T-dt >= lo+dt-1e-9 && p.T <= hi+1e-9 {
						vs = append(vs, p.Bits)
					}
				}
				w.Bits[se.Node] = mean(vs)
			}
			r.FlowWindows = append(r.FlowWindows, w)
			lo = hi
		}
	}
}

// seriesStep is the interval between a series' points (1 s when it cannot tell).
func seriesStep(ps []FlowPoint) float64 {
	if len(ps) < 2 {
		return 1
	}
	return ps[1].T - ps[0].T
}

// flowScenarios are the scenarios with a time series, in display order.
func (r *Report) flowScenarios() []string {
	var out []string
	for _, s := range r.Scenarios {
		for _, se := range r.FlowSeries {
			if se.Scenario == s {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

func flowsChartName(scenario string) string { return "flows-" + scenario }

func mbit(v float64) string { return fixed(v/1e6, 2) }

func (r *Report) flowsSection() section {
	sec := section{id: "flows", title: "Steering check: traffic at each function's egress over time", level: 2}
	sec.blocks = append(sec.blocks, block{para: "Several flows run at once, each classified into its own chain; every function's egress " +
		"counter (a tap's: its ingress, the copies it gets) is read once per interval. A function shared by chains carries the sum of their flows " +
		"while they run (study C, Fig. 6). Rates are means over trials at each nominal time and count whole Ethernet frames (iperf3's figures count UDP payload, a few % less); the window table leaves out the first interval after a flow ends."})
	if len(r.Flows) > 0 {
		t := &table{id: "flows-table", header: []string{"scenario", "flow (chain)", "offered", "duration", "received Mbit/s", "loss", "trials"},
			right: []bool{false, false, true, true, true, true, true}}
		for _, f := range r.Flows {
			l := dash
			if !math.IsNaN(f.Loss) {
				l = fixed(f.Loss, 2) + " %"
			}
			t.rows = append(t.rows, []string{r.ScenarioLabel(f.Scenario), f.Flow, orDash(f.Bitrate), f.Duration.String(), mbit(f.Received), l, strconv.Itoa(f.Trials)})
		}
		sec.blocks = append(sec.blocks, block{table: t})
	}
	for _, s := range r.flowScenarios() {
		var ws []FlowWindow
		for _, w := range r.FlowWindows {
			if w.Scenario == s {
				ws = append(ws, w)
			}
		}
		if len(ws) > 0 {
			header := []string{"node (host)"}
			right := []bool{false}
			for _, w := range ws {
				header = append(header, fmt.Sprintf("%s-%s s (%s) Mbit/s", fixed(w.From, 0), fixed(w.To, 0), strings.Join(w.Active, "+")))
				right = append(right, true)
			}
			t := &table{id: "flows-windows-" + s, header: header, right: right}
			for _, se := range r.FlowSeries {
				if se.Scenario != s {
					continue
				}
				name := se.Node + " (" + orDash(se.Host) + ")"
				if se.Tap {
					name += " tap ingress"
				}
				row := []string{name}
				for _, w := range ws {
					row = append(row, mbit(w.Bits[se.Node]))
				}
				t.rows = append(t.rows, row)
			}
			sec.blocks = append(sec.blocks, block{para: "Scenario " + r.ScenarioLabel(s) + ": mean egress rate while each set of flows ran."}, block{table: t})
		}
		sec.blocks = append(sec.blocks, block{chart: flowsChartName(s)})
	}
	return sec
}

func (r *Report) tapSection() section {
	sec := section{id: "tap", title: "Tap: copies a tap port pair group gets", level: 2}
	sec.blocks = append(sec.blocks, block{para: "A tap group gets a copy of the chain's traffic; the original goes on. " +
		"The tap's copies are the bytes its port received during the flows; the previous hop's are the bytes it sent. " +
		"Study C found that networking-sfc's tap worked only when the tap function ran on the same node as the previous hop of the chain " +
		"(its tunnelling bridge got no mirroring rules); sfclab's tap sends the copy through the steering tunnel when the tap is on another host."})
	t := &table{id: "tap-table", header: []string{"scenario", "tap (host)", "previous hop (host)", "same host", "tap got MB", "previous hop sent MB", "tap / previous hop", "trials"},
		right: []bool{false, false, false, false, true, true, true, true}}
	for _, row := range r.Taps {
		same := "no"
		if row.Host == row.PrevHost {
			same = "yes"
		}
		t.rows = append(t.rows, []string{r.ScenarioLabel(row.Scenario), row.Node + " (" + orDash(row.Host) + ")", orDash(row.Prev) + " (" + orDash(row.PrevHost) + ")", same,
			fixed(row.TapBytes/1e6, 2), fixed(row.PrevBytes/1e6, 2), fixed(row.Ratio, 3), strconv.Itoa(row.Trials)})
	}
	sec.blocks = append(sec.blocks, block{table: t})
	return sec
}

// throughputOf returns the throughput row of a scenario.
func (r *Report) throughputOf(s string) (*ThroughputRow, bool) {
	for i := range r.Throughput {
		if r.Throughput[i].Scenario == s && len(r.Throughput[i].Gbits) > 0 {
			return &r.Throughput[i], true
		}
	}
	return nil, false
}

// ModeRatio is the paired ratio of two scenarios' throughput (of over to).
func (r *Report) ModeRatio(of, to string) (Ratio, bool) {
	a, ok1 := r.throughputOf(of)
	b, ok2 := r.throughputOf(to)
	if !ok1 || !ok2 {
		return Ratio{}, false
	}
	return pairedRatio(of, to, a.Trials, a.Gbits, b.Trials, b.Gbits), true
}

// tcgCell is the mark a figure of a scenario that ran VMs under TCG carries in a table with a
// figure per cell (the modes table): short, so that the table fits a page; a note under the
// table spells it out as EmulatedMark.
const tcgCell = " (TCG)"

func (r *Report) modesSection(m *ModeTable) section {
	sec := section{id: "modes", title: m.Title, level: 2}
	if m.Intro != "" {
		sec.blocks = append(sec.blocks, block{para: m.Intro})
	}
	panels := m.Panels
	if len(panels) == 0 {
		all := ModePanel{}
		for i := range m.Columns {
			all.Columns = append(all.Columns, i)
		}
		panels = []ModePanel{all}
	}
	var marked, incomparable bool
	for k, pn := range panels {
		t, mk, inc := r.modesTable(m, pn)
		if t == nil {
			continue
		}
		t.id = "modes-table"
		if k > 0 {
			t.id += "-" + strconv.Itoa(k+1)
		}
		marked, incomparable = marked || mk, incomparable || inc
		if pn.Title != "" {
			sec.blocks = append(sec.blocks, block{para: pn.Title})
		}
		sec.blocks = append(sec.blocks, block{table: t})
	}
	var notes []string
	if marked {
		notes = append(notes, "(TCG): the scenario ran VMs under TCG, "+EmulatedMark+"; a ratio so marked is of two such scenarios, both on the same emulated CPU")
	}
	if incomparable {
		notes = append(notes, notComparable+": one side ran VMs under TCG and the other did not, so no ratio is given")
	}
	if len(notes) > 0 {
		sec.blocks = append(sec.blocks, block{para: strings.Join(notes, ". ") + "."})
	}
	return sec
}

// modesTable is the table of one panel of m (nil when no row has a scenario in its columns),
// and whether a cell carries the TCG mark or stands for a ratio not given across the TCG line.
func (r *Report) modesTable(m *ModeTable, pn ModePanel) (t *table, marked, incomparable bool) {
	label := func(c int) string {
		for k, pc := range pn.Columns {
			if pc == c && k < len(pn.Labels) && pn.Labels[k] != "" {
				return pn.Labels[k]
			}
		}
		return m.Columns[c]
	}
	var cols []int
	for _, c := range pn.Columns {
		if c >= 0 && c < len(m.Columns) {
			cols = append(cols, c)
		}
	}
	header := []string{"case"}
	right := []bool{false}
	for _, c := range cols {
		header = append(header, label(c)+" Gbit/s [95 % CI]")
		right = append(right, true)
	}
	var ratios []RatioColumn
	for _, q := range m.Ratios {
		if q.valid(m) && slices.Contains(cols, q.Of) && slices.Contains(cols, q.To) {
			ratios = append(ratios, q)
			header = append(header, label(q.Of)+" ÷ "+label(q.To)+" [95 % CI]")
			right = append(right, true)
		}
	}
	scenario := func(row ModeRow, c int) string {
		if c < len(row.Scenarios) {
			return row.Scenarios[c]
		}
		return ""
	}
	t = &table{header: header, right: right}
	for _, row := range m.Rows {
		if !slices.ContainsFunc(cols, func(c int) bool { return scenario(row, c) != "" }) {
			continue
		}
		cells := []string{row.Case}
		for _, c := range cols {
			cell := dash
			if s := scenario(row, c); s != "" {
				cell = "not measured"
				if tr, ok := r.throughputOf(s); ok {
					cell = f2(tr.Summary.Mean) + " " + ciRange(tr.Summary.CI95Low, tr.Summary.CI95High, 2)
					if r.Emulated(s) {
						cell += tcgCell
						marked = true
					}
				}
			}
			cells = append(cells, cell)
		}
		for _, q := range ratios {
			cell := dash
			of, to := scenario(row, q.Of), scenario(row, q.To)
			if of != "" && to != "" {
				if v, ok := r.ModeRatio(of, to); ok {
					cell = fixed(v.Value, 2) + "×"
					if !math.IsNaN(v.Low) {
						cell += " " + ciRange(v.Low, v.High, 2)
					}
					switch {
					case r.Incomparable(of, to): // an emulated CPU against a real one: no ratio
						cell = notComparable
						incomparable = true
					case r.Emulated(of):
						cell += tcgCell
						marked = true
					}
				}
			}
			cells = append(cells, cell)
		}
		t.rows = append(t.rows, cells)
	}
	if len(t.rows) == 0 {
		return nil, false, false
	}
	return t, marked, incomparable
}

// flowsPlot draws a scenario's series: one line per counted port, Mbit/s over time.
func (r *Report) flowsPlot(scenario string) (*plot.Plot, error) {
	p := newPlot(wrapTitle("Egress rate over time: "+r.ScenarioLabel(scenario), 60), "time since the flows started (s)", "Mbit/s")
	p.Add(gridLines())
	i := 0
	for _, se := range r.FlowSeries {
		if se.Scenario != scenario || len(se.Points) == 0 {
			continue
		}
		xy := make(plotter.XYs, len(se.Points))
		for j, pt := range se.Points {
			xy[j] = plotter.XY{X: pt.T, Y: pt.Bits / 1e6}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, fmt.Errorf("plot flows of %s: %w", scenario, err)
		}
		// A node keeps its colour in every flows chart of the report (v4 in Fig. 6 and the taps').
		st := r.seriesStyle("node:" + se.Node)
		l.Color, l.Dashes = st.colour, st.dashes
		l.Width = 1.5
		p.Add(l)
		name := se.Node
		if se.Tap {
			name += " (tap ingress)"
		}
		p.Legend.Add(name, l)
		i++
	}
	if i == 0 {
		return nil, nil
	}
	p.Y.Min = 0
	// Room on the right for the legend, clear of the lines.
	maxT := 0.0
	for _, se := range r.FlowSeries {
		if se.Scenario == scenario && len(se.Points) > 0 {
			maxT = math.Max(maxT, se.Points[len(se.Points)-1].T)
		}
	}
	p.X.Min, p.X.Max = 0, maxT*1.22
	p.Legend.Top = true
	return p, nil
}
