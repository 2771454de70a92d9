package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/stats"
)

// RTTRow is one scenario at one requested rate of the rtt probe (all trials pooled): the
// round trips on the path (the headline), as the application saw them, the sender's stack
// both ways (medians), and the rate achieved.
type RTTRow struct {
	Scenario, Rate string
	// Path summarizes every echo's round trip on the path (ms): from the kernel's TX
	// timestamp to the reply's RX timestamp, everything outside the sender's stack, what
	// study D's kernel captures measured. It is the report's headline RTT; N is 0 when no
	// echo had both kernel timestamps.
	Path stats.Summary
	// RTT summarizes every echo's round trip as the application saw it (ms): the path plus
	// the sender's stack both ways, so it also holds the wait of the probe's reader for a
	// core, which load on the sender's host makes long.
	RTT stats.Summary
	// StackTX, StackRX are medians (ms) of the echoes with kernel timestamps.
	StackTX, StackRX float64
	// Requested and Achieved are mean rates (pps; Requested 0 for a flood); Reached is false
	// when any trial missed the requested rate by more than 1 %.
	Requested, Achieved float64
	Reached             bool
	// Loss is the mean loss (%).
	Loss float64
	// Background is the scenario's background-node count (-1: none recorded), with its kind
	// and side.
	Background int
	Kind, Side string
}

// RTTTrend is Kendall's tau-b between the background-node count and the round trip, over
// every echo of the scenarios of one base scenario, kind, side and rate (the count-0 cell
// included): does RTT grow with background load? The round trip is the path RTT (Figure
// FigurePath) unless a cell of the group has no kernel timestamps (FigureApp).
type RTTTrend struct {
	Base, Kind, Side, Rate string
	Figure                 string
	Counts                 []int
	N                      int
	Tau, P                 float64
}

// RTTPair is the Wilcoxon signed-rank test between two base scenarios (e.g. two drivers):
// their median RTTs paired cell by cell (same background cell and rate), on the path RTT
// (Figure FigurePath) when every cell of both has it, else on the application's (FigureApp).
type RTTPair struct {
	A, B   string
	Figure string
	Pairs  int
	// Ratio is the median over pairs of median(B)/median(A) of Figure; AppRatio the same of
	// the application's RTT, beside it.
	W, P, Ratio, AppRatio float64
}

// The figures an RTT statistic is taken on.
const (
	// FigurePath is the round trip on the path (kernel TX to RX timestamp): the headline.
	FigurePath = "path"
	// FigureApp is the round trip as the application saw it (send call to reply read), the
	// sender's stack included.
	FigureApp = "app RTT (incl. sender stack)"
)

// rttKey groups the rtt probe's samples.
type rttKey struct{ scenario, rate string }

type rttData struct {
	rtt, path, stx, srx, req, ach, loss []float64
	reached                             bool
}

// buildRTT reads the rtt probe's samples and the background-node samples.
func (r *Report) buildRTT(samples []results.Sample) {
	data := map[rttKey]*rttData{}
	var keys []rttKey
	bg := map[string]results.Sample{}
	for _, x := range samples {
		if x.Probe == "load" && x.Metric == "background_nodes" {
			bg[x.Scenario] = x
			continue
		}
		if x.Probe != "rtt" {
			continue
		}
		k := rttKey{x.Scenario, x.Labels["rate"]}
		d := data[k]
		if d == nil {
			d = &rttData{reached: true}
			data[k] = d
			keys = append(keys, k)
		}
		switch x.Metric {
		case "rtt":
			d.rtt = append(d.rtt, x.Value)
		case "path":
			d.path = append(d.path, x.Value)
		case "stack_tx":
			d.stx = append(d.stx, x.Value)
		case "stack_rx":
			d.srx = append(d.srx, x.Value)
		case "rate_requested":
			d.req = append(d.req, x.Value)
		case "rate_achieved":
			d.ach = append(d.ach, x.Value)
			if x.Labels["rate_reached"] == "false" {
				d.reached = false
			}
		case "loss":
			d.loss = append(d.loss, x.Value)
		}
	}
	if len(keys) == 0 {
		return
	}
	order := map[string]int{}
	for i, s := range r.Scenarios {
		order[s] = i
	}
	slices.SortStableFunc(keys, func(a, b rttKey) int {
		if order[a.scenario] != order[b.scenario] {
			return order[a.scenario] - order[b.scenario]
		}
		return rateOrder(a.rate) - rateOrder(b.rate)
	})
	for _, k := range keys {
		d := data[k]
		row := RTTRow{Scenario: k.scenario, Rate: k.rate, RTT: stats.Summarize(d.rtt),
			Path: stats.Summarize(d.path), StackTX: median(d.stx), StackRX: median(d.srx),
			Requested: mean(d.req), Achieved: mean(d.ach), Reached: d.reached, Loss: mean(d.loss), Background: -1}
		if b, ok := bg[k.scenario]; ok {
			row.Background, row.Kind, row.Side = int(b.Value), b.Labels["kind"], b.Labels["side"]
		}
		r.RTT = append(r.RTT, row)
	}
	r.rttEchoes = data
	r.buildRTTTrends(data)
	r.buildRTTPairs()
	r.buildRTTBoxes()
}

