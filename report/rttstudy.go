package report

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/stats"
)

// Study D's statistics as the study computed them, beside this report's. The study compared
// technologies (SR-IOV vs the bridge) with the Wilcoxon signed-rank test on CPU and on RTT per
// server (its Table 3), and correlated technology with CPU and RTT by Kendall's tau per load
// location (its Fig. 12). Its values are single echoes (1,000 per configuration) and single
// mpstat readings, paired by position: thousands of serially correlated values per
// deployment, which make any difference "significant" (its Table 3 has p = 0.0000000
// everywhere, and its text says the differences are not meaningful). Here both are computed
// its way, labelled as such, and beside them the same question on one value per cell (the
// Wilcoxon test) or per trial (Kendall), which is what this report's own verdicts use.

// RTTStudyTest is one row of study D's Table 3: technologies A and B compared on one metric
// with the load on one server.
type RTTStudyTest struct {
	// Side is the load location (the server the background nodes load: sender or
	// responder); Metric "RTT" or "CPU"; Figure the exact figure ("path", the app RTT, or
	// the busy share of the host named Side).
	Side, Metric, Figure string
	// A and B are technologies: base scenarios (drivers), with the background nodes' driver
	// when the grid made it a factor.
	A, B string
	// StudyN pairs of single values (echo i of a cell with echo i of the same cell of the
	// other technology, per trial; for CPU trial t with trial t), pooled over the cells both
	// have: the study's way. StudyP is the Wilcoxon p over them.
	StudyN int
	StudyP float64
	// OurN cells, one value each (the cell's median RTT, or its mean CPU over trials),
	// paired cell by cell; OurP the Wilcoxon p over them.
	OurN int
	OurP float64
	// Ratio is the median over cells of B's value over A's.
	Ratio float64
}

// RTTStudyCorr is one bar of study D's Fig. 12: Kendall's tau-b between "this technology"
// (1 for the technology's cells, 0 for the others') and the metric, with the load on Side.
// Positive: the technology goes with higher values.
type RTTStudyCorr struct {
	Side, Metric, Figure, Tech string
	// The study's way: over every echo (RTT) or every reading (CPU).
	StudyN           int
	StudyTau, StudyP float64
	// Ours: over one value per trial (the median of its echoes; CPU is one reading per
	// trial already, so for CPU both ways coincide).
	OurN         int
	OurTau, OurP float64
}

// studyCell is one row's values for the study's statistics.
type studyCell struct {
	tech, key string // technology; cell key without the technology (count, kind, bitrate, rate)
	cpuKey    string // the same without the rate (CPU is sampled over every rate of a trial)
	side      string // "" for the count-0 cell (it belongs to both load locations)
	echoes    map[int][]float64
	median    float64
	figure    string
	scenario  string
}

