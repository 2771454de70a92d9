package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// palette is the Okabe-Ito colour-blind-safe palette; scenario i gets
// palette[i % len].
var palette = []color.NRGBA{
	{0x00, 0x72, 0xB2, 0xff}, // blue
	{0xE6, 0x9F, 0x00, 0xff}, // orange
	{0x00, 0x9E, 0x73, 0xff}, // green
	{0xCC, 0x79, 0xA7, 0xff}, // reddish purple
	{0x56, 0xB4, 0xE9, 0xff}, // sky blue
	{0xD5, 0x5E, 0x00, 0xff}, // vermillion
	{0xF0, 0xE4, 0x42, 0xff}, // yellow
	{0x00, 0x00, 0x00, 0xff}, // black
}

// tcgColour draws what ran VMs under TCG where a chart sets it apart from the rest: the
// throughput chart's bars, a study figure's series of this run under TCG. No other series
// has it (seriesPalette).
var tcgColour = palette[1]

// seriesPalette are the colours of the series a chart names by a scenario, a node, a
// platform or a base scenario: the Okabe-Ito palette without tcgColour (orange) and black
// (the published marks').
var seriesPalette = []color.NRGBA{palette[0], palette[2], palette[3], palette[4], palette[5], palette[6]}

// seriesDashes are the dash patterns of the series after the first len(seriesPalette): the
// colours repeat dashed, then dotted.
var seriesDashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}}

// seriesStyle is how a series is drawn.
type seriesStyle struct {
	colour color.NRGBA
	dashes []vg.Length
	// glyph is the shape of its points (the CDF lines have none).
	glyph draw.GlyphDrawer
}

// seriesGlyphs go with seriesDashes: a key's points keep one shape in every chart.
var seriesGlyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.PlusGlyph{}}

// seriesStyle is the style of the series called key (a scenario's name, or "node:" and a
// node's) in every chart of the report: the first key the charts ask for gets the first
// colour, the next the next; after len(seriesPalette) keys the colours repeat dashed, then
// dotted. A scenario therefore keeps its colour from chart to chart, wherever it stands in
// each (before, the colour was the series' place in the chart, so the same scenario changed
// colour between two charts).
func (r *Report) seriesStyle(key string) seriesStyle {
	if r.styles == nil {
		r.styles = map[string]int{}
	}
	i, ok := r.styles[key]
	if !ok {
		i = len(r.styles)
		r.styles[key] = i
	}
	n := len(seriesPalette)
	k := (i / n) % len(seriesDashes)
	return seriesStyle{colour: seriesPalette[i%n], dashes: seriesDashes[k], glyph: seriesGlyphs[k]}
}

// tcgLegend is the legend name of a series of scenario s (or of a base scenario whose cells
// ran VMs under TCG, tcg set): s, marked short when it ran VMs under TCG. A chart with such a
// series says what the mark means in its title (tcgTitleLine).
func tcgLegend(name string, tcg bool) string {
	if tcg {
		return name + tcgCell
	}
	return name
}

// tcgTitleLine is the line a chart's title gets when a series' legend carries the short TCG
// mark.
const tcgTitleLine = "\n(TCG): VMs under TCG, " + EmulatedMark

// tcgCaption ends the caption of a chart whose title has tcgTitleLine.
const tcgCaption = " (entries marked (TCG): VMs under TCG, " + EmulatedMark + ")"

var (
	colUser    = palette[0]
	colSystem  = palette[1]
	colSoftirq = color.NRGBA{0x99, 0x99, 0x99, 0xff}
)

// chart is one rendered chart.
type chart struct {
	name, title string
	svg         []byte // standalone SVG document
}

// chartTitle returns the title of the chart called name.
// markedTitle is chartTitle with the TCG mark on a flows chart of a scenario whose VMs ran
// under TCG (study C's Fig. 6 with --vm), and on the throughput chart when some of its bars
// are such scenarios' (drawn in another colour, the mark in the legend).
func (r *Report) markedTitle(name string) string {
	t := chartTitle(name)
	if s, ok := strings.CutPrefix(name, "flows-"); ok && r.Emulated(s) {
		t += " (" + EmulatedMark + ")"
	}
	if name == "throughput" && slices.ContainsFunc(r.Throughput, func(row ThroughputRow) bool { return r.Emulated(row.Scenario) }) {
		t += " (orange bars: VMs under TCG, " + EmulatedMark + ")"
	}
	return t
}

