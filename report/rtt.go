package report

import (
	"errors"
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
	// PathEnd says where the path was timed in this cell's runs: "tc" (the sender's interface:
	// the same points for every driver), "socket" (the socket's timestamps, which each driver
	// takes at its own point), "tc and socket" when runs differ, "" when not recorded (runs
	// before the tc stamps: the socket's). SocketTX and SocketRX are, with tc stamps, where the
	// socket's TX and RX timestamps fell against the tc points (ms, median over runs of each
	// run's median; NaN: none).
	PathEnd            string
	SocketTX, SocketRX float64
	// BgDriver is the background nodes' driver when the grid made it a factor ("same": the
	// main pair's), Bitrate the network load's per-pair cap ("max": unthrottled); "" when not
	// recorded.
	BgDriver, Bitrate string
	// Attempts is, when the probe repeated runs until every echo came back (its attempts
	// option), the runs each trial needed, in trial order; the figures above are of each
	// trial's last run only. AttemptCap is the bound asked for, Incomplete the trials whose
	// last run still lost echoes.
	Attempts               []int
	AttemptCap, Incomplete int
	// Method is how the cell's echoes were sent: "xdp-reflector" (the rtt probe's xdp method:
	// the XDP generator and reflector), "" for the socket path; Fallback why the xdp method
	// chosen by rate could not run (the socket path ran instead). Ceiling is the XDP
	// generator's mean ceiling into the chain (pps, NaN: not measured), ClampedFrom the
	// requested rate when it was above the ceiling and clamped to it.
	Method, Fallback string
	Ceiling          float64
	ClampedFrom      string
	// Clock is "guest" (GuestClock) when the cell's echoes were sent and timed in a VM guest
	// source (label clock): every timestamp the guest kernel's, its socket's software stamps;
	// "" when the host's kernel timed them.
	Clock string
}

// GuestClock is the clock of an rtt cell timed in a VM guest source: the rtt probe's clock
// label (probe/rtt.GuestClock; a test keeps them equal).
const GuestClock = "guest"

// HighRateShare is the share of the requested rate below which a high-rate cell (requested
// at echo.HighRateFrom or more) is marked short: issue 25 asks for study D's 1 Mpps cell at
// 0.95 of 1 Mpps or more.
const HighRateShare = 0.95

// highRateFrom mirrors echo.HighRateFrom (packets/s), the rate from which the probe's default
// method is its XDP generator.
const highRateFrom = 100_000

// HighRate reports whether the cell asked for a high rate (echo.HighRateFrom or more).
func (row RTTRow) HighRate() bool { return row.Requested >= highRateFrom }

// Short reports whether a high-rate cell achieved less than HighRateShare of its request.
func (row RTTRow) Short() bool { return row.HighRate() && row.Achieved < HighRateShare*row.Requested }

// RTTTrend is Kendall's tau-b between the background-node count and the round trip over the
// trials of the scenarios of one base scenario (one lab: one runtime, one driver), kind, side
// and rate (the count-0 cell included): does RTT grow with background load? Each trial gives
// one value, the median of its echoes: a trial's echoes follow each other a millisecond apart
// and share its deployment, so they are not independent replicates, and pooling them (as
// ~12,000 echoes of 12 trials) would call a trend of a few nanoseconds significant. The round
// trip is the path RTT (Figure FigurePath) unless a cell of the group has no kernel
// timestamps (FigureApp).
type RTTTrend struct {
	Base, Kind, Side, Rate string
	// BgDriver and Bitrate are the group's background driver and network cap, when recorded.
	BgDriver, Bitrate string
	Figure            string
	Counts            []int
	// N is the number of trials tested (one median each); Echoes the echoes behind them.
	N, Echoes int
	Tau, P    float64
	// Constant is set when every trial's median was the same: no trend (tau 0, p 1).
	Constant bool
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
	// SocketEnd is set when a paired cell's path was timed by the socket's stamps, not at the
	// sender's interface: each driver takes those at its own point, so the ratio may be biased.
	SocketEnd bool
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
	// trialRTT and trialPath are the echoes of each trial.
	trialRTT, trialPath map[int][]float64
	// ends counts the runs by path end; stx, srx are the runs' socket stamp offsets.
	ends           map[string]int
	sockTX, sockRX []float64
	// attempts holds each trial's "attempts" sample, attemptCap the bound.
	attempts   map[int]results.Sample
	attemptCap int
	// method, fallback and clamped are the labels of the cell's rate samples; ceiling the
	// generator_ceiling samples.
	method, fallback, clamped string
	ceiling                   []float64
	// clock is GuestClock when a sample of the cell carried it.
	clock string
}

