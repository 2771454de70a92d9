package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// doc is the rendering model shared by Markdown and HTML: sections of
// paragraphs, lists, tables and chart slots, all plain text.
type doc struct {
	title    string
	sections []section
}

type section struct {
	id, title string
	level     int // 2 or 3
	blocks    []block
}

// block is one of: a paragraph (para, strong), a bullet list, a table, or a
// chart slot (the name of a chart, rendered by HTML and linked by Markdown
// when written).
type block struct {
	para   string
	strong bool
	list   []string
	table  *table
	chart  string
}

type table struct {
	id     string
	header []string
	// right marks right-aligned (numeric) columns.
	right []bool
	rows  [][]string
	// details, when set, has one entry per row: text that belongs to the row's last cell but
	// may be folded away. Markdown appends it to the cell after detailLabel; HTML shows
	// detailLabel and unfolds the text on a click (the conclusions' rules, which would push
	// the conclusions off the first screen).
	details     []string
	detailLabel string
}

// cellWithDetail is row i's last cell with its detail appended, as Markdown shows it.
func (t *table) cellWithDetail(i int, cell string) string {
	if i >= len(t.details) || t.details[i] == "" {
		return cell
	}
	if cell != "" && !strings.HasSuffix(cell, ".") {
		cell += "."
	}
	return cell + " " + t.detailLabel + ": " + t.details[i]
}

const dash = "—"

func f2(v float64) string { return fixed(v, 2) }
func f3(v float64) string { return fixed(v, 3) }

// fixed formats v with prec decimals, "n/a" for NaN/Inf, never "-0.00".
func fixed(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if strings.Trim(s, "-0.") == "" {
		s = strings.TrimPrefix(s, "-")
	}
	return s
}

// ciRange formats a confidence interval as "[lo, hi]", "n/a" when it is
// not available.
func ciRange(lo, hi float64, prec int) string {
	if math.IsNaN(lo) || math.IsNaN(hi) {
		return "n/a"
	}
	return "[" + fixed(lo, prec) + ", " + fixed(hi, prec) + "]"
}

// pct formats a percentage with one decimal; signed adds "+" to positive
// values.
func pct(v float64, signed bool) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	s := fixed(v, 1)
	if signed && !strings.HasPrefix(s, "-") && s != "0.0" {
		s = "+" + s
	}
	return s + " %"
}

func pvalue(p float64) string {
	switch {
	case math.IsNaN(p):
		return "n/a"
	case p < 0.001:
		return "< 0.001"
	}
	return fixed(p, 3)
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return dash
	}
	return t.UTC().Format("2006-01-02 15:04:05Z07:00")
}

func duration(a, b time.Time) string {
	if a.IsZero() || b.IsZero() || b.Before(a) {
		return dash
	}
	return b.Sub(a).Round(100 * time.Millisecond).String()
}

// envOrder lists the environment keys shown first, in this order; the
// others follow sorted.
var envOrder = []string{"sfclab", "kernel", "os", "cpu", "cores", "memory"}

// chartNames are the charts, in the order they appear; latency charts are
// named "latency-" + metric.
func chartName(metric string) string { return "latency-" + strings.ReplaceAll(metric, "_", "-") }