// buildRTTStudy computes Table 3 and Fig. 12 as study D did and as this report does.
func (r *Report) buildRTTStudy(samples []results.Sample) {
	// Host busy share per scenario, host and trial: usr + sys + soft (%), as mpstat's.
	type hk struct {
		scenario, host string
		trial          int
	}
	busy := map[hk]float64{}
	for _, x := range samples {
		if isHostCPU(x) && (x.Metric == "host_usr" || x.Metric == "host_sys" || x.Metric == "host_soft") {
			busy[hk{x.Scenario, x.Labels["host"], x.Trial}] += x.Value
		}
	}
	var cells []studyCell
	techs := map[string]bool{}
	// A scenario that ran VMs under TCG is not set against one on a real CPU (Incomparable):
	// with both in the run, the study's statistics leave the emulated ones out.
	native := slices.ContainsFunc(r.RTT, func(row RTTRow) bool { return !r.Emulated(row.Scenario) })
	for _, row := range r.RTT {
		d := r.rttEchoes[rttKey{row.Scenario, row.Rate}]
		if d == nil || (native && r.Emulated(row.Scenario)) {
			continue
		}
		c := studyCell{tech: bgSeries(row), scenario: row.Scenario, echoes: d.trialPath, median: row.Path.Median, figure: FigurePath}
		if row.Path.N == 0 {
			c.echoes, c.median, c.figure = d.trialRTT, row.RTT.Median, FigureApp
		}
		cellName := strings.TrimPrefix(row.Scenario, baseOf(row.Scenario))
		if i := strings.LastIndex(cellName, "-on-"); i >= 0 && row.BgDriver != "" {
			cellName = cellName[:i]
		}
		c.cpuKey, c.key = cellName, cellName+" @"+row.Rate
		if row.Background > 0 {
			c.side = row.Side
		}
		techs[c.tech] = true
		cells = append(cells, c)
	}
	if len(techs) < 2 {
		return
	}
	var sides []string
	for _, c := range cells {
		if c.side != "" && !slices.Contains(sides, c.side) {
			sides = append(sides, c.side)
		}
	}
	slices.Sort(sides)
	if len(sides) == 0 {
		sides = []string{""}
	}
	techList := make([]string, 0, len(techs))
	for t := range techs {
		techList = append(techList, t)
	}
	slices.Sort(techList)
	for _, side := range sides {
		on := func(c studyCell) bool { return c.side == "" || c.side == side }
		// RTT and CPU values per technology and cell.
		rtt := map[string]map[string]studyCell{}
		cpu := map[string]map[string]map[int]float64{} // tech -> cpuKey -> trial -> busy
		for _, c := range cells {
			if !on(c) {
				continue
			}
			if rtt[c.tech] == nil {
				rtt[c.tech], cpu[c.tech] = map[string]studyCell{}, map[string]map[int]float64{}
			}
			rtt[c.tech][c.key] = c
			for k, v := range busy {
				if k.scenario == c.scenario && k.host == side && side != "" {
					if cpu[c.tech][c.cpuKey] == nil {
						cpu[c.tech][c.cpuKey] = map[int]float64{}
					}
					cpu[c.tech][c.cpuKey][k.trial] = v
				}
			}
		}
		for i, a := range techList {
			for _, b := range techList[i+1:] {
				r.rttStudyRTT(side, a, b, rtt[a], rtt[b])
				r.rttStudyCPU(side, a, b, cpu[a], cpu[b])
			}
		}
		r.rttStudyCorr(side, techList, rtt, cpu)
	}
}

// rttStudyRTT adds Table 3's RTT row for technologies a and b.
func (r *Report) rttStudyRTT(side, a, b string, ca, cb map[string]studyCell) {
	var keys []string
	fig := FigurePath
	for k, x := range ca {
		if y, ok := cb[k]; ok {
			keys = append(keys, k)
			if x.figure != FigurePath || y.figure != FigurePath {
				fig = FigureApp
			}
		}
	}
	if len(keys) == 0 {
		return
	}
	slices.Sort(keys)
	var sx, sy, ox, oy, ratios []float64
	for _, k := range keys {
		x, y := ca[k], cb[k]
		ex, ey := x.echoes, y.echoes
		if fig == FigureApp && x.figure == FigurePath { // compare like with like
			ex, ey = r.rttEchoes[rttKey{x.scenario, rateOfKey(k)}].trialRTT, r.rttEchoes[rttKey{y.scenario, rateOfKey(k)}].trialRTT
		}
		for t, xs := range ex {
			ys := ey[t]
			for i := 0; i < len(xs) && i < len(ys); i++ {
				sx, sy = append(sx, xs[i]), append(sy, ys[i])
			}
		}
		mx, my := medianOfTrials(ex), medianOfTrials(ey)
		ox, oy = append(ox, mx), append(oy, my)
		ratios = append(ratios, my/mx)
	}
	row := RTTStudyTest{Side: side, Metric: "RTT", Figure: fig, A: a, B: b, StudyN: len(sx), OurN: len(ox), Ratio: median(ratios),
		StudyP: math.NaN(), OurP: math.NaN()}
	if res, err := stats.WilcoxonSignedRank(sx, sy); err == nil {
		row.StudyP = res.PValue
	}
	if res, err := stats.WilcoxonSignedRank(ox, oy); err == nil {
		row.OurP = res.PValue
	}
	r.RTTStudyTests = append(r.RTTStudyTests, row)
}

// rttStudyCPU adds Table 3's CPU row for technologies a and b: the busy share of the host
// named side.
func (r *Report) rttStudyCPU(side, a, b string, ca, cb map[string]map[int]float64) {
	var keys []string
	for k := range ca {
		if _, ok := cb[k]; ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return
	}
	slices.Sort(keys)
	var sx, sy, ox, oy, ratios []float64
	for _, k := range keys {
		var tx, ty []float64
		for t, v := range ca[k] {
			if w, ok := cb[k][t]; ok {
				sx, sy = append(sx, v), append(sy, w)
			}
			tx = append(tx, v)
		}
		for _, w := range cb[k] {
			ty = append(ty, w)
		}
		ox, oy = append(ox, mean(tx)), append(oy, mean(ty))
		ratios = append(ratios, mean(ty)/mean(tx))
	}
	row := RTTStudyTest{Side: side, Metric: "CPU", Figure: "busy % of host " + side, A: a, B: b, StudyN: len(sx), OurN: len(ox), Ratio: median(ratios),
		StudyP: math.NaN(), OurP: math.NaN()}
	if res, err := stats.WilcoxonSignedRank(sx, sy); err == nil {
		row.StudyP = res.PValue
	}
	if res, err := stats.WilcoxonSignedRank(ox, oy); err == nil {
		row.OurP = res.PValue
	}
	r.RTTStudyTests = append(r.RTTStudyTests, row)
}

