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
// round trips as the application saw them, their split (medians), and the rate achieved.
type RTTRow struct {
	Scenario, Rate string
	// RTT summarizes every echo's round trip (ms).
	RTT stats.Summary
	// Path, StackTX, StackRX are medians (ms) of the echoes with kernel timestamps.
	Path, StackTX, StackRX float64
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
// included): does RTT grow with background load?
type RTTTrend struct {
	Base, Kind, Side, Rate string
	Counts                 []int
	N                      int
	Tau, P                 float64
}

// RTTPair is the Wilcoxon signed-rank test between two base scenarios (e.g. two drivers):
// their median RTTs paired cell by cell (same background cell and rate).
type RTTPair struct {
	A, B  string
	Pairs int
	// Ratio is the median over pairs of median(B)/median(A).
	W, P, Ratio float64
}

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
			Path: median(d.path), StackTX: median(d.stx), StackRX: median(d.srx),
			Requested: mean(d.req), Achieved: mean(d.ach), Reached: d.reached, Loss: mean(d.loss), Background: -1}
		if b, ok := bg[k.scenario]; ok {
			row.Background, row.Kind, row.Side = int(b.Value), b.Labels["kind"], b.Labels["side"]
		}
		r.RTT = append(r.RTT, row)
	}
	r.buildRTTTrends(data)
	r.buildRTTPairs()
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
		t := RTTTrend{Base: g.base, Kind: g.kind, Side: g.side, Rate: g.rate}
		for _, row := range rows[g] {
			t.Counts = append(t.Counts, row.Background)
			for _, v := range data[rttKey{row.Scenario, row.Rate}].rtt {
				x = append(x, float64(row.Background))
				y = append(y, v)
			}
		}
		if len(t.Counts) < 2 {
			continue
		}
		res, err := stats.KendallTauB(x, y)
		if err != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("Kendall tau-b of RTT vs background nodes for %s (%s, %s, rate %s): %v", g.base, g.kind, g.side, g.rate, err))
			continue
		}
		t.N, t.Tau, t.P = len(x), res.Statistic, res.PValue
		r.RTTTrends = append(r.RTTTrends, t)
	}
}

// buildRTTPairs tests every pair of base scenarios on the cells both have.
func (r *Report) buildRTTPairs() {
	type cell struct{ suffix, rate string }
	byBase := map[string]map[cell]float64{}
	var bases []string
	for _, row := range r.RTT {
		b := baseOf(row.Scenario)
		if byBase[b] == nil {
			byBase[b] = map[cell]float64{}
			bases = append(bases, b)
		}
		byBase[b][cell{strings.TrimPrefix(row.Scenario, b), row.Rate}] = row.RTT.Median
	}
	for i := 0; i < len(bases); i++ {
		for j := i + 1; j < len(bases); j++ {
			var x, y, ratios []float64
			for c, a := range byBase[bases[i]] {
				if b, ok := byBase[bases[j]][c]; ok && a > 0 {
					x, y, ratios = append(x, a), append(y, b), append(ratios, b/a)
				}
			}
			if len(x) < 2 {
				continue
			}
			res, err := stats.WilcoxonSignedRank(x, y)
			if err != nil {
				r.Notes = append(r.Notes, fmt.Sprintf("Wilcoxon signed-rank %s vs %s: %v", bases[i], bases[j], err))
				continue
			}
			r.RTTPairs = append(r.RTTPairs, RTTPair{A: bases[i], B: bases[j], Pairs: len(x), W: res.Statistic, P: res.PValue, Ratio: median(ratios)})
		}
	}
}

// rttSection renders the rtt probe's tables.
func (r *Report) rttSection() section {
	sec := section{id: "rtt", title: "Round trips (rtt probe)", level: 2}
	sec.blocks = append(sec.blocks, block{para: "Every echo's round trip as the application saw it (rtt), and its split by the kernel's software timestamps: " +
		"stack TX (send call to the driver), path (driver to the reply's arrival: everything outside the sender's stack), stack RX (arrival to the read). " +
		"Rates are requested vs achieved; a rate not reached is marked."})
	t := &table{id: "rtt", header: []string{"scenario", "rate", "n", "min", "median", "mean", "p99", "max", "std", "path", "stack TX", "stack RX", "achieved pps", "loss %"},
		right: []bool{false, false, true, true, true, true, true, true, true, true, true, true, true, true}}
	us := func(ms float64) string {
		if math.IsNaN(ms) {
			return dash
		}
		return strconv.FormatFloat(ms*1000, 'f', 1, 64) + " µs"
	}
	for _, row := range r.RTT {
		ach := strconv.FormatFloat(row.Achieved, 'f', 0, 64)
		if !row.Reached {
			ach += " (rate not reached)"
		}
		t.rows = append(t.rows, []string{row.Scenario, row.Rate, strconv.Itoa(row.RTT.N), us(row.RTT.Min), us(row.RTT.Median), us(row.RTT.Mean),
			us(row.RTT.P99), us(row.RTT.Max), us(row.RTT.Stdev), us(row.Path), us(row.StackTX), us(row.StackRX), ach,
			strconv.FormatFloat(row.Loss, 'f', 2, 64)})
	}
	sec.blocks = append(sec.blocks, block{table: t})
	if len(r.RTTTrends) > 0 {
		tt := &table{id: "rtt-trend", header: []string{"scenario", "kind", "side", "rate", "counts", "echoes", "Kendall tau-b", "p"},
			right: []bool{false, false, false, false, false, true, true, true}}
		for _, x := range r.RTTTrends {
			var cs []string
			for _, c := range x.Counts {
				cs = append(cs, strconv.Itoa(c))
			}
			tt.rows = append(tt.rows, []string{x.Base, x.Kind, x.Side, x.Rate, strings.Join(cs, ", "), strconv.Itoa(x.N),
				strconv.FormatFloat(x.Tau, 'f', 3, 64), strconv.FormatFloat(x.P, 'g', 3, 64)})
		}
		sec.blocks = append(sec.blocks, block{para: "RTT vs number of background nodes: Kendall's tau-b over every echo (positive: RTT grows with background load; p < 0.05: significant at 95 %)."},
			block{table: tt})
	}
	if len(r.RTTPairs) > 0 {
		pt := &table{id: "rtt-pairs", header: []string{"A", "B", "paired cells", "median RTT ratio B/A", "Wilcoxon W", "p"},
			right: []bool{false, false, true, true, true, true}}
		for _, x := range r.RTTPairs {
			pt.rows = append(pt.rows, []string{x.A, x.B, strconv.Itoa(x.Pairs), strconv.FormatFloat(x.Ratio, 'f', 2, 64),
				strconv.FormatFloat(x.W, 'f', 1, 64), strconv.FormatFloat(x.P, 'g', 3, 64)})
		}
		sec.blocks = append(sec.blocks, block{para: "Scenarios compared cell by cell (same background cell and rate): Wilcoxon signed-rank test of their median RTTs (p < 0.05: different at 95 %)."},
			block{table: pt})
	}
	sec.blocks = append(sec.blocks, r.hostCPUBlocks()...)
	return sec
}
