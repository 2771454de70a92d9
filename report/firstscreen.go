package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/sfclab/sfclab/stats"
)

// The first screen of a report answers the study: one line per published
// conclusion, the host facts the outcome depends on, and the study's own
// figures reproduced from this run beside the published values. The paired
// ratios per scenario follow the verdict as a table.

// Figure is one of a study's figures or tables the report reproduces on its
// first screen from this run, beside the published values.
type Figure struct {
	// Name names the chart (letters, digits and dashes; "study-" is put
	// before it).
	Name string
	// Title is the figure's caption, e.g. "Table I: throughput of chains C0 to C6".
	Title string
	// Metric is the report metric drawn: MetricThroughput or a latency
	// metric (per scenario), FigureHTTPChange (study B's time grid: each
	// platform's cost over its baseline per object and concurrency) or
	// FigureRTT (median RTT per driver and background count).
	Metric string
	// Scenarios are the categories in order; empty means every scenario of
	// the run with data (FigureHTTPChange, FigureRTT: all).
	Scenarios []string
	// Note is said under the chart, e.g. what the study gives in numbers.
	Note string
	// Kind, for FigureRTT, is the background kind drawn (cpu, network; the cells without
	// background load belong to every kind); empty draws every kind.
	Kind string
}

// Figure metrics beside the per-scenario Metric constants.
const (
	// FigureHTTPChange draws each platform's HTTP total-time change over
	// its baseline (%), per object and concurrency, measured and published.
	FigureHTTPChange = "http_change"
	// FigureRTT draws the median round trip of the rtt probe per driver
	// (base scenario) and background-node count.
	FigureRTT = "rtt"
	// FigureFlows puts the flows chart of each of Scenarios (egress rate of
	// every function over time) on the first screen.
	FigureFlows = "flows"
)

// publishedLabel is what every published series is called in a chart.
const publishedLabel = "published"

// figPoint is one point of a figure: category index, value and its 95 % CI
// (NaN when none).
type figPoint struct {
	cat       int
	y, lo, hi float64
}

// figSeries is one series of a study figure.
type figSeries struct {
	name      string
	published bool
	// key names the series' style (Report.seriesStyle): a published series shares its
	// measured series' key; "" is the name without the published label. tcg marks this run's
	// figures of VMs under TCG: drawn as triangles, in tcgColour when the series holds every
	// such scenario of the figure (scenarioFigure).
	key string
	tcg bool
	pts []figPoint
}

// studyFigure is a Figure with its data.
type studyFigure struct {
	Figure
	ylabel string
	cats   []string
	series []figSeries
}

// chartName is the name of the figure's chart.
func (f studyFigure) chartName() string { return "study-" + f.Name }

// figures returns the study figures of the report: Published.Figures, or
// when the study names none, one per metric of its published rows, the
// HTTP grid when it has HTTP figures, and the RTT figure when the run has
// rtt rows.
func (r *Report) figures() []studyFigure {
	c := r.Comparison
	if c == nil {
		return nil
	}
	specs := c.Figures
	if len(specs) == 0 {
		specs = r.defaultFigures()
	}
	var out []studyFigure
	for _, spec := range specs {
		var f studyFigure
		switch {
		case spec.Metric == FigureFlows:
			continue // the flows charts exist already (flowsPlot)
		case spec.Metric == FigureHTTPChange:
			f = r.httpFigure(spec)
		case spec.Metric == FigureRTT:
			f = r.rttFigure(spec)
		default:
			f = r.scenarioFigure(spec)
		}
		if !slices.ContainsFunc(f.series, func(se figSeries) bool { return !se.published }) {
			// Nothing of this run to draw (every scenario of it left out, as with
			// `reproduce single-host-chain --runtime vm`): published marks alone answer
			// nothing on the first screen, and the conclusions already say why.
			continue
		}
		if !slices.ContainsFunc(f.series, func(se figSeries) bool { return se.published }) && f.Note == "" {
			f.Note = "The study publishes no values in these units, so none are drawn beside this run's."
		}
		out = append(out, f)
	}
	return out
}