// rttStudyCorr adds Fig. 12's bars for one load location.
func (r *Report) rttStudyCorr(side string, techs []string, rtt map[string]map[string]studyCell, cpu map[string]map[string]map[int]float64) {
	for _, tech := range techs {
		// RTT: every echo (the study) and every trial's median (ours).
		var ind, tys []bool
		var yv, tyv []float64
		fig := FigurePath
		for _, cs := range rtt {
			for _, c := range cs {
				if c.figure != FigurePath {
					fig = FigureApp
				}
			}
		}
		for t, cs := range rtt {
			for k, c := range cs {
				echoes := c.echoes
				if fig == FigureApp && c.figure == FigurePath {
					echoes = r.rttEchoes[rttKey{c.scenario, rateOfKey(k)}].trialRTT
				}
				for _, xs := range echoes {
					for _, v := range xs {
						ind, yv = append(ind, t == tech), append(yv, v)
					}
					tys, tyv = append(tys, t == tech), append(tyv, median(xs))
				}
			}
		}
		corr := RTTStudyCorr{Side: side, Metric: "RTT", Figure: fig, Tech: tech}
		corr.StudyN, corr.StudyTau, corr.StudyP = kendallBinary(ind, yv)
		corr.OurN, corr.OurTau, corr.OurP = kendallBinary(tys, tyv)
		if corr.StudyN > 0 {
			r.RTTStudyCorrs = append(r.RTTStudyCorrs, corr)
		}
		var cind []bool
		var cv []float64
		for t, cs := range cpu {
			for _, trials := range cs {
				for _, v := range trials {
					cind, cv = append(cind, t == tech), append(cv, v)
				}
			}
		}
		c := RTTStudyCorr{Side: side, Metric: "CPU", Figure: "busy % of host " + side, Tech: tech}
		c.StudyN, c.StudyTau, c.StudyP = kendallBinary(cind, cv)
		c.OurN, c.OurTau, c.OurP = c.StudyN, c.StudyTau, c.StudyP
		if c.StudyN > 0 {
			r.RTTStudyCorrs = append(r.RTTStudyCorrs, c)
		}
	}
}

// rateOfKey is the rate of a cell key ("CELL @RATE").
func rateOfKey(k string) string {
	_, rate, _ := strings.Cut(k, " @")
	return rate
}

// medianOfTrials is the median of every echo of every trial.
func medianOfTrials(byTrial map[int][]float64) float64 {
	var all []float64
	for _, xs := range byTrial {
		all = append(all, xs...)
	}
	return median(all)
}