func chartTitle(name string) string {
	switch name {
	case "throughput":
		return "Throughput per scenario: mean of trials with 95 % CI"
	case "cpu":
		return "CPU per node: user and system time, mean over trials"
	}
	for _, m := range latencyMetrics {
		if chartName(m.key) == name {
			return m.label + ": distribution of all samples (CDF)"
		}
	}
	if s, ok := strings.CutPrefix(name, "flows-"); ok {
		return "Egress rate of each function over time, scenario " + s + " (mean over trials, 1 point per interval)"
	}
	if rest, ok := strings.CutPrefix(name, "rtt-box-"); ok {
		if f := strings.SplitN(rest, "-", 3); len(f) == 3 {
			return rttBoxTitle(f[0], f[1], f[2])
		}
	}
	if name == "ndr-path" {
		return "NDR search path: offered rate per trial (dot: no loss, cross: loss)"
	}
	if c, ok := strings.CutPrefix(name, "http-c"); ok {
		return "HTTP total time vs object size, concurrency " + c + ": mean of trials with 95 % CI"
	}
	return name
}

// charts renders every chart the report has data for, in display order.
func (r *Report) charts() ([]chart, error) {
	var out []chart
	add := func(name string, p *plot.Plot, w, h vg.Length) error {
		if p == nil {
			return nil
		}
		svg, err := renderSVG(p, w, h)
		if err != nil {
			return fmt.Errorf("render chart %s: %w", name, err)
		}
		title := r.markedTitle(name)
		if strings.Contains(p.Title.Text, tcgTitleLine) && !strings.Contains(title, EmulatedMark) {
			// The caption under the chart says what its legend's short mark means, as the
			// chart's own title does.
			title += tcgCaption
		}
		out = append(out, chart{name: name, title: title, svg: svg})
		return nil
	}
	for _, f := range r.figures() {
		fp, err := r.figurePlot(f)
		if err != nil {
			return nil, err
		}
		if err := add(f.chartName(), fp, 5.6*vg.Inch, 3.4*vg.Inch); err != nil {
			return nil, err
		}
		out[len(out)-1].title = f.Title
	}
	p, err := r.throughputPlot()
	if err != nil {
		return nil, err
	}
	if err := add("throughput", p, 7*vg.Inch, 4*vg.Inch); err != nil {
		return nil, err
	}
	for _, m := range latencyMetrics {
		p, err := r.latencyPlot(m)
		if err != nil {
			return nil, err
		}
		if err := add(chartName(m.key), p, 7*vg.Inch, 4*vg.Inch); err != nil {
			return nil, err
		}
	}
	for _, c := range r.httpConcurrencies() {
		p, err := r.httpPlot(c)
		if err != nil {
			return nil, err
		}
		if err := add(httpChartName(c), p, 7*vg.Inch, 4.5*vg.Inch); err != nil {
			return nil, err
		}
	}
	for _, s := range r.flowScenarios() {
		p, err := r.flowsPlot(s)
		if err != nil {
			return nil, err
		}
		if err := add(flowsChartName(s), p, 8*vg.Inch, 4*vg.Inch); err != nil {
			return nil, err
		}
	}
	for _, g := range r.RTTBoxes {
		p, err := r.rttBoxPlot(g)
		if err != nil {
			return nil, err
		}
		if err := add(rttBoxName(g), p, 7*vg.Inch, 4*vg.Inch); err != nil {
			return nil, err
		}
		if g.Figure == FigureApp && len(out) > 0 {
			c := &out[len(out)-1]
			c.title = strings.Replace(c.title, "Path RTT", "App RTT (incl. sender stack; a cell has no kernel timestamps)", 1)
		}
	}
	if p, err = r.ndrPlot(); err != nil {
		return nil, err
	}
	if err := add("ndr-path", p, 7*vg.Inch, 4*vg.Inch); err != nil {
		return nil, err
	}
	p, err = r.cpuPlot()
	if err != nil {
		return nil, err
	}
	if err := add("cpu", p, 8*vg.Inch, 4.5*vg.Inch); err != nil {
		return nil, err
	}
	return out, nil
}