// defaultFigures are the figures of a study that names none: one per metric of its published
// rows, the HTTP grid per baseline, and the RTT figure per background kind.
func (r *Report) defaultFigures() []Figure {
	c := r.Comparison
	var specs []Figure
	var metrics []string
	for _, row := range c.Rows {
		kind, _, _ := splitMetric(row.Metric)
		if (kind == MetricThroughput || isLatency(kind)) && !slices.Contains(metrics, kind) {
			metrics = append(metrics, kind)
		}
	}
	for _, m := range metrics {
		var ss []string
		for _, row := range c.Rows {
			if row.Metric == m && !slices.Contains(ss, row.Scenario) {
				ss = append(ss, row.Scenario)
			}
		}
		specs = append(specs, Figure{Name: strings.ReplaceAll(m, "_", "-"), Metric: m, Scenarios: ss,
			Title: metricTitle(m) + " per scenario, this run beside the published figures"})
	}
	// One HTTP figure per baseline (study B: native with the cache off, and on).
	var bases []string
	isBase := httpBaselines(c.HTTP)
	for _, row := range c.HTTP {
		if !row.IsBaseline && !isBase[row.Scenario] && !math.IsNaN(row.MeasuredChange) && !slices.Contains(bases, row.Baseline) {
			bases = append(bases, row.Baseline)
		}
	}
	for _, b := range bases {
		name := "http"
		if len(bases) > 1 {
			name += "-" + b
		}
		specs = append(specs, Figure{Name: name, Metric: FigureHTTPChange, Scenarios: []string{b},
			Title: "HTTP total time over " + b + " per object and concurrency, this run beside the published grid"})
	}
	// One RTT figure per background kind.
	var kinds []string
	for _, row := range r.RTT {
		if row.Kind != "" && !slices.Contains(kinds, row.Kind) {
			kinds = append(kinds, row.Kind)
		}
	}
	if len(r.RTT) > 0 && len(kinds) == 0 {
		kinds = []string{""}
	}
	for _, k := range kinds {
		name, what := "rtt", "background nodes"
		if len(kinds) > 1 {
			name += "-" + k
		}
		if k != "" {
			what = k + " background nodes"
		}
		specs = append(specs, Figure{Name: name, Metric: FigureRTT, Kind: k,
			Title: "Median RTT per driver and number of " + what})
	}
	return specs
}

func isLatency(kind string) bool {
	return kind == MetricPingRTT || kind == MetricTCPRTT || kind == MetricTCPConnect
}

func metricTitle(m string) string {
	if m == MetricThroughput {
		return "Throughput"
	}
	return latencyLabel(m)
}

// scenarioFigure draws metric per scenario: this run's mean with its 95 % CI
// and the published value, converted to the report's unit.
func (r *Report) scenarioFigure(spec Figure) studyFigure {
	f := studyFigure{Figure: spec, ylabel: metricTitle(spec.Metric) + " (" + canonicalUnit(spec.Metric) + ")"}
	cats := spec.Scenarios
	if len(cats) == 0 {
		cats = r.Scenarios
	}
	measured := figSeries{name: "this run (mean, 95 % CI)"}
	// A scenario whose VMs ran under TCG is drawn as a series of its own, the mark in its
	// legend, and named in the caption: its point beside a published (KVM or bare-metal)
	// figure must not read as comparable.
	emulated := figSeries{name: "this run, " + EmulatedMark + " (mean, 95 % CI)", tcg: true}
	var marked []string
	pub := figSeries{name: publishedLabel, published: true}
	var notRun []string // categories with only a published mark
	for _, s := range cats {
		i := len(f.cats)
		any := false
		if sum, ok := r.scenarioSummary(spec.Metric, s); ok {
			pt := figPoint{i, sum.Mean, sum.CI95Low, sum.CI95High}
			if r.Emulated(s) {
				emulated.pts = append(emulated.pts, pt)
				marked = append(marked, s)
			} else {
				measured.pts = append(measured.pts, pt)
			}
			any = true
		}
		for _, row := range r.Comparison.Rows {
			if row.Scenario != s || row.Metric != spec.Metric || math.IsNaN(row.Published) {
				continue
			}
			if fac, ok := unitFactor(spec.Metric, row.Unit); ok {
				pub.pts = append(pub.pts, figPoint{i, row.Published * fac, math.NaN(), math.NaN()})
				any = true
			}
		}
		if any {
			f.cats = append(f.cats, s)
			if !slices.Contains(marked, s) && (len(measured.pts) == 0 || measured.pts[len(measured.pts)-1].cat != i) {
				notRun = append(notRun, s)
			}
		}
	}
	for _, se := range []figSeries{measured, emulated, pub} {
		if len(se.pts) > 0 {
			f.series = append(f.series, se)
		}
	}
	f.Title, f.Note = r.notRunCaption(f.Title, f.Note, notRun)
	if len(marked) > 0 {
		f.Title += " (" + strings.Join(marked, ", ") + ": VMs under TCG, " + EmulatedMark + ")"
	}
	return f
}