func (r *Report) doc() doc {
	d := doc{title: "sfclab report: " + r.Run.Experiment}
	if !r.Run.Complete {
		d.title += " — " + IncompleteMark
	}
	if sec, ok := r.conclusionsSection(); ok {
		d.sections = append(d.sections, sec)
	}
	d.sections = append(d.sections, r.verdictSection())
	if sec, ok := r.ratioSection(); ok {
		d.sections = append(d.sections, sec)
	}
	d.sections = append(d.sections, r.headerSection()...)
	// Throughput, latency and CPU are left out of a run that measured none of them (study D
	// has only round trips): a section saying "no samples" reads as a measurement that failed.
	if len(r.Throughput) > 0 || r.sampled["throughput"] {
		d.sections = append(d.sections, r.throughputSection())
	}
	if len(r.Latency) > 0 || r.sampled["latency"] {
		d.sections = append(d.sections, r.latencySection())
	}
	if len(r.HTTP) > 0 {
		d.sections = append(d.sections, r.httpSection())
	}
	if len(r.RTT) > 0 {
		d.sections = append(d.sections, r.rttSection())
	}
	if len(r.NDR) > 0 {
		d.sections = append(d.sections, r.ndrSection())
	}
	if r.Modes != nil {
		d.sections = append(d.sections, r.modesSection(r.Modes))
	}
	if len(r.FlowSeries) > 0 || len(r.Flows) > 0 {
		d.sections = append(d.sections, r.flowsSection())
	}
	if len(r.Taps) > 0 {
		d.sections = append(d.sections, r.tapSection())
	}
	if len(r.CPU) > 0 || len(r.Softirq) > 0 || r.sampled["cpu"] {
		d.sections = append(d.sections, r.cpuSection())
	}
	d.sections = append(d.sections, r.unitSections("cpu")...)
	if sec, ok := r.balancerSection(); ok {
		d.sections = append(d.sections, sec)
	}
	if len(r.Deploy) > 0 {
		d.sections = append(d.sections, r.deploySection())
	}
	if r.Comparison != nil {
		d.sections = append(d.sections, r.comparisonSections()...)
	}
	if sec, ok := r.otherSection(); ok {
		d.sections = append(d.sections, sec)
	}
	d.sections = append(d.sections, r.failedSection())
	if len(r.Notes) > 0 {
		d.sections = append(d.sections, section{id: "notes", title: "Notes on the data", level: 2,
			blocks: []block{{list: r.Notes}}})
	}
	return d
}