// kendallBinary is Kendall's tau-b between a two-valued x (true > false) and y, with the
// tie-corrected normal p-value of stats.KendallTauB, in O(n log n) (the study's way pools
// ~10^5 echoes, too many for the O(n^2) pair count). It returns n 0 when x or y is constant.
func kendallBinary(x []bool, y []float64) (n int, tau, p float64) {
	n = len(x)
	var g1, g0 []float64
	for i, v := range y {
		if math.IsNaN(v) {
			return 0, math.NaN(), math.NaN()
		}
		if x[i] {
			g1 = append(g1, v)
		} else {
			g0 = append(g0, v)
		}
	}
	if len(g1) == 0 || len(g0) == 0 || n < 3 {
		return 0, math.NaN(), math.NaN()
	}
	slices.Sort(g0)
	var cmd float64 // concordant - discordant: pairs across the groups
	for _, v := range g1 {
		below := sort.SearchFloat64s(g0, v)
		above := len(g0) - sort.Search(len(g0), func(i int) bool { return g0[i] > v })
		cmd += float64(below - above)
	}
	fn := float64(n)
	tot := fn * (fn - 1) / 2
	n1, n0 := float64(len(g1)), float64(len(g0))
	xtie := n1*(n1-1)/2 + n0*(n0-1)/2
	ys := slices.Clone(y)
	slices.Sort(ys)
	var ytie, y0, y1 float64
	for i := 0; i < len(ys); {
		j := i + 1
		for j < len(ys) && ys[j] == ys[i] {
			j++
		}
		t := float64(j - i)
		ytie += t * (t - 1) / 2
		y0 += t * (t - 1) * (t - 2)
		y1 += t * (t - 1) * (2*t + 5)
		i = j
	}
	if ytie == tot {
		return 0, math.NaN(), math.NaN()
	}
	tau = cmd / math.Sqrt(tot-xtie) / math.Sqrt(tot-ytie)
	tau = math.Min(1, math.Max(-1, tau))
	x0 := n1*(n1-1)*(n1-2) + n0*(n0-1)*(n0-2)
	x1 := n1*(n1-1)*(2*n1+5) + n0*(n0-1)*(2*n0+5)
	m := fn * (fn - 1)
	v := (m*(2*fn+5)-x1-y1)/18 + 2*xtie*ytie/m
	if n > 2 {
		v += x0 * y0 / (9 * m * (fn - 2))
	}
	z := cmd / math.Sqrt(v)
	p = math.Min(1, math.Erfc(math.Abs(z)/math.Sqrt2))
	return n, tau, p
}

// pText is a p-value for the study's tables ("—" for none).
func pText(p float64) string {
	if math.IsNaN(p) {
		return dash
	}
	return strconv.FormatFloat(p, 'g', 3, 64)
}

// rttStudyBlocks renders Table 3 and Fig. 12 as the study computed them, beside ours.
func (r *Report) rttStudyBlocks() []block {
	if len(r.RTTStudyTests) == 0 && len(r.RTTStudyCorrs) == 0 {
		return nil
	}
	var out []block
	if len(r.RTTStudyTests) > 0 {
		t := &table{id: "rtt-study-table3", header: []string{"load on", "metric", "figure", "A", "B", "median ratio B/A",
			"study's way: pairs", "Wilcoxon p", "ours: cells", "Wilcoxon p"},
			right: []bool{false, false, false, false, false, true, true, true, true, true}}
		for _, x := range r.RTTStudyTests {
			t.rows = append(t.rows, []string{orDash(x.Side), x.Metric, x.Figure, x.A, x.B, strconv.FormatFloat(x.Ratio, 'f', 2, 64),
				strconv.Itoa(x.StudyN), pText(x.StudyP), strconv.Itoa(x.OurN), pText(x.OurP)})
		}
		out = append(out, block{para: "Study D's Table 3 as the study computed it: Wilcoxon signed-rank between technologies on RTT and on CPU, per server the load was on " +
			"(CPU: the busy share, usr + sys + soft, of the emulated host of that name, as mpstat's). The study's way pairs single echoes by position (echo i of a cell with echo i of the " +
			"same cell of the other technology, per trial) and single CPU readings by trial, pooled over every cell: thousands of serially correlated values, so tiny differences " +
			"come out \"significant\" (the published table has p = 0.0000000 in every row, and the study's text calls the CPU differences not meaningful). " +
			"Ours, beside it: one value per cell (its median RTT, its mean CPU over trials), paired cell by cell, the rule of this report's own comparison of scenarios."}, block{table: t})
	}
	if len(r.RTTStudyCorrs) > 0 {
		t := &table{id: "rtt-study-fig12", header: []string{"load on", "metric", "figure", "technology", "study's way: n", "Kendall tau-b", "p", "ours: trials", "Kendall tau-b", "p"},
			right: []bool{false, false, false, false, true, true, true, true, true, true}}
		for _, x := range r.RTTStudyCorrs {
			t.rows = append(t.rows, []string{orDash(x.Side), x.Metric, x.Figure, x.Tech, strconv.Itoa(x.StudyN), strconv.FormatFloat(x.StudyTau, 'f', 3, 64), pText(x.StudyP),
				strconv.Itoa(x.OurN), strconv.FormatFloat(x.OurTau, 'f', 3, 64), pText(x.OurP)})
		}
		out = append(out, block{para: "Study D's Fig. 12 as the study computed it: Kendall's tau-b between a technology (1 for its cells, 0 for every other technology's) and RTT or CPU, " +
			"per load location; positive: the technology goes with higher values. The study's way runs over every echo; ours over one value per trial (the median of its echoes). " +
			"CPU is one reading per trial already, so both ways coincide for it."}, block{table: t})
	}
	return out
}