// notRunCaption adds to a figure's caption and note the scenarios it draws only the published
// marks of because this run left them out (Report.NotRun): the caption names them, the note
// says why, so an empty place reads as "not run", not as a measurement that found nothing.
// Scenarios without a recorded reason are not named.
func (r *Report) notRunCaption(title, note string, scenarios []string) (string, string) {
	var names []string
	var reasons []string
	byReason := map[string][]string{}
	for _, s := range scenarios {
		why := r.NotRun(s)
		if why == "" {
			continue
		}
		names = append(names, s)
		if byReason[why] == nil {
			reasons = append(reasons, why)
		}
		byReason[why] = append(byReason[why], s)
	}
	if len(names) == 0 {
		return title, note
	}
	title += " (not run here: " + strings.Join(names, ", ") + "; only the published marks are drawn for them)"
	for _, why := range reasons {
		if note != "" && !strings.HasSuffix(note, ".") {
			note += "."
		}
		if note != "" {
			note += " "
		}
		note += strings.Join(byReason[why], ", ") + ": " + why + "."
	}
	return title, note
}

// httpFigure draws study B's grid as each platform's change over its
// baseline per object and concurrency: the change is what both the
// published and this run's times say in the same unit, whatever the number
// of requests each ran. spec.Scenarios, when set, names the one baseline
// whose platforms the figure draws; a scenario that is itself another's
// baseline is left out (its change is the cache's, not a platform's).
func (r *Report) httpFigure(spec Figure) studyFigure {
	f := studyFigure{Figure: spec, ylabel: "total time over the baseline (%)"}
	measuredScen := map[string]bool{}
	isBase := httpBaselines(r.Comparison.HTTP)
	for _, row := range r.Comparison.HTTP {
		if !row.IsBaseline && !math.IsNaN(row.MeasuredChange) {
			measuredScen[row.Scenario] = true
		}
	}
	catOf := map[string]int{}
	bySeries := map[string]*figSeries{}
	var order []string
	for _, row := range r.Comparison.HTTP {
		if row.IsBaseline || !measuredScen[row.Scenario] || isBase[row.Scenario] ||
			(len(spec.Scenarios) > 0 && row.Baseline != spec.Scenarios[0]) {
			continue
		}
		cell := fmt.Sprintf("%s\nc%d", row.Object, row.Concurrency)
		if _, ok := catOf[cell]; !ok {
			catOf[cell] = len(f.cats)
			f.cats = append(f.cats, cell)
		}
		platform := trimSharedSuffix(row.Scenario, row.Baseline)
		for _, pub := range []bool{false, true} {
			v := row.MeasuredChange
			name := platform
			tcg := false
			if pub {
				v, name = row.PublishedChange, platform+" "+publishedLabel
			} else if r.Emulated(row.Scenario) {
				name += " (" + EmulatedMark + ")"
				tcg = true
			}
			if math.IsNaN(v) {
				continue
			}
			se := bySeries[name]
			if se == nil {
				// The platform's measured and published series share its style.
				se = &figSeries{name: name, published: pub, key: "platform:" + platform, tcg: tcg}
				bySeries[name] = se
				order = append(order, name)
			}
			se.pts = append(se.pts, figPoint{catOf[cell], v, math.NaN(), math.NaN()})
		}
	}
	for _, n := range order {
		f.series = append(f.series, *bySeries[n])
	}
	return f
}

// httpBaselines names the scenarios that are another's baseline in the published HTTP grid,
// whether or not this run measured them: a baseline's own change (native-cache over
// native-nocache) is the cache's, not a platform's, so no figure draws it as one. (A run whose
// only platform changes are not comparable, TCG against a real CPU, therefore draws no HTTP
// figure, rather than the cache's effect under a platform's name.)
func httpBaselines(rows []HTTPComparisonRow) map[string]bool {
	isBase := map[string]bool{}
	for _, row := range rows {
		if !row.IsBaseline && row.Baseline != "" {
			isBase[row.Baseline] = true
		}
	}
	return isBase
}

// trimSharedSuffix drops from s the dash-separated suffix it shares with base
// (docker-nat-cache and native-cache: docker-nat).
func trimSharedSuffix(s, base string) string {
	i := strings.LastIndex(base, "-")
	if i < 0 {
		return s
	}
	if t, ok := strings.CutSuffix(s, base[i:]); ok && t != "" {
		return t
	}
	return s
}