// rateOrder sorts rates numerically, the flood last.
func rateOrder(rate string) int {
	if v, err := strconv.ParseFloat(rate, 64); err == nil {
		return int(math.Min(v, 1e9))
	}
	return math.MaxInt32
}

func median(xs []float64) float64 { return stats.Summarize(xs).Median }

// baseOf is the scenario a background cell was made from ("veth.bg-cpu-sender-8" -> "veth").
func baseOf(scenario string) string {
	if i := strings.LastIndex(scenario, ".bg-"); i >= 0 {
		return scenario[:i]
	}
	return scenario
}

func (r *Report) buildRTTTrends(data map[rttKey]*rttData) {
	type group struct{ base, kind, side, rate string }
	zero := map[[2]string]RTTRow{} // base, rate -> the count-0 row
	for _, row := range r.RTT {
		if row.Background == 0 {
			zero[[2]string{baseOf(row.Scenario), row.Rate}] = row
		}
	}
	rows := map[group][]RTTRow{}
	var groups []group
	for _, row := range r.RTT {
		if row.Background <= 0 {
			continue
		}
		g := group{baseOf(row.Scenario), row.Kind, row.Side, row.Rate}
		if _, ok := rows[g]; !ok {
			groups = append(groups, g)
			if z, ok := zero[[2]string{g.base, g.rate}]; ok {
				rows[g] = append(rows[g], z)
			}
		}
		rows[g] = append(rows[g], row)
	}
	for _, g := range groups {
		var x, y []float64
		t := RTTTrend{Base: g.base, Kind: g.kind, Side: g.side, Rate: g.rate, Figure: FigurePath}
		for _, row := range rows[g] {
			if row.Path.N == 0 {
				t.Figure = FigureApp
			}
		}
		for _, row := range rows[g] {
			t.Counts = append(t.Counts, row.Background)
			echoes := data[rttKey{row.Scenario, row.Rate}].path
			if t.Figure == FigureApp {
				echoes = data[rttKey{row.Scenario, row.Rate}].rtt
			}
			for _, v := range echoes {
				x = append(x, float64(row.Background))
				y = append(y, v)
			}
		}
		if len(t.Counts) < 2 {
			continue
		}
		res, err := stats.KendallTauB(x, y)
		if err != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("Kendall tau-b of %s vs background nodes for %s (%s, %s, rate %s): %v", t.Figure, g.base, g.kind, g.side, g.rate, err))
			continue
		}
		t.N, t.Tau, t.P = len(x), res.Statistic, res.PValue
		r.RTTTrends = append(r.RTTTrends, t)
	}
}