// WriteCharts writes the report's charts into dir (created if needed) as
// standalone SVG files — throughput.svg, latency-ping-rtt.svg,
// latency-tcprtt-rtt.svg, latency-tcprtt-connect.svg, one http-cN.svg per
// HTTP concurrency N (http-c1.svg, http-c100.svg, ...), one rtt-box-KIND-HOST-RATE.svg per
// background kind, host and rate of the rtt probe, cpu.svg, for the
// data the run has — and returns their paths. It records the file names in
// r.ChartFiles, so that Markdown links them (relative to dir) afterwards.
func (r *Report) WriteCharts(dir string) ([]string, error) {
	cs, err := r.charts()
	if err != nil {
		return nil, fmt.Errorf("write charts: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("write charts: %w", err)
	}
	var paths, names []string
	for _, c := range cs {
		name := c.name + ".svg"
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, c.svg, 0o644); err != nil {
			return paths, fmt.Errorf("write charts: %w", err)
		}
		paths = append(paths, path)
		names = append(names, name)
	}
	r.ChartFiles = names
	return paths, nil
}

// renderSVG draws p on a w x h SVG canvas and returns the document. Fonts
// are not embedded; the font family gets fallbacks metric-compatible with
// Liberation Sans.
func renderSVG(p *plot.Plot, w, h vg.Length) ([]byte, error) {
	c := vgsvg.New(w, h)
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	return []byte(fontFallbacks.Replace(buf.String())), nil
}

// fontFallbacks adds metric-compatible fallbacks to the Liberation font
// families vgsvg names, for viewers that lack them.
var fontFallbacks = strings.NewReplacer(
	"font-family:Liberation Sans;", "font-family:'Liberation Sans',Arial,Helvetica,sans-serif;",
	"font-family:Liberation Serif;", "font-family:'Liberation Serif','Times New Roman',Times,serif;",
	"font-family:Liberation Mono;", "font-family:'Liberation Mono','Courier New',monospace;",
)

var (
	svgProlog  = regexp.MustCompile(`^(?s)\s*(<\?xml[^>]*\?>\s*)?(<!--.*?-->\s*)?`)
	svgSizeRE  = regexp.MustCompile(`^<svg width="[^"]*" height="[^"]*"`)
	xlinkAttr  = regexp.MustCompile(`\s*xmlns:xlink="[^"]*"`)
	svgTagOpen = []byte("<svg")
)

// inlineSVG turns a standalone SVG document into an element to inline in
// HTML: no XML prolog or comment, scalable to the page width, labelled for
// screen readers, and without the xlink namespace unless it is used.
func inlineSVG(doc []byte, title string) []byte {
	s := svgProlog.ReplaceAll(doc, nil)
	if !bytes.HasPrefix(s, svgTagOpen) {
		return s
	}
	s = svgSizeRE.ReplaceAllLiteral(s, []byte(`<svg class="chart" role="img" aria-label="`+htmlAttr(title)+`"`))
	if !bytes.Contains(s, []byte("xlink:href")) {
		s = xlinkAttr.ReplaceAll(s, nil)
	}
	return s
}