// rttFigure draws the median RTT of every driver (base scenario) against
// the background-node count, for one background kind (spec.Kind; the cells
// without background load belong to every kind) at the lowest rate the run
// paced its echoes at: the path RTT where the cell has kernel timestamps,
// else the application's. With cells on both hosts' sides, each side is its
// own series.
func (r *Report) rttFigure(spec Figure) studyFigure {
	f := studyFigure{Figure: spec, ylabel: "median RTT (ms)"}
	var rows []RTTRow
	rate := ""
	for _, row := range r.RTT {
		if spec.Kind != "" && row.Kind != "" && row.Kind != spec.Kind {
			continue
		}
		rows = append(rows, row)
		if rate == "" || rateOrder(row.Rate) < rateOrder(rate) {
			rate = row.Rate
		}
	}
	sides := map[string]bool{}
	var counts []int
	for _, row := range rows {
		if row.Rate != rate {
			continue
		}
		if row.Side != "" {
			sides[row.Side] = true
		}
		if !slices.Contains(counts, max(row.Background, 0)) {
			counts = append(counts, max(row.Background, 0))
		}
	}
	slices.Sort(counts)
	for _, c := range counts {
		f.cats = append(f.cats, strconv.Itoa(c))
	}
	if rate != "" {
		f.Title += ", echoes at " + rateWords(rate)
	}
	bySeries := map[string]*figSeries{}
	var order []string
	for _, row := range rows {
		if row.Rate != rate {
			continue
		}
		base := baseOf(row.Scenario)
		name := base
		if len(sides) > 1 && row.Side != "" {
			name += " (" + row.Side + "'s host)"
		}
		tcg := r.Emulated(row.Scenario)
		y := row.Path.Median
		if row.Path.N == 0 {
			y = row.RTT.Median
		}
		if math.IsNaN(y) {
			continue
		}
		se := bySeries[name]
		if se == nil {
			// A base keeps its style in the RTT box charts too (one side's series when
			// there are two).
			key := base
			if len(sides) > 1 && row.Side != "" && row.Side != "sender" {
				key = name
			}
			se = &figSeries{name: name, key: key}
			bySeries[name] = se
			order = append(order, name)
		}
		se.tcg = se.tcg || tcg
		se.pts = append(se.pts, figPoint{slices.Index(counts, max(row.Background, 0)), y, math.NaN(), math.NaN()})
	}
	tcg := false
	for _, n := range order {
		se := *bySeries[n]
		if se.tcg {
			se.name += tcgCell
			tcg = true
		}
		f.series = append(f.series, se)
	}
	if tcg {
		f.Title += " ((TCG): VMs under TCG, " + EmulatedMark + ")"
	}
	return f
}

// conclusionsSection opens a study's report: the study's conclusions, one
// line each, the host facts read when the run started, and the study's
// figures beside the published ones. ok is false for a run that reproduces
// no study.
func (r *Report) conclusionsSection() (section, bool) {
	c := r.Comparison
	if c == nil || (len(c.Claims) == 0 && len(r.figures()) == 0 && len(c.Figures) == 0) {
		return section{}, false
	}
	sec := section{id: "conclusions", title: "The study's conclusions in this run", level: 2}
	if len(c.Claims) > 0 {
		t := &table{id: "conclusions-table", header: []string{"published conclusion", "in this run", "figure, 95 % CI and the rule that decided"},
			right: []bool{false, false, false}}
		t.detailLabel = "Rule"
		for _, claim := range c.Claims {
			res := claim.Check(r)
			t.rows = append(t.rows, []string{claim.Text, res.Outcome, res.Evidence})
			t.details = append(t.details, claim.Rule)
		}
		sec.blocks = append(sec.blocks, block{table: t})
	}
	// A high-rate cell that did not reach its rate is said before any figure built on it.
	if s := r.highRateBrief(); s != "" {
		sec.blocks = append(sec.blocks, block{para: s})
	}
	if h := r.hostFacts(); h != "" {
		sec.blocks = append(sec.blocks, block{para: h})
	}
	// The charts side by side, then what each says beside them.
	var notes []string
	for _, f := range r.figures() {
		sec.blocks = append(sec.blocks, block{chart: f.chartName()})
		if f.Note != "" {
			notes = append(notes, f.Title+": "+f.Note)
		}
	}
	for _, spec := range c.Figures {
		if spec.Metric != FigureFlows {
			continue
		}
		for _, s := range spec.Scenarios {
			if slices.Contains(r.flowScenarios(), s) {
				sec.blocks = append(sec.blocks, block{chart: flowsChartName(s)})
				if spec.Note != "" {
					notes = append(notes, r.markedTitle(flowsChartName(s))+": "+spec.Note)
				}
			}
		}
	}
	if len(notes) > 0 {
		sec.blocks = append(sec.blocks, block{list: notes})
	}
	return sec, true
}