func (r *Report) headerSection() []section {
	run := section{id: "run", title: "Run", level: 2}
	if !r.Run.Complete {
		run.blocks = append(run.blocks, block{strong: true,
			para: "Run status: " + IncompleteMark + ". The run stopped before it finished; the figures below cover only the trials that completed."})
	}
	study := r.Run.Study
	if study == "" {
		study = "none"
	}
	status := "complete"
	if !r.Run.Complete {
		status = IncompleteMark
	}
	run.blocks = append(run.blocks, block{table: &table{id: "run-table", header: []string{"item", "value"}, right: []bool{false, false},
		rows: [][]string{
			{"experiment", r.Run.Experiment},
			{"study", study},
			{"started", formatTime(r.Run.Started)},
			{"ended", formatTime(r.Run.Ended)},
			{"duration", duration(r.Run.Started, r.Run.Ended)},
			{"status", status},
			{"baseline scenario", orDash(r.Baseline)},
		}}})
	if text := r.loadText(); text != "" {
		run.blocks = append(run.blocks, block{para: text})
	}

	env := section{id: "environment", title: "Environment", level: 3}
	if len(r.Run.Env) == 0 {
		env.blocks = append(env.blocks, block{para: "No environment was recorded."})
	} else {
		t := &table{id: "env-table", header: []string{"key", "value"}, right: []bool{false, false}}
		var keys []string
		for _, k := range envOrder {
			if _, ok := r.Run.Env[k]; ok {
				keys = append(keys, k)
			}
		}
		for _, k := range sortedKeys(r.Run.Env) {
			if !slices.Contains(envOrder, k) {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			t.rows = append(t.rows, []string{k, r.Run.Env[k]})
		}
		env.blocks = append(env.blocks, block{table: t})
	}

	trials := section{id: "trials", title: "Trials", level: 3}
	t := &table{id: "trials-table", header: []string{"scenario", "trials ok", "trials failed"}, right: []bool{false, true, true}}
	if len(r.Runtimes) > 0 {
		t.header = append(t.header, "runtime")
		t.right = append(t.right, false)
	}
	for _, c := range r.Trials {
		row := []string{c.Scenario, strconv.Itoa(c.OK), strconv.Itoa(c.Failed)}
		if len(r.Runtimes) > 0 {
			row = append(row, orDash(r.Runtimes[c.Scenario]))
		}
		t.rows = append(t.rows, row)
	}
	if len(t.rows) == 0 {
		trials.blocks = append(trials.blocks, block{para: "No trial was recorded."})
	} else {
		trials.blocks = append(trials.blocks, block{table: t})
	}
	var notRun []string
	for _, k := range sortedKeys(r.Run.Env) {
		if s, ok := strings.CutPrefix(k, EnvNotRun); ok {
			notRun = append(notRun, s+": "+r.Run.Env[k])
		}
	}
	if len(notRun) > 0 {
		trials.blocks = append(trials.blocks, block{para: "Scenarios of the study left out of this run:"}, block{list: notRun})
	}
	var kept []string
	for _, k := range sortedKeys(r.Run.Env) {
		if s, ok := strings.CutPrefix(k, EnvKeptRuntime); ok {
			kept = append(kept, s+": "+r.Run.Env[k])
		}
	}
	if len(kept) > 0 {
		trials.blocks = append(trials.blocks, block{para: "Scenarios that kept the runtime they name (--runtime applies only to scenarios that name none):"}, block{list: kept})
	}
	return []section{run, env, trials}
}

// notComparable stands in a table's comparison column for a scenario on the other side of the
// TCG line from the baseline (Incomparable).
const notComparable = "not comparable (TCG)"

func orDash(s string) string {
	if s == "" {
		return dash
	}
	return s
}

// failedOnly says why a section the run measured has no figures: a section whose probes
// gave no sample at all is left out (doc), so its samples came from failed trials only.
const failedOnly = "the only ones came from failed trials, whose samples are left out (see Failed trials)."

func (r *Report) throughputSection() section {
	sec := section{id: "throughput", title: "Throughput", level: 2}
	if len(r.Throughput) == 0 {
		sec.blocks = append(sec.blocks, block{para: "No throughput samples (iperf3/throughput) from a trial that succeeded: " + failedOnly})
		return sec
	}
	t := &table{id: "throughput-table",
		header: []string{"scenario", "side", "flows", "n", "mean Gbit/s", "stdev", "95 % CI Gbit/s", "D_th vs baseline", "p (Mann-Whitney U)"},
		right:  []bool{false, false, false, true, true, true, true, true, true}}
	for _, row := range r.Throughput {
		s := row.Summary
		cells := []string{r.ScenarioLabel(row.Scenario), orDash(row.Side), orDash(row.Flows), strconv.Itoa(s.N)}
		if s.N == 0 {
			cells = append(cells, "no data", dash, dash, dash, dash)
		} else {
			d, p := pct(row.Degradation, false), pvalue(row.PValue)
			switch {
			case row.IsBaseline:
				d, p = "baseline", dash
			case r.Incomparable(row.Scenario, r.Baseline):
				d, p = notComparable, dash
			}
			cells = append(cells, f2(s.Mean), f2(s.Stdev), ciRange(s.CI95Low, s.CI95High, 2), d, p)
		}
		t.rows = append(t.rows, cells)
	}
	sec.blocks = append(sec.blocks, block{table: t})
	text := fmt.Sprintf("Per trial: the iperf3 receiver's end-of-test figure (the sender's when a trial has no receiver figure). "+
		"mean, stdev and the Student t 95 %% CI are across trials. "+
		"D_th = (T_base − T) / T_base × 100 %% against %s (positive: slower than the baseline). "+
		"p: two-sided Mann-Whitney U test of the per-trial figures against %s; n/a when the test cannot be run.",
		r.Baseline, r.Baseline)
	if n := r.baselineTrials(); n > 0 && n <= 8 {
		text += fmt.Sprintf(" With %d trials on each side the exact test cannot give p below %s.", n, fixed(2/binom(2*n, n), 3))
	}
	sec.blocks = append(sec.blocks, block{para: text}, block{chart: "throughput"})
	return sec
}

func (r *Report) baselineTrials() int {
	for _, row := range r.Throughput {
		if row.IsBaseline {
			return row.Summary.N
		}
	}
	return 0
}

func binom(n, k int) float64 {
	v := 1.0
	for i := 1; i <= k; i++ {
		v = v * float64(n-k+i) / float64(i)
	}
	return v
}

func (r *Report) latencySection() section {
	sec := section{id: "latency", title: "Latency", level: 2}
	if len(r.Latency) == 0 {
		sec.blocks = append(sec.blocks, block{para: "No latency samples (ping/rtt, tcprtt/rtt, tcprtt/connect) from a trial that succeeded: " + failedOnly})
		return sec
	}
	t := &table{id: "latency-table",
		header: []string{"scenario", "metric", "trials", "samples", "mean ms", "median ms", "p99 ms", "95 % CI ms (trial means)", "K_lat vs baseline"},
		right:  []bool{false, false, true, true, true, true, true, true, true}}
	var metrics []string
	for _, row := range r.Latency {
		if !slices.Contains(metrics, row.Metric) {
			metrics = append(metrics, row.Metric)
		}
		cells := []string{r.ScenarioLabel(row.Scenario), row.Label}
		if row.Missing != "" {
			cells = append(cells, "0", "0", row.Missing, dash, dash, dash, dash)
		} else {
			k := pct(row.Increase, true)
			switch {
			case row.IsBaseline:
				k = "baseline"
			case r.Incomparable(row.Scenario, r.Baseline):
				k = notComparable
			}
			cells = append(cells, strconv.Itoa(row.TrialMeans.N), strconv.Itoa(row.Samples.N),
				f3(row.TrialMeans.Mean), f3(row.Samples.Median), f3(row.Samples.P99),
				ciRange(row.TrialMeans.CI95Low, row.TrialMeans.CI95High, 3), k)
		}
		t.rows = append(t.rows, cells)
	}
	sec.blocks = append(sec.blocks, block{table: t}, block{para: fmt.Sprintf(
		"mean: the mean of the per-trial means, with its Student t 95 %% CI across trials; median and p99: all samples of the scenario pooled. "+
			"K_lat = (L − L_base) / L_base × 100 %% of the means against %s. "+
			"%s: the scenario's chain has a proxy on it, which ICMP cannot cross (elsewhere a ping without replies fails its trial).",
		r.Baseline, NoICMPPath)})
	for _, m := range metrics {
		sec.blocks = append(sec.blocks, block{chart: chartName(m)})
	}
	return sec
}

func (r *Report) cpuSection() section {
	sec := section{id: "cpu", title: "CPU", level: 2}
	if len(r.CPU) == 0 && len(r.Softirq) == 0 {
		sec.blocks = append(sec.blocks, block{para: "No CPU samples (cpu/cpu_user, cpu/cpu_system, cpu/softirq) from a trial that succeeded: " + failedOnly})
		return sec
	}
	t := &table{id: "cpu-table",
		header: []string{"scenario", "node", "trials", "user cores", "system cores", "total cores", "95 % CI total"},
		right:  []bool{false, false, true, true, true, true, true}}
	docker := false
	for _, row := range r.CPU {
		docker = docker || row.Docker.N > 0
	}
	if docker {
		t.header, t.right = append(t.header, "docker stats %"), append(t.right, true)
	}
	for _, s := range r.Scenarios {
		for _, row := range r.CPU {
			if row.Scenario != s {
				continue
			}
			cells := []string{r.ScenarioLabel(s), row.Node, strconv.Itoa(max(row.Total.N, row.Docker.N)),
				f2(row.User.Mean), f2(row.System.Mean), f2(row.Total.Mean), ciRange(row.Total.CI95Low, row.Total.CI95High, 2)}
			if docker {
				d := dash
				if row.Docker.N > 0 {
					d = f2(row.Docker.Mean)
				}
				cells = append(cells, d)
			}
			t.rows = append(t.rows, cells)
		}
		for _, row := range r.Softirq {
			if row.Scenario != s {
				continue
			}
			q := row.Softirq
			cells := []string{r.ScenarioLabel(s), "host softirq", strconv.Itoa(q.N),
				dash, dash, f2(q.Mean), ciRange(q.CI95Low, q.CI95High, 2)}
			if docker {
				cells = append(cells, dash)
			}
			t.rows = append(t.rows, cells)
		}
	}
	text := "cores: CPU time per second of the measured window, 1.0 = one core busy; " +
		"means over trials. A node's figures are its own cgroup's; host softirq is the kernel's softirq time over all cores of the host, " +
		"whichever node the packets belong to. The two can count the same ticks: without IRQ time accounting (CONFIG_IRQ_TIME_ACCOUNTING) " +
		"softirq work done while a node's task is on the CPU is charged to that task's cgroup too, so node figures and host softirq " +
		"must not be added, and a comparison between them is indicative only."
	if w := r.CPUWindow; w.N > 0 {
		text += fmt.Sprintf(" With iperf3 the window is the test's measured transfer, as its report dates it (counters read every 100 ms, "+
			"the readings inside the transfer used): %s s per trial (median; %s to %s).", f2(w.Median), f2(w.Min), f2(w.Max))
	}
	if docker {
		text += " docker stats %: the CPU figure docker stats computes for the node's container (100 % = one core busy), mean over trials; " +
			"— for nodes that are not containers."
	}
	sec.blocks = append(sec.blocks, block{table: t}, block{para: text})
	if len(r.CPUFindings) > 0 {
		sec.blocks = append(sec.blocks, block{para: "Where the cycles went:"}, block{list: r.CPUFindings})
	}
	sec.blocks = append(sec.blocks, block{chart: "cpu"})
	return sec
}

// formatIn formats a value of unit with the precision the unit deserves.
func formatIn(v float64, unit string) string {
	prec := 2
	switch unit {
	case "ms", "us", "µs", "s":
		prec = 3
	case "bit/s", "kbit/s":
		prec = 0
	case "Mbit/s":
		prec = 1
	}
	return fixed(v, prec) + " " + unit
}

// comparisonSections are the published-vs-measured section and, when the
// study has HTTP figures, its HTTP subsection; the published notes close
// the last of them.
func (r *Report) comparisonSections() []section {
	c := r.Comparison
	sec := section{id: "published", title: "Published vs measured", level: 2}
	intro := "Published figures are the study's own and appear only in this table; the published D_th and K_lat are computed here from the published values. " +
		"Measured figures are this run's means, converted to the published unit (100 % = one core for CPU)."
	switch {
	case len(c.Rows) == 0:
		intro = "Published figures are the study's own and appear only in the tables of this section."
	case len(c.HTTP) > 0:
		intro = strings.Replace(intro, "only in this table", "only in the tables of this section", 1)
	}
	if c.Study != "" {
		intro = "Study: " + c.Study + ". " + intro
	}
	if c.Reference != "" {
		intro += " Reference: " + c.Reference + "."
	}
	if c.Source != "" {
		intro += " Source of the published figures: " + c.Source + "."
	}
	sec.blocks = append(sec.blocks, block{para: intro})
	out := []section{sec}
	if len(c.Rows) > 0 {
		out[0].blocks = append(out[0].blocks, r.comparisonTable())
		out[0].blocks = append(out[0].blocks, r.notRunBlocks()...)
	}
	if len(c.HTTP) > 0 {
		out = append(out, r.publishedHTTPSection())
	}
	if len(c.Notes) > 0 {
		last := &out[len(out)-1]
		last.blocks = append(last.blocks, block{para: "Notes on the published figures:"}, block{list: c.Notes})
	}
	return out
}

// comparisonTable is the table of the published figures of Published.Rows.
func (r *Report) comparisonTable() block {
	c := r.Comparison
	t := &table{id: "published-table",
		header: []string{"scenario", "metric", "published", "measured (this run)", "published D_th / K_lat", "measured D_th / K_lat (this run)"},
		right:  []bool{false, false, true, true, true, true}}
	for _, row := range c.Rows {
		pub := row.PublishedText
		if pub == "" {
			pub = formatIn(row.Published, row.Unit)
		}
		meas := row.MeasuredText
		if meas == "" {
			meas = formatIn(row.Measured, row.Unit)
		}
		pc, mc := dash, dash
		switch {
		case row.Change == "":
		case row.IsBaseline:
			pc, mc = "baseline", "baseline"
		default:
			signed := row.Change == "K_lat"
			if !math.IsNaN(row.PublishedChange) {
				pc = row.Change + " " + pct(row.PublishedChange, signed)
			}
			if !math.IsNaN(row.MeasuredChange) {
				mc = row.Change + " " + pct(row.MeasuredChange, signed)
			}
			if r.Incomparable(row.Scenario, r.Baseline) && row.MeasuredText == "" {
				mc = notComparable
			}
		}
		// A figure of VMs under TCG beside a published (KVM or bare-metal) one is marked, as in
		// every other table: before, study C's --vm guests stood here unmarked.
		t.rows = append(t.rows, []string{r.ScenarioLabel(row.Scenario), row.Metric, pub, meas, pc, mc})
	}
	return block{table: t}
}

// notRunBlocks say why the comparison table's "not run" scenarios were left out of this run,
// once per scenario (nil when none was).
func (r *Report) notRunBlocks() []block {
	var items []string
	for _, row := range r.Comparison.Rows {
		if row.MeasuredText != NotRunText {
			continue
		}
		item := row.Scenario + ": " + r.NotRun(row.Scenario)
		if !slices.Contains(items, item) {
			items = append(items, item)
		}
	}
	if len(items) == 0 {
		return nil
	}
	return []block{{para: "\"" + NotRunText + "\": the scenario is not in this run, so only its published figures are shown:"}, {list: items}}
}

func (r *Report) failedSection() section {
	sec := section{id: "failed", title: "Failed trials", level: 2}
	if len(r.Failed) == 0 {
		sec.blocks = append(sec.blocks, block{para: "None: every recorded trial ended ok."})
		return sec
	}
	t := &table{id: "failed-table",
		header: []string{"scenario", "trial", "status", "started", "duration", "samples left out", "error"},
		right:  []bool{false, true, false, false, true, true, false}}
	for _, f := range r.Failed {
		t.rows = append(t.rows, []string{f.Scenario, strconv.Itoa(f.Trial), f.Status, formatTime(f.Started),
			duration(f.Started, f.Ended), strconv.Itoa(f.Excluded), orDash(f.Error)})
	}
	sec.blocks = append(sec.blocks, block{para: fmt.Sprintf("%d %s not end ok. %s samples are left out of every figure above.",
		len(r.Failed), plural(len(r.Failed), "trial did", "trials did"), plural(len(r.Failed), "Its", "Their"))}, block{table: t})
	return sec
}

// Markdown writes the report as GitHub-flavoured Markdown. It references
// nothing external; when WriteCharts has run, it links the chart files by
// their names relative to the chart directory, so write the Markdown file
// into that directory.
func (r *Report) Markdown(w io.Writer) error {
	d := r.doc()
	var b strings.Builder
	b.WriteString("# " + mdText(d.title) + "\n")
	for _, sec := range d.sections {
		b.WriteString("\n" + strings.Repeat("#", sec.level) + " " + mdText(sec.title) + "\n")
		for _, bl := range sec.blocks {
			switch {
			case bl.table != nil:
				b.WriteString("\n")
				writeMDTable(&b, bl.table)
			case bl.list != nil:
				b.WriteString("\n")
				for _, item := range bl.list {
					b.WriteString("- " + mdText(item) + "\n")
				}
			case bl.chart != "":
				file := bl.chart + ".svg"
				if slices.Contains(r.ChartFiles, file) {
					fmt.Fprintf(&b, "\n![%s](%s)\n", mdText(r.chartTitleOf(bl.chart)), file)
				}
			case bl.strong:
				b.WriteString("\n**" + mdText(bl.para) + "**\n")
			default:
				b.WriteString("\n" + mdText(bl.para) + "\n")
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("write Markdown report: %w", err)
	}
	return nil
}

func writeMDTable(b *strings.Builder, t *table) {
	b.WriteString("|")
	for _, h := range t.header {
		b.WriteString(" " + mdText(h) + " |")
	}
	b.WriteString("\n|")
	for i := range t.header {
		if t.right[i] {
			b.WriteString("---:|")
		} else {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for ri, row := range t.rows {
		b.WriteString("|")
		for i, c := range row {
			if i == len(row)-1 {
				c = t.cellWithDetail(ri, c)
			}
			b.WriteString(" " + mdText(c) + " |")
		}
		b.WriteString("\n")
	}
}

// mdText makes plain text safe in a Markdown paragraph or table cell: it
// escapes pipes, backslashes and anything that would open an HTML tag, and
// folds newlines.
func mdText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch ch {
		case '|', '\\', '`', '*':
			b.WriteByte('\\')
			b.WriteByte(ch)
		case '<':
			if i+1 < len(s) && (isLetter(s[i+1]) || strings.IndexByte("/!?", s[i+1]) >= 0) {
				b.WriteString("&lt;")
			} else {
				b.WriteByte(ch)
			}
		case '\r':
		case '\n':
			b.WriteByte(' ')
		default:
			b.WriteByte(ch)
		}
	}
	return b.String()
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// SummaryCSVHeader is the header row SummaryCSV writes.
var SummaryCSVHeader = []string{"experiment", "scenario", "metric", "node", "unit", "n",
	"mean", "stdev", "min", "median", "p99", "max", "ci95_low", "ci95_high"}

// SummaryCSV writes r.Summary as CSV with the header SummaryCSVHeader: one
// row per scenario and metric (and node for CPU), in display order. Values
// have six decimals; a value that is not available (NaN, e.g. the CI of
// fewer than two values) is an empty field. Throughput rows are per trial in
// Gbit/s; latency metrics come as the pooled samples (n = samples, no CI)
// and as "<metric>_trial_mean" (n = trials), in ms; CPU rows are per trial,
// in cores (docker_cpu_percent in %). HTTP rows are named by HTTPMetric
// (e.g. "http_total_time:1k:c100") and only written for series with data:
// per trial total time in s, requests/s and counts, the pooled request
// times in ms (no CI), ab's total time and requests/s; deploy_time rows are
// per trial, in ms.
func (r *Report) SummaryCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(SummaryCSVHeader); err != nil {
		return fmt.Errorf("write summary CSV: %w", err)
	}
	for _, row := range r.Summary {
		s := row.Summary
		rec := []string{r.Run.Experiment, row.Scenario, row.Metric, row.Node, row.Unit, strconv.Itoa(s.N)}
		for _, v := range []float64{s.Mean, s.Stdev, s.Min, s.Median, s.P99, s.Max, s.CI95Low, s.CI95High} {
			if math.IsNaN(v) || math.IsInf(v, 0) || s.N == 0 {
				rec = append(rec, "")
			} else {
				rec = append(rec, fixed(v, 6))
			}
		}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("write summary CSV: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write summary CSV: %w", err)
	}
	return nil
}