func htmlAttr(s string) string {
	return strings.NewReplacer("&", "&amp;", `"`, "&quot;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// newPlot returns a plot with the report's common style.
func newPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	for _, f := range []*font.Font{&p.Title.TextStyle.Font, &p.X.Label.TextStyle.Font, &p.Y.Label.TextStyle.Font,
		&p.X.Tick.Label.Font, &p.Y.Tick.Label.Font, &p.Legend.TextStyle.Font} {
		f.Variant = "Sans"
	}
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.X.Label.TextStyle.Font.Size = vg.Points(11)
	p.Y.Label.TextStyle.Font.Size = vg.Points(11)
	p.X.Tick.Label.Font.Size = vg.Points(10)
	p.Y.Tick.Label.Font.Size = vg.Points(10)
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	p.Y.Tick.Marker = niceTicks{}
	p.X.Tick.Marker = niceTicks{}
	return p
}

// niceTicks marks about six evenly spaced, labelled ticks at round values
// (1, 2, 2.5 or 5 times a power of ten) with unlabelled minor ticks between.
type niceTicks struct{}

// Ticks implements plot.Ticker.
func (niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(hi-lo, 0) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	raw := (hi - lo) / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	prec := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	if step/math.Pow(10, math.Floor(math.Log10(step)+1e-9)) == 2.5 {
		prec++
	}
	var ticks []plot.Tick
	first := math.Ceil(lo/step-1e-9) * step
	for i := 0; ; i++ {
		v := first + float64(i)*step
		if v > hi+step*1e-9 {
			break
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: fixed(v, prec)})
		if m := v + step/2; m < hi {
			ticks = append(ticks, plot.Tick{Value: m})
		}
	}
	if first-step/2 > lo {
		ticks = append(ticks, plot.Tick{Value: first - step/2})
	}
	return ticks
}

func gridLines() *plotter.Grid {
	g := plotter.NewGrid()
	g.Vertical.Width = 0
	g.Horizontal.Color = color.Gray{0xdd}
	g.Horizontal.Width = vg.Points(0.5)
	return g
}

// throughputPlot draws one bar per scenario (mean of trials) with the 95 %
// CI as error bars and each trial as a dot.
func (r *Report) throughputPlot() (*plot.Plot, error) {
	if len(r.Throughput) == 0 {
		return nil, nil
	}
	p := newPlot(chartTitle("throughput"), "scenario (bar: mean; whiskers: 95 % CI; dots: single trials)", "throughput (Gbit/s)")
	p.Add(gridLines())
	var (
		means  plotter.Values
		tcg    plotter.Values // the bars of scenarios whose VMs ran under TCG, drawn apart
		names  []string
		errs   plotter.XYs
		errVal plotter.YErrors
		dots   plotter.XYs
	)
	flows := map[string]bool{}
	for _, se := range r.FlowSeries {
		flows[se.Scenario] = true
	}
	var rows []ThroughputRow
	for _, row := range r.Throughput {
		// A scenario measured only by the flows probe has its own chart.
		if row.Summary.N > 0 || !flows[row.Scenario] {
			rows = append(rows, row)
		}
	}
	many := len(rows) > 10
	for i, row := range rows {
		s := row.Summary
		m := s.Mean
		name := row.Scenario
		switch {
		case s.N == 0:
			m = 0
			name += "\n(no data)"
		case many:
			// Many bars: names only (rotated below); the table has the figures.
		default:
			name += fmt.Sprintf("\n%s Gbit/s, n=%d", f2(s.Mean), s.N)
		}
		if r.Emulated(row.Scenario) {
			means, tcg = append(means, 0), append(tcg, m)
		} else {
			means, tcg = append(means, m), append(tcg, 0)
		}
		names = append(names, name)
		if s.N >= 2 && !math.IsNaN(s.CI95Half) {
			errs = append(errs, plotter.XY{X: float64(i), Y: s.Mean})
			errVal = append(errVal, struct{ Low, High float64 }{s.CI95Half, s.CI95Half})
		}
		for j, v := range row.Gbits {
			off := 0.0
			if len(row.Gbits) > 1 {
				off = -0.12 + 0.24*float64(j)/float64(len(row.Gbits)-1)
			}
			dots = append(dots, plotter.XY{X: float64(i) + off, Y: v})
		}
	}
	width := vg.Points(48)
	if many {
		width = vg.Points(14)
	}
	bars, err := plotter.NewBarChart(means, width)
	if err != nil {
		return nil, err
	}
	bars.Color = color.NRGBA{0x56, 0xB4, 0xE9, 0xff}
	bars.LineStyle.Width = 0
	p.Add(bars)
	if slices.ContainsFunc(tcg, func(v float64) bool { return v != 0 }) {
		tb, err := plotter.NewBarChart(tcg, width)
		if err != nil {
			return nil, err
		}
		tb.Color = tcgColour
		tb.LineStyle.Width = 0
		p.Add(tb)
		p.Legend.Add("VMs under TCG: "+EmulatedMark, tb)
		p.Legend.Top, p.Legend.Left = true, false
	}
	if len(errs) > 0 {
		eb := &plotter.YErrorBars{XYs: errs, YErrors: errVal, LineStyle: plotter.DefaultLineStyle, CapWidth: vg.Points(10)}
		eb.LineStyle.Width = vg.Points(1.2)
		p.Add(eb)
	}
	if len(dots) > 0 {
		sc, err := plotter.NewScatter(dots)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle.Shape = draw.CircleGlyph{}
		sc.GlyphStyle.Radius = vg.Points(2.5)
		sc.GlyphStyle.Color = color.Black
		p.Add(sc)
	}
	p.NominalX(names...)
	if many {
		p.X.Tick.Label.Rotation = math.Pi / 2
		p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	}
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4
	p.Y.Min = 0
	return p, nil
}