// trialMedians returns the median of each trial's echoes in trial order, and the echoes.
func trialMedians(byTrial map[int][]float64) (meds []float64, echoes int) {
	trials := make([]int, 0, len(byTrial))
	for t := range byTrial {
		trials = append(trials, t)
	}
	slices.Sort(trials)
	for _, t := range trials {
		meds = append(meds, median(byTrial[t]))
		echoes += len(byTrial[t])
	}
	return meds, echoes
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
		if x.Labels["final"] == "false" {
			continue // an earlier attempt of a repeated run: kept in the results, not in the figures
		}
		k := rttKey{x.Scenario, x.Labels["rate"]}
		d := data[k]
		if d == nil {
			d = &rttData{reached: true, trialRTT: map[int][]float64{}, trialPath: map[int][]float64{}}
			data[k] = d
			keys = append(keys, k)
		}
		if x.Labels["clock"] == GuestClock {
			d.clock = GuestClock
		}
		switch x.Metric {
		case "rtt":
			d.rtt = append(d.rtt, x.Value)
			d.trialRTT[x.Trial] = append(d.trialRTT[x.Trial], x.Value)
		case "path":
			d.path = append(d.path, x.Value)
			d.trialPath[x.Trial] = append(d.trialPath[x.Trial], x.Value)
		case "stack_tx":
			d.stx = append(d.stx, x.Value)
		case "stack_rx":
			d.srx = append(d.srx, x.Value)
		case "rate_requested":
			d.req = append(d.req, x.Value)
		case "generator_ceiling":
			d.ceiling = append(d.ceiling, x.Value)
		case "rate_achieved":
			d.ach = append(d.ach, x.Value)
			if m := x.Labels["method"]; m != "" && m != "socket" {
				d.method = m
			}
			if f := x.Labels["fallback_reason"]; f != "" {
				d.fallback = f
			}
			if c := x.Labels["rate_clamped_from"]; c != "" {
				d.clamped = c
			}
			if x.Labels["rate_reached"] == "false" {
				d.reached = false
			}
		case "loss":
			d.loss = append(d.loss, x.Value)
		case "attempts", "attempt_cap":
			d.addAttempts(x)
		case "path_end":
			if d.ends == nil {
				d.ends = map[string]int{}
			}
			d.ends[x.Labels["end"]]++
		case "socket_tx_offset":
			d.sockTX = append(d.sockTX, x.Value)
		case "socket_rx_offset":
			d.sockRX = append(d.sockRX, x.Value)
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
			row.BgDriver, row.Bitrate = b.Labels["driver"], b.Labels["bitrate"]
		}
		d.fillAttempts(&row)
		row.Method, row.Fallback, row.ClampedFrom, row.Ceiling = d.method, d.fallback, d.clamped, math.NaN()
		if len(d.ceiling) > 0 {
			row.Ceiling = mean(d.ceiling)
		}
		row.PathEnd, row.SocketTX, row.SocketRX = d.pathEnd(), median(d.sockTX), median(d.sockRX)
		row.Clock = d.clock
		r.RTT = append(r.RTT, row)
	}
	r.rttEchoes = data
	r.buildRTTTrends(data)
	r.buildRTTPairs()
	r.buildRTTBoxes()
	r.buildRTTStudy(samples)
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
	type group struct{ base, kind, side, rate, bgDriver, bitrate string }
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
		g := group{baseOf(row.Scenario), row.Kind, row.Side, row.Rate, row.BgDriver, row.Bitrate}
		if _, ok := rows[g]; !ok {
			groups = append(groups, g)
			if z, ok := zero[[2]string{g.base, g.rate}]; ok {
				rows[g] = append(rows[g], z)
			}
		}
		rows[g] = append(rows[g], row)
	}
	for _, g := range groups {
		// A trend over an emulated CPU's scenarios and a real one's would be the emulation's.
		if mixed := slices.ContainsFunc(rows[g], func(row RTTRow) bool { return r.Incomparable(row.Scenario, rows[g][0].Scenario) }); mixed {
			r.Notes = append(r.Notes, fmt.Sprintf("No RTT trend for %s (rate %s): some of its scenarios ran VMs under TCG (%s), others did not.", g.base, g.rate, EmulatedMark))
			continue
		}
		var x, y []float64
		t := RTTTrend{Base: g.base, Kind: g.kind, Side: g.side, Rate: g.rate, BgDriver: g.bgDriver, Bitrate: g.bitrate, Figure: FigurePath}
		for _, row := range rows[g] {
			if row.Path.N == 0 {
				t.Figure = FigureApp
			}
		}
		for _, row := range rows[g] {
			t.Counts = append(t.Counts, row.Background)
			d := data[rttKey{row.Scenario, row.Rate}]
			byTrial := d.trialPath
			if t.Figure == FigureApp {
				byTrial = d.trialRTT
			}
			meds, echoes := trialMedians(byTrial)
			t.Echoes += echoes
			for _, v := range meds {
				x = append(x, float64(row.Background))
				y = append(y, v)
			}
		}
		if len(t.Counts) < 2 {
			continue
		}
		res, err := stats.KendallTauB(x, y)
		if errors.Is(err, stats.ErrConstantInput) && len(y) > 1 && slices.Min(y) == slices.Max(y) {
			// Every trial's median the same: no monotone association at all.
			res, err, t.Constant = stats.TestResult{Statistic: 0, PValue: 1}, nil, true
		}
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
	type medians struct {
		path, app float64
		socket    bool
	}
	byBase := map[string]map[cell]medians{}
	var bases []string
	for _, row := range r.RTT {
		b := baseOf(row.Scenario)
		if byBase[b] == nil {
			byBase[b] = map[cell]medians{}
			bases = append(bases, b)
		}
		byBase[b][cell{strings.TrimPrefix(row.Scenario, b), row.Rate}] = medians{row.Path.Median, row.RTT.Median, row.PathEnd != PathEndTC}
	}
	for i := 0; i < len(bases); i++ {
		for j := i + 1; j < len(bases); j++ {
			var cells []cell
			fig := FigurePath
			for c, a := range byBase[bases[i]] {
				// An emulated CPU's cell is not set against a real one's.
				if b, ok := byBase[bases[j]][c]; ok && a.app > 0 && !r.Incomparable(bases[i]+c.suffix, bases[j]+c.suffix) {
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
			socket := false
			for _, c := range cells {
				a, b := byBase[bases[i]][c], byBase[bases[j]][c]
				socket = socket || a.socket || b.socket
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
				Ratio: median(ratios), AppRatio: median(appRatios), SocketEnd: socket && fig == FigurePath})
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

// rttIntro says which figure is the headline, where it starts and ends, and why the other is
// beside it.
const rttIntro = "Headline: the path RTT, each echo's round trip outside the sender's stack: from the echo leaving the sender's interface " +
	"(its tc egress hook, in dev_queue_xmit before the qdisc) to the reply reaching the sender's interface (its tc ingress hook, in __netif_receive_skb_core), " +
	"timed by the probe's tc programs: the same two kernel points for every attachment driver. " +
	"(The socket's software timestamps are not: a veth's reply is stamped again as it enters the sender's namespace, a macvlan's and a bpf_redirect_peer'd reply keep the stamp of the host's first hop, " +
	"so a path between them ends earlier for those drivers; where they fell is in the table below when the run had both.) " +
	"Its min/median/mean/p99/max/std are over the echoes with both stamps. " +
	"Beside it, labelled, the application's RTT (send call to reply read), which adds the sender's stack both ways: stack TX (send call to the path's start) and stack RX (the path's end to the read). " +
	"Stack RX includes the wait of the probe's reader for a core, so load on the sender's host inflates the application's RTT without the path changing. " +
	"Rates are requested vs achieved; a rate not reached is marked."

// rttSection renders the rtt probe's tables.
func (r *Report) rttSection() section {
	sec := section{id: "rtt", title: "Round trips (rtt probe)", level: 2}
	sec.blocks = append(sec.blocks, block{para: rttIntro})
	sec.blocks = append(sec.blocks, r.pathEndBlocks()...)
	if s := r.networkLoadText(); s != "" {
		sec.blocks = append(sec.blocks, block{para: s})
	}
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
		t.rows = append(t.rows, []string{r.ScenarioLabel(row.Scenario), row.Rate, n, usText(row.Path.Min), usText(row.Path.Median), usText(row.Path.Mean),
			usText(row.Path.P99), usText(row.Path.Max), usText(row.Path.Stdev), ach, strconv.FormatFloat(row.Loss, 'f', 2, 64)})
		st.rows = append(st.rows, []string{r.ScenarioLabel(row.Scenario), row.Rate, usText(row.RTT.Median), usText(row.RTT.P99),
			usText(row.StackTX), usText(row.StackRX), usText(row.Path.Median)})
	}
	sec.blocks = append(sec.blocks, block{para: "Path RTT (headline) per scenario and requested rate, all trials pooled:"}, block{table: t})
	if s := r.guestClockText(); s != "" {
		sec.blocks = append(sec.blocks, block{para: s})
	}
	if unstamped > 0 {
		sec.blocks = append(sec.blocks, block{para: "n is \"K of N\" where only K of the N echoes that came back had both kernel timestamps; " +
			"the path columns are over those K, the app RTT over all N (\"—\": none had them)."})
	}
	sec.blocks = append(sec.blocks, r.highRateBlocks()...)
	sec.blocks = append(sec.blocks, block{para: "App RTT (incl. sender stack): the round trip as the application saw it, and where it goes beyond the path " +
		"(app RTT ≈ stack TX + path + stack RX, medians of each):"}, block{table: st})
	if len(r.RTTTrends) > 0 {
		tt := &table{id: "rtt-trend", header: []string{"scenario", "kind", "bg host", "rate", "figure", "counts", "trials (echoes)", "Kendall tau-b", "p"},
			right: []bool{false, false, false, false, false, false, true, true, true}}
		for _, x := range r.RTTTrends {
			var cs []string
			for _, c := range x.Counts {
				cs = append(cs, strconv.Itoa(c))
			}
			tt.rows = append(tt.rows, []string{x.Base, bgKindText(x.Kind, x.Bitrate, x.BgDriver), x.Side, x.Rate, x.Figure, strings.Join(cs, ", "), fmt.Sprintf("%d (%d)", x.N, x.Echoes),
				strconv.FormatFloat(x.Tau, 'f', 3, 64), strconv.FormatFloat(x.P, 'g', 3, 64)})
		}
		sec.blocks = append(sec.blocks, block{para: "Path RTT vs the number of background nodes on the host in column bg host (sender: the chain source's host; responder: its destination's): Kendall's tau-b over the trials, one value each: the median of the trial's echoes " +
			"(its echoes are serially correlated and share one deployment, so they are not replicates and are not pooled). Each group is one lab (one runtime, one driver). " +
			"Positive: RTT grows with background load; p < 0.05: significant at 95 %; with few trials no p can reach 0.05 (3 trials: at best 0.33), which is the honest answer. " +
			"A group with a cell without kernel timestamps is tested on the app RTT, as its figure says."},
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
	sec.blocks = append(sec.blocks, r.rttStudyBlocks()...)
	sec.blocks = append(sec.blocks, r.rttAttemptBlocks()...)
	sec.blocks = append(sec.blocks, r.hostCPUBlocks()...)
	return sec
}

// rttVerdict is the verdict's headline of an rtt run: the path RTT of every cell without
// background load, then every pair of scenarios, each with the application's RTT labelled
// beside it.
func (r *Report) rttVerdict() []string {
	var out []string
	if s := r.pathEndText(); s != "" {
		out = append(out, s)
	}
	for _, row := range r.RTT {
		if row.Background > 0 {
			continue
		}
		rate := row.Rate + " pps"
		if row.Rate == "max" {
			rate = "the highest rate"
		}
		if row.Path.N == 0 {
			out = append(out, fmt.Sprintf("%s at %s: no kernel timestamps, so no path RTT; app RTT (incl. sender stack) median %s.", r.ScenarioLabel(row.Scenario), rate, usText(row.RTT.Median)))
			continue
		}
		out = append(out, fmt.Sprintf("%s at %s: path RTT median %s, p99 %s (app RTT incl. sender stack: median %s).",
			r.ScenarioLabel(row.Scenario), rate, usText(row.Path.Median), usText(row.Path.P99), usText(row.RTT.Median)))
	}
	if s := r.guestClockBrief(); s != "" {
		out = append(out, s)
	}
	if s := r.highRateText(); s != "" {
		out = append(out, s)
	}
	if s := r.attemptsText(); s != "" {
		out = append(out, s)
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
		caveat := ""
		if x.SocketEnd {
			caveat = " Caution: some cells' path was timed by the socket's timestamps, which each driver takes at its own point, so this ratio may be biased by where the stamp lands."
		}
		out = append(out, fmt.Sprintf("%s vs %s: %s median ratio %s/%s %s over %d paired cells, Wilcoxon p = %s (%s); app RTT (incl. sender stack) ratio %s.%s",
			x.B, x.A, what, x.B, x.A, strconv.FormatFloat(x.Ratio, 'f', 2, 64), x.Pairs, strconv.FormatFloat(x.P, 'g', 3, 64), verdict,
			strconv.FormatFloat(x.AppRatio, 'f', 2, 64), caveat))
	}
	return out
}

// guestCells names the rtt cells timed in a VM guest source ("vm-src at 1000"), in table order.
func (r *Report) guestCells() []string {
	var cells []string
	for _, row := range r.RTT {
		if row.Clock == GuestClock {
			cells = append(cells, row.Scenario+" at "+row.Rate)
		}
	}
	return cells
}

// guestClockText says, under the rtt tables, which cells were timed by a VM guest's clock and
// what that changes; "" when none was.
func (r *Report) guestClockText() string {
	cells := r.guestCells()
	if len(cells) == 0 {
		return ""
	}
	return "Timed by the guest's clock (clock: guest): " + strings.Join(cells, ", ") + ". The source of these cells is a VM guest: " +
		"its echoes were sent, received and timed in the guest, every timestamp taken by the guest's clock, the path's by its kernel at the socket (software stamps: " +
		"the tc programs cannot be attached to a guest's interface from the host), so their path RTT also holds the guest's virtual NIC both ways, and under TCG the guest's clock runs on an emulated CPU. " +
		"Set them against cells timed by the host's kernel only with that in mind."
}

// guestClockBrief is the verdict's line on the cells timed by a guest's clock; "" when none was.
func (r *Report) guestClockBrief() string {
	cells := r.guestCells()
	if len(cells) == 0 {
		return ""
	}
	return "Timed by a VM guest's clock (its socket's stamps, the guest's virtual NIC inside the path): " + strings.Join(cells, ", ") + " (the rtt section says what that changes)."
}

// highRateBlocks is the table of the cells asked for at a high rate: how they were sent, the
// rate achieved against the request, the generator's ceiling and any clamp, each cell below
// HighRateShare of its request marked.
func (r *Report) highRateBlocks() []block {
	t := &table{id: "rtt-high-rate", header: []string{"scenario", "requested pps", "achieved pps", "achieved share", "method", "generator ceiling pps", "note"},
		right: []bool{false, true, true, true, false, true, false}}
	short := 0
	for _, row := range r.RTT {
		if !row.HighRate() {
			continue
		}
		method := "socket"
		if row.Method != "" {
			method = row.Method
		}
		var notes []string
		if row.Short() {
			short++
			notes = append(notes, fmt.Sprintf("BELOW %.2f of the request", HighRateShare))
		}
		if row.ClampedFrom != "" {
			notes = append(notes, "clamped from "+row.ClampedFrom+" pps to the generator's ceiling")
		}
		if row.Fallback != "" {
			notes = append(notes, "xdp could not run: "+row.Fallback)
		}
		ceil := "—"
		if !math.IsNaN(row.Ceiling) {
			ceil = strconv.FormatFloat(row.Ceiling, 'f', 0, 64)
		}
		t.rows = append(t.rows, []string{r.ScenarioLabel(row.Scenario), strconv.FormatFloat(row.Requested, 'f', 0, 64), strconv.FormatFloat(row.Achieved, 'f', 0, 64),
			strconv.FormatFloat(row.Achieved/row.Requested, 'f', 3, 64), method, ceil, strings.Join(notes, "; ")})
	}
	if len(t.rows) == 0 {
		return nil
	}
	return []block{{para: fmt.Sprintf("Cells asked for %d pps or more (mean over trials). Method xdp-reflector: 64-byte UDP frames from the XDP live-frame generator at the chain's source, "+
		"bounced by an XDP reflector at the destination, a timestamp in every n-th frame; socket: the socket path, which cannot keep such rates. "+
		"The generator's ceiling is what it offered into the chain unpaced just before the cell; a request above it is clamped to it. "+
		"A cell below %.2f of its request is marked (%d here).", highRateFrom, HighRateShare, short)}, {table: t}}
}

// highRateText is the verdict's line on the high-rate cells: how many reached HighRateShare of
// their request, and which did not.
func (r *Report) highRateText() string {
	var n int
	var short []string
	for _, row := range r.RTT {
		if !row.HighRate() {
			continue
		}
		n++
		if row.Short() {
			short = append(short, fmt.Sprintf("%s (%.0f of %.0f pps)", row.Scenario, row.Achieved, row.Requested))
		}
	}
	switch {
	case n == 0:
		return ""
	case len(short) == 0:
		return fmt.Sprintf("High-rate cells: all %d achieved at least %.2f of the requested rate.", n, HighRateShare)
	}
	return fmt.Sprintf("High-rate cells: %d of %d below %.2f of the requested rate: %s.", len(short), n, HighRateShare, strings.Join(short, ", "))
}

// highRateBrief is highRateText in one short sentence for the first screen: how many
// high-rate cells fell below HighRateShare of their request and the range they achieved;
// "" when none did.
func (r *Report) highRateBrief() string {
	n, short := 0, 0
	lo, hi, req := math.Inf(1), 0.0, 0.0
	for _, row := range r.RTT {
		if !row.HighRate() {
			continue
		}
		n++
		if row.Short() {
			short++
			lo, hi, req = math.Min(lo, row.Achieved), math.Max(hi, row.Achieved), math.Max(req, row.Requested)
		}
	}
	if short == 0 {
		return ""
	}
	return fmt.Sprintf("High-rate cells: %d of %d below %.2f of the requested rate (achieved %.0f-%.0f pps of %.0f); their figures are of the rate achieved (the rtt section's high-rate table has each cell's rate, method and the generator's ceiling).",
		short, n, HighRateShare, lo, hi, req)
}