// hostEnv lists the environment keys the first screen states, with their
// words; they are read from the host when the run starts (bench.Environment).
var hostEnv = []struct{ key, words string }{
	{"docker", "Docker Engine"},
	{"docker_storage_driver", "storage driver"},
	{"cgroup", "cgroup"},
	{"sriov", "SR-IOV"},
	{"kvm", "KVM"},
	{"irq_time_accounting", "IRQ time accounting"},
}

// hostFacts is one sentence of the host facts the run recorded, "" when it
// recorded none of them.
func (r *Report) hostFacts() string {
	var parts []string
	for _, k := range hostEnv {
		if v := r.Run.Env[k.key]; v != "" {
			parts = append(parts, k.words+": "+v)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "This host, as recorded when the run started: " + strings.Join(parts, "; ") + "."
}

// ratioSection is the table of the paired ratios of every scenario against
// its baseline: throughput, then TCP and ICMP round trips.
func (r *Report) ratioSection() (section, bool) {
	t := &table{id: "ratios-table",
		header: []string{"scenario", "metric", "baseline", "ratio", "95 % CI", "pairs", "Wilcoxon p", "repetitions left out"},
		right:  []bool{false, false, false, true, true, true, true, false}}
	add := func(s, metric string, q Ratio) {
		ci, p := dash, dash
		if !math.IsNaN(q.Low) {
			ci = ciRange(q.Low, q.High, 2)
		}
		if !math.IsNaN(q.P) {
			p = pvalue(q.P)
		}
		// Two TCG scenarios may be compared (Incomparable); the ratio is still an emulated
		// CPU's figure and carries the mark.
		t.rows = append(t.rows, []string{r.ScenarioLabel(s), metric, q.Baseline, fixed(q.Value, 2) + "×", ci, strconv.Itoa(q.Pairs), p, orDash(strings.Join(q.Left, ", "))})
	}
	for _, s := range r.Scenarios {
		if s == r.Baseline {
			continue
		}
		if q, ok := r.ThroughputRatio(s); ok {
			add(s, "throughput", q)
		}
		if q, ok := r.TCGThroughputRatio(s); ok { // both TCG: the baseline is labelled so too
			q.Baseline = r.ScenarioLabel(q.Baseline)
			add(s, "throughput", q)
		}
	}
	for _, m := range []string{MetricTCPRTT, MetricPingRTT} {
		for _, s := range r.Scenarios {
			if s == r.Baseline {
				continue
			}
			if q, ok := r.LatencyRatio(m, s); ok {
				add(s, latencyLabel(m), q)
			}
			if q, ok := r.TCGLatencyRatio(m, s); ok {
				q.Baseline = r.ScenarioLabel(q.Baseline)
				add(s, latencyLabel(m), q)
			}
		}
	}
	if len(t.rows) == 0 {
		return section{}, false
	}
	sec := section{id: "ratios", title: "Paired ratios per scenario", level: 3}
	sec.blocks = append(sec.blocks, block{table: t}, block{para: "ratio: the geometric mean of the per-repetition ratios of a scenario's figure over its baseline's " +
		"(trials of one repetition run one after another, so the pairs share the machine's state); 95 % CI: exp of the Student t CI of the log ratios; " +
		"Wilcoxon p: two-sided signed-rank test of the pairs (— when it cannot be run); repetitions left out: those whose trial of the scenario or of its baseline failed or measured nothing, and why."})
	return sec, true
}

// scenarioSummary is this run's summary of metric for scenario s: the
// per-trial throughput, or the per-trial means of a latency metric.
func (r *Report) scenarioSummary(metric, s string) (stats.Summary, bool) {
	if metric == MetricThroughput {
		for _, row := range r.Throughput {
			if row.Scenario == s && row.Summary.N > 0 {
				return row.Summary, true
			}
		}
		return stats.Summary{}, false
	}
	for _, row := range r.Latency {
		if row.Scenario == s && row.Metric == metric && row.Missing == "" && row.TrialMeans.N > 0 {
			return row.TrialMeans, true
		}
	}
	return stats.Summary{}, false
}

// chartTitleOf is the title of the chart called name: a study figure's caption, else
// chartTitle's.
func (r *Report) chartTitleOf(name string) string {
	for _, f := range r.figures() {
		if f.chartName() == name {
			return f.Title
		}
	}
	return r.markedTitle(name)
}