// cdfPoints is the most points one CDF line gets; longer samples are drawn
// at evenly spaced ranks.
const cdfPoints = 400

// latencyPlot draws the empirical CDF of all samples of metric m, one line
// per scenario.
func (r *Report) latencyPlot(m latencyMetric) (*plot.Plot, error) {
	byScenario := r.latency[m.key]
	if len(byScenario) == 0 {
		return nil, nil
	}
	unit := "RTT"
	if m.key == MetricTCPConnect {
		unit = "connect time"
	}
	p := newPlot(chartTitle(chartName(m.key)), unit+" (ms)", "fraction of samples ≤ x")
	p.Add(gridLines())
	var missing []string
	lo, hi := math.Inf(1), math.Inf(-1)
	tcg := false
	for _, s := range r.Scenarios {
		xs := slices.Clone(byScenario[s])
		if len(xs) == 0 {
			missing = append(missing, s)
			continue
		}
		slices.Sort(xs)
		lo, hi = min(lo, xs[0]), max(hi, xs[len(xs)-1])
		n := len(xs)
		var pts plotter.XYs
		pts = append(pts, plotter.XY{X: xs[0], Y: 0})
		step := max(1, n/cdfPoints)
		for k := 0; k < n; k += step {
			pts = append(pts, plotter.XY{X: xs[k], Y: float64(k+1) / float64(n)})
		}
		if pts[len(pts)-1].Y != 1 {
			pts = append(pts, plotter.XY{X: xs[n-1], Y: 1})
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		line.StepStyle = plotter.PostStep
		st := r.seriesStyle(s)
		line.Color, line.Dashes = st.colour, st.dashes
		line.Width = vg.Points(1.8)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s (n=%d)", tcgLegend(s, r.Emulated(s)), n), line)
		tcg = tcg || r.Emulated(s)
	}
	if tcg {
		p.Title.Text += tcgTitleLine
	}
	if len(missing) > 0 {
		why := "no samples"
		if m.key == MetricPingRTT {
			why = "no ICMP path"
		}
		p.Title.Text += fmt.Sprintf("\nnot shown (%s): %s", why, strings.Join(missing, ", "))
	}
	// The x axis runs on past the data so that the legend, at the bottom
	// right, sits where no line is.
	if lo > 0 && hi/lo > 20 {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.X.Label.Text += ", log scale"
		p.X.Min, p.X.Max = lo/1.1, hi*math.Pow(hi/lo, 0.5)
	} else if hi > lo {
		pad := (hi - lo) * 0.03
		p.X.Min, p.X.Max = max(0, lo-pad), hi+(hi-lo)*0.5
	} else {
		p.X.Min, p.X.Max = max(0, lo*0.9), hi*1.5
	}
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.XOffs = -vg.Points(8)
	p.Legend.YOffs = vg.Points(8)
	p.Legend.ThumbnailWidth = vg.Points(28)
	return p, nil
}

// cpuPlot draws, per scenario, one stacked bar (user below system) per node
// and one bar for the host's softirq time.
func (r *Report) cpuPlot() (*plot.Plot, error) {
	if len(r.CPU) == 0 && len(r.Softirq) == 0 {
		return nil, nil
	}
	p := newPlot(chartTitle("cpu"), "node (scenario)", "CPU (cores; 1.0 = one core busy)")
	p.Add(gridLines())
	var (
		user, system, soft plotter.Values
		names              []string
	)
	val := func(v float64) float64 {
		if math.IsNaN(v) {
			return 0
		}
		return v
	}
	for _, s := range r.Scenarios {
		for _, row := range r.CPU {
			if row.Scenario == s && (row.User.N > 0 || row.System.N > 0) {
				user = append(user, val(row.User.Mean))
				system = append(system, val(row.System.Mean))
				soft = append(soft, 0)
				names = append(names, row.Node+"\n("+s+")")
			}
		}
		for _, row := range r.Softirq {
			if row.Scenario == s {
				user = append(user, 0)
				system = append(system, 0)
				soft = append(soft, val(row.Softirq.Mean))
				names = append(names, "host softirq\n("+s+")")
			}
		}
	}
	if len(names) == 0 {
		// Only docker stats figures: they are in the table.
		return nil, nil
	}
	width := vg.Points(max(12, min(40, 420/float64(len(names)))))
	mk := func(vs plotter.Values, c color.Color) (*plotter.BarChart, error) {
		b, err := plotter.NewBarChart(vs, width)
		if err != nil {
			return nil, err
		}
		b.Color = c
		b.LineStyle.Width = 0
		return b, nil
	}
	bu, err := mk(user, colUser)
	if err != nil {
		return nil, err
	}
	bs, err := mk(system, colSystem)
	if err != nil {
		return nil, err
	}
	bs.StackOn(bu)
	bq, err := mk(soft, colSoftirq)
	if err != nil {
		return nil, err
	}
	bq.StackOn(bs)
	p.Add(bu, bs, bq)
	p.Legend.Add("user", bu)
	p.Legend.Add("system", bs)
	if len(r.Softirq) > 0 {
		p.Legend.Add("host softirq (all cores)", bq)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	p.NominalX(names...)
	if len(names) > 8 {
		p.X.Tick.Label.Font.Size = vg.Points(8)
	}
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4
	// Each bar's total above it (so that an idle node shows 0.00, not a
	// gap), and headroom above the tallest bar for the legend.
	top := 0.0
	var tops plotter.XYLabels
	for i := range user {
		t := user[i] + system[i] + soft[i]
		top = max(top, t)
		tops.XYs = append(tops.XYs, plotter.XY{X: float64(i), Y: t})
		tops.Labels = append(tops.Labels, f2(t))
	}
	lbl, err := plotter.NewLabels(tops)
	if err != nil {
		return nil, err
	}
	for i := range lbl.TextStyle {
		lbl.TextStyle[i].XAlign = draw.XCenter
		lbl.TextStyle[i].Font.Size = vg.Points(8)
		lbl.TextStyle[i].Font.Variant = "Sans"
	}
	lbl.Offset = vg.Point{Y: vg.Points(3)}
	p.Add(lbl)
	p.Y.Min = 0
	if top > 0 {
		p.Y.Max = top * 1.3
	}
	return p, nil
}

// httpPlot draws the mean total time of the HTTP runs at one concurrency
// against the object size, log-log, one line per scenario, with the 95 %
// CI as error bars.
func (r *Report) httpPlot(concurrency int) (*plot.Plot, error) {
	p := newPlot(chartTitle(httpChartName(concurrency)), "object size (bytes, log scale)", "total time (s, log scale)")
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	p.Add(gridLines())
	var (
		xticks       []plot.Tick
		unplaced     []string
		lo, hi       = math.Inf(1), math.Inf(-1)
		xlo, xhi     = math.Inf(1), math.Inf(-1)
		drawn        int
		scenarioSeen = map[string]bool{}
	)
	for _, row := range r.HTTP {
		if row.Concurrency != concurrency || row.TotalTime.N == 0 {
			continue
		}
		if row.Size <= 0 {
			if !slices.Contains(unplaced, row.Object) {
				unplaced = append(unplaced, row.Object)
			}
			continue
		}
		if !slices.ContainsFunc(xticks, func(t plot.Tick) bool { return t.Value == float64(row.Size) }) {
			xticks = append(xticks, plot.Tick{Value: float64(row.Size), Label: row.Object})
		}
		scenarioSeen[row.Scenario] = true
	}
	tcg := false
	for _, s := range r.Scenarios {
		if !scenarioSeen[s] {
			continue
		}
		var (
			pts  plotter.XYs
			errs plotter.YErrors
		)
		for _, row := range r.HTTP {
			if row.Scenario != s || row.Concurrency != concurrency || row.TotalTime.N == 0 || row.Size <= 0 {
				continue
			}
			m, ci := row.TotalTime.Mean, row.TotalTime.CI95Half
			if !(m > 0) {
				continue
			}
			if math.IsNaN(ci) {
				ci = 0
			}
			// On a log axis a whisker cannot reach 0: cut it at m/100.
			low := min(ci, m*0.99)
			pts = append(pts, plotter.XY{X: float64(row.Size), Y: m})
			errs = append(errs, struct{ Low, High float64 }{low, ci})
			lo, hi = min(lo, m-low), max(hi, m+ci)
			xlo, xhi = min(xlo, float64(row.Size)), max(xhi, float64(row.Size))
		}
		if len(pts) == 0 {
			continue
		}
		slices.SortStableFunc(pts, func(a, b plotter.XY) int { return cmpFloat(a.X, b.X) })
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		st := r.seriesStyle(s)
		col := st.colour
		line.Color, line.Dashes = col, st.dashes
		line.Width = vg.Points(1.8)
		points.Color = col
		points.Shape = st.glyph
		if r.Emulated(s) {
			points.Shape = draw.TriangleGlyph{} // the TCG mark's shape, as in the study figures
			tcg = true
		}
		points.Radius = vg.Points(3)
		eb := &plotter.YErrorBars{XYs: pts, YErrors: errs, LineStyle: plotter.DefaultLineStyle, CapWidth: vg.Points(6)}
		eb.LineStyle.Color = col
		eb.LineStyle.Width = vg.Points(1)
		p.Add(line, points, eb)
		p.Legend.Add(tcgLegend(s, r.Emulated(s)), line, points)
		drawn++
	}
	if drawn == 0 {
		return nil, nil
	}
	if tcg {
		p.Title.Text += tcgTitleLine
	}
	if len(unplaced) > 0 {
		p.Title.Text += "\nnot shown (object name is not a size): " + strings.Join(unplaced, ", ")
	}
	slices.SortFunc(xticks, func(a, b plot.Tick) int { return cmpFloat(a.Value, b.Value) })
	p.X.Tick.Marker = plot.ConstantTicks(xticks)
	p.X.Min, p.X.Max = xlo/2, xhi*2
	p.Y.Min, p.Y.Max = lo/1.5, hi*1.5
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	p.Legend.YOffs = -vg.Points(4)
	p.Legend.ThumbnailWidth = vg.Points(28)
	return p, nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// logTicks marks a log axis: labelled ticks at 1, 2 and 5 times each power
// of ten (only at powers of ten when the range spans more than three
// decades), unlabelled ones at the other integer multiples.
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi > lo) || math.IsInf(hi, 0) {
		return niceTicks{}.Ticks(lo, hi)
	}
	kmin, kmax := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	labelled := []int{1, 2, 5}
	if kmax-kmin > 3 {
		labelled = []int{1}
	}
	var ticks []plot.Tick
	for k := kmin; k <= kmax; k++ {
		pow := math.Pow(10, float64(k))
		for m := 1; m <= 9; m++ {
			v := float64(m) * pow
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if slices.Contains(labelled, m) {
				t.Label = fixed(v, max(0, -k))
			}
			ticks = append(ticks, t)
		}
	}
	if countLabels(ticks) < 2 {
		// Less than a decade: label every multiple, or fall back to linear
		// steps when even that gives fewer than two labels.
		for i := range ticks {
			ticks[i].Label = fixed(ticks[i].Value, max(0, -int(math.Floor(math.Log10(ticks[i].Value)+1e-9))))
		}
		if countLabels(ticks) < 2 {
			return niceTicks{}.Ticks(lo, hi)
		}
	}
	return ticks
}

func countLabels(ticks []plot.Tick) int {
	n := 0
	for _, t := range ticks {
		if t.Label != "" {
			n++
		}
	}
	return n
}