// buildRTTPairs tests every pair of base scenarios on the cells both have.
func (r *Report) buildRTTPairs() {
	type cell struct{ suffix, rate string }
	type medians struct{ path, app float64 }
	byBase := map[string]map[cell]medians{}
	var bases []string
	for _, row := range r.RTT {
		b := baseOf(row.Scenario)
		if byBase[b] == nil {
			byBase[b] = map[cell]medians{}
			bases = append(bases, b)
		}
		byBase[b][cell{strings.TrimPrefix(row.Scenario, b), row.Rate}] = medians{row.Path.Median, row.RTT.Median}
	}
	for i := 0; i < len(bases); i++ {
		for j := i + 1; j < len(bases); j++ {
			var cells []cell
			fig := FigurePath
			for c, a := range byBase[bases[i]] {
				if b, ok := byBase[bases[j]][c]; ok && a.app > 0 {
					cells = append(cells, c)
					if !(a.path > 0) || !(b.path > 0) { // NaN: no kernel timestamps
						fig = FigureApp
					}
				}
			}
			if len(cells) < 2 {
				continue
			}
			slices.SortFunc(cells, func(a, b cell) int { return strings.Compare(a.suffix+" "+a.rate, b.suffix+" "+b.rate) })
			var x, y, ratios, appRatios []float64
			for _, c := range cells {
				a, b := byBase[bases[i]][c], byBase[bases[j]][c]
				appRatios = append(appRatios, b.app/a.app)
				if fig == FigurePath {
					x, y, ratios = append(x, a.path), append(y, b.path), append(ratios, b.path/a.path)
				} else {
					x, y = append(x, a.app), append(y, b.app)
				}
			}
			if fig == FigureApp {
				ratios = appRatios
			}
			res, err := stats.WilcoxonSignedRank(x, y)
			if err != nil {
				r.Notes = append(r.Notes, fmt.Sprintf("Wilcoxon signed-rank %s vs %s (%s): %v", bases[i], bases[j], fig, err))
				continue
			}
			r.RTTPairs = append(r.RTTPairs, RTTPair{A: bases[i], B: bases[j], Figure: fig, Pairs: len(x), W: res.Statistic, P: res.PValue,
				Ratio: median(ratios), AppRatio: median(appRatios)})
		}
	}
}

// usText formats ms as µs with one decimal ("—" for NaN).
func usText(ms float64) string {
	if math.IsNaN(ms) {
		return dash
	}
	return strconv.FormatFloat(ms*1000, 'f', 1, 64) + " µs"
}

// rttIntro says which figure is the headline and why the other is beside it.
const rttIntro = "Headline: the path RTT, each echo's round trip from the kernel's TX timestamp to the reply's RX timestamp " +
	"(everything outside the sender's stack: what study D's kernel captures measured); its min/median/mean/p99/max/std are over the echoes with both timestamps. " +
	"Beside it, labelled, the application's RTT (send call to reply read), which adds the sender's stack both ways: stack TX (send call to the driver) and stack RX (arrival to the read). " +
	"Stack RX includes the wait of the probe's reader for a core, so load on the sender's host inflates the application's RTT without the path changing. " +
	"Rates are requested vs achieved; a rate not reached is marked."

// rttSection renders the rtt probe's tables.
func (r *Report) rttSection() section {
	sec := section{id: "rtt", title: "Round trips (rtt probe)", level: 2}
	sec.blocks = append(sec.blocks, block{para: rttIntro})
	t := &table{id: "rtt-path", header: []string{"scenario", "rate", "n", "path min", "median", "mean", "p99", "max", "std", "achieved pps", "loss %"},
		right: []bool{false, false, true, true, true, true, true, true, true, true, true}}
	st := &table{id: "rtt-stack", header: []string{"scenario", "rate", "app RTT median", "app RTT p99", "stack TX median", "stack RX median", "path median"},
		right: []bool{false, false, true, true, true, true, true}}
	unstamped := 0
	for _, row := range r.RTT {
		ach := strconv.FormatFloat(row.Achieved, 'f', 0, 64)
		if !row.Reached {
			ach += " (rate not reached)"
		}
		n := strconv.Itoa(row.Path.N)
		if row.Path.N != row.RTT.N {
			n += " of " + strconv.Itoa(row.RTT.N)
			unstamped++
		}
		t.rows = append(t.rows, []string{row.Scenario, row.Rate, n, usText(row.Path.Min), usText(row.Path.Median), usText(row.Path.Mean),
			usText(row.Path.P99), usText(row.Path.Max), usText(row.Path.Stdev), ach, strconv.FormatFloat(row.Loss, 'f', 2, 64)})
		st.rows = append(st.rows, []string{row.Scenario, row.Rate, usText(row.RTT.Median), usText(row.RTT.P99),
			usText(row.StackTX), usText(row.StackRX), usText(row.Path.Median)})
	}
	sec.blocks = append(sec.blocks, block{para: "Path RTT (headline) per scenario and requested rate, all trials pooled:"}, block{table: t})
	if unstamped > 0 {
		sec.blocks = append(sec.blocks, block{para: "n is \"K of N\" where only K of the N echoes that came back had both kernel timestamps; " +
			"the path columns are over those K, the app RTT over all N (\"—\": none had them)."})
	}
	sec.blocks = append(sec.blocks, block{para: "App RTT (incl. sender stack): the round trip as the application saw it, and where it goes beyond the path " +
		"(app RTT ≈ stack TX + path + stack RX, medians of each):"}, block{table: st})
	if len(r.RTTTrends) > 0 {
		tt := &table{id: "rtt-trend", header: []string{"scenario", "kind", "bg host", "rate", "figure", "counts", "echoes", "Kendall tau-b", "p"},
			right: []bool{false, false, false, false, false, false, true, true, true}}
		for _, x := range r.RTTTrends {
			var cs []string
			for _, c := range x.Counts {
				cs = append(cs, strconv.Itoa(c))
			}
			tt.rows = append(tt.rows, []string{x.Base, x.Kind, x.Side, x.Rate, x.Figure, strings.Join(cs, ", "), strconv.Itoa(x.N),
				strconv.FormatFloat(x.Tau, 'f', 3, 64), strconv.FormatFloat(x.P, 'g', 3, 64)})
		}
		sec.blocks = append(sec.blocks, block{para: "Path RTT vs the number of background nodes on the host in column bg host (sender: the chain source's host; responder: its destination's): Kendall's tau-b over every echo " +
			"(positive: RTT grows with background load; p < 0.05: significant at 95 %). A group with a cell without kernel timestamps is tested on the app RTT, as its figure says."},
			block{table: tt})
	}
	for _, g := range r.RTTBoxes {
		sec.blocks = append(sec.blocks, block{chart: rttBoxName(g)})
	}
	if len(r.RTTPairs) > 0 {
		pt := &table{id: "rtt-pairs", header: []string{"A", "B", "figure", "paired cells", "median ratio B/A", "Wilcoxon W", "p", "app RTT ratio B/A (incl. sender stack)"},
			right: []bool{false, false, false, true, true, true, true, true}}
		for _, x := range r.RTTPairs {
			pt.rows = append(pt.rows, []string{x.A, x.B, x.Figure, strconv.Itoa(x.Pairs), strconv.FormatFloat(x.Ratio, 'f', 2, 64),
				strconv.FormatFloat(x.W, 'f', 1, 64), strconv.FormatFloat(x.P, 'g', 3, 64), strconv.FormatFloat(x.AppRatio, 'f', 2, 64)})
		}
		sec.blocks = append(sec.blocks, block{para: "Scenarios compared cell by cell (same background cell and rate): Wilcoxon signed-rank test of their median path RTTs " +
			"(p < 0.05: different at 95 %); the app RTT's ratio is beside it, not tested."},
			block{table: pt})
	}
	sec.blocks = append(sec.blocks, r.hostCPUBlocks()...)
	return sec
}

// rttVerdict is the verdict's headline of an rtt run: the path RTT of every cell without
// background load, then every pair of scenarios, each with the application's RTT labelled
// beside it.
func (r *Report) rttVerdict() []string {
	var out []string
	for _, row := range r.RTT {
		if row.Background > 0 {
			continue
		}
		rate := row.Rate + " pps"
		if row.Rate == "max" {
			rate = "the highest rate"
		}
		if row.Path.N == 0 {
			out = append(out, fmt.Sprintf("%s at %s: no kernel timestamps, so no path RTT; app RTT (incl. sender stack) median %s.", row.Scenario, rate, usText(row.RTT.Median)))
			continue
		}
		out = append(out, fmt.Sprintf("%s at %s: path RTT median %s, p99 %s (app RTT incl. sender stack: median %s).",
			row.Scenario, rate, usText(row.Path.Median), usText(row.Path.P99), usText(row.RTT.Median)))
	}
	for _, x := range r.RTTPairs {
		what := "path RTT"
		if x.Figure == FigureApp {
			what = "app RTT (incl. sender stack; some cells have no kernel timestamps)"
		}
		verdict := "not different at 95 %"
		if x.P < 0.05 {
			verdict = "different at 95 %"
		}
		out = append(out, fmt.Sprintf("%s vs %s: %s median ratio %s/%s %s over %d paired cells, Wilcoxon p = %s (%s); app RTT (incl. sender stack) ratio %s.",
			x.B, x.A, what, x.B, x.A, strconv.FormatFloat(x.Ratio, 'f', 2, 64), x.Pairs, strconv.FormatFloat(x.P, 'g', 3, 64), verdict,
			strconv.FormatFloat(x.AppRatio, 'f', 2, 64)))
	}
	return out
}
