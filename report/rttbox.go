package report

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// RTTBoxGroup is one box-plot chart of the rtt section (study D's figures): the round trips of
// one background kind, host and rate, by background-node count (x) and base scenario, i.e.
// driver (boxes side by side). Figure is FigurePath unless a cell has no kernel timestamps.
type RTTBoxGroup struct {
	Kind, Side, Rate, Figure string
	// Bitrate is the network load's per-pair cap when recorded ("max": unthrottled).
	Bitrate string
	Counts  []int
	Bases   []string
	// Cells[base][i] is the scenario of base at Counts[i] ("" when the run has none).
	Cells map[string][]string
}

// rttBoxName is the chart's name: rtt-box-KIND-SIDE-RATE.
func rttBoxName(g RTTBoxGroup) string {
	name := "rtt-box-" + g.Kind + "-" + g.Side + "-" + g.Rate
	if g.Bitrate != "" {
		name += "-at-" + g.Bitrate
	}
	return name
}

// bgSeries is a row's series in the box plots and the study's statistics: its base scenario,
// with the background nodes' driver when the grid made it a factor.
func bgSeries(row RTTRow) string {
	if row.BgDriver == "" {
		return baseOf(row.Scenario)
	}
	return baseOf(row.Scenario) + " (bg " + row.BgDriver + ")"
}

// bgLoadText is a background load in words: "cpu load", "network load (100M per pair)",
// "network load (unthrottled)".
func bgLoadText(kind, bitrate string) string {
	switch bitrate {
	case "":
		return kind + " load"
	case "max":
		return kind + " load (unthrottled)"
	}
	return kind + " load (" + bitrate + " per pair)"
}

// bgKindText is a background kind with its network cap and driver, when recorded.
func bgKindText(kind, bitrate, driver string) string {
	if bitrate == "max" {
		kind += " (unthrottled)"
	} else if bitrate != "" {
		kind += " (" + bitrate + "/pair)"
	}
	if driver != "" {
		kind += ", bg on " + driver
	}
	return kind
}

// rttBoxTitle is the chart's caption; rate may end in "-at-BITRATE" (see rttBoxName).
func rttBoxTitle(kind, side, rate string) string {
	rate, bitrate, _ := strings.Cut(rate, "-at-")
	return fmt.Sprintf("Path RTT by background nodes (%s, on the %s's host) at %s: box quartiles, line median, whiskers p1 and p99", bgLoadText(kind, bitrate), side, rateWords(rate))
}

// rateWords is a rate label as words: "1000 pps", "the highest rate".
func rateWords(rate string) string {
	if rate == "max" {
		return "the highest rate"
	}
	return rate + " pps"
}

// buildRTTBoxes groups the rows with background nodes by kind, host and rate; the count-0
// cell of each base joins every group at its rate.
func (r *Report) buildRTTBoxes() {
	type gk struct{ kind, side, rate, bitrate string }
	zero := map[[2]string]string{} // base, rate -> the count-0 scenario
	for _, row := range r.RTT {
		if row.Background == 0 {
			zero[[2]string{baseOf(row.Scenario), row.Rate}] = row.Scenario
		}
	}
	byKey := map[gk]*RTTBoxGroup{}
	var keys []gk
	cells := map[gk]map[string]map[int]string{} // group -> base -> count -> scenario
	for _, row := range r.RTT {
		if row.Background <= 0 {
			continue
		}
		k := gk{row.Kind, row.Side, row.Rate, row.Bitrate}
		g := byKey[k]
		if g == nil {
			g = &RTTBoxGroup{Kind: k.kind, Side: k.side, Rate: k.rate, Bitrate: k.bitrate, Figure: FigurePath, Cells: map[string][]string{}}
			byKey[k], cells[k] = g, map[string]map[int]string{}
			keys = append(keys, k)
		}
		base := bgSeries(row)
		if cells[k][base] == nil {
			cells[k][base] = map[int]string{}
			g.Bases = append(g.Bases, base)
			if z, ok := zero[[2]string{baseOf(row.Scenario), row.Rate}]; ok {
				cells[k][base][0] = z
			}
		}
		cells[k][base][row.Background] = row.Scenario
	}
	for _, k := range keys {
		g := byKey[k]
		for _, byCount := range cells[k] {
			for c := range byCount {
				if !slices.Contains(g.Counts, c) {
					g.Counts = append(g.Counts, c)
				}
			}
		}
		slices.Sort(g.Counts)
		for _, base := range g.Bases {
			for _, c := range g.Counts {
				sc := cells[k][base][c]
				g.Cells[base] = append(g.Cells[base], sc)
				if d := r.rttEchoes[rttKey{sc, k.rate}]; sc != "" && (d == nil || len(d.path) == 0) {
					g.Figure = FigureApp
				}
			}
		}
		r.RTTBoxes = append(r.RTTBoxes, *g)
	}
}

// swatch is a legend thumbnail: a filled square of its colour.
type swatch struct{ c color.Color }

// Thumbnail implements plot.Thumbnailer.
func (s swatch) Thumbnail(c *draw.Canvas) {
	side := min(c.Max.X-c.Min.X, c.Max.Y-c.Min.Y)
	x0 := c.Min.X + (c.Max.X-c.Min.X-side)/2
	c.FillPolygon(s.c, []vg.Point{{X: x0, Y: c.Min.Y}, {X: x0 + side, Y: c.Min.Y}, {X: x0 + side, Y: c.Min.Y + side}, {X: x0, Y: c.Min.Y + side}})
}

// percentile is the p-quantile (0-1) of sorted xs by linear interpolation.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	pos := p * float64(len(sorted)-1)
	i := int(pos)
	if i+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[i] + (pos-float64(i))*(sorted[i+1]-sorted[i])
}

// rttBoxPlot draws one group: per count, one box per base scenario, in µs.
func (r *Report) rttBoxPlot(g RTTBoxGroup) (*plot.Plot, error) {
	what, ylabel := "Path RTT", "path RTT (µs)"
	if g.Figure == FigureApp {
		what, ylabel = "App RTT (incl. sender stack; a cell has no kernel timestamps)", "app RTT incl. sender stack (µs)"
	}
	title := fmt.Sprintf("%s, %s on the %s's host, at %s\nbox: quartiles; line: median; whiskers: p1 and p99", what, bgLoadText(g.Kind, g.Bitrate), g.Side, rateWords(g.Rate))
	p := newPlot(title, "background nodes", ylabel)
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.Add(gridLines())
	width := vg.Points(min(36, 240/float64(max(1, len(g.Counts)*len(g.Bases)))))
	lo, hi := math.Inf(1), math.Inf(-1)
	anyTCG := false
	for j, base := range g.Bases {
		// A base keeps its colour in every chart of the report (rttFigure's series too).
		col := r.seriesStyle(base).colour
		tcg := slices.ContainsFunc(g.Cells[base], r.Emulated)
		anyTCG = anyTCG || tcg
		for i, sc := range g.Cells[base] {
			if sc == "" {
				continue
			}
			d := r.rttEchoes[rttKey{sc, g.Rate}]
			if d == nil {
				continue
			}
			xs := d.path
			if g.Figure == FigureApp {
				xs = d.rtt
			}
			if len(xs) == 0 {
				continue
			}
			us := make(plotter.Values, len(xs))
			for k, v := range xs {
				us[k] = v * 1000
			}
			b, err := plotter.NewBoxPlot(width, float64(i), us)
			if err != nil {
				return nil, fmt.Errorf("box plot of %s: %w", sc, err)
			}
			sorted := slices.Clone([]float64(us))
			slices.Sort(sorted)
			b.AdjLow, b.AdjHigh = percentile(sorted, 0.01), percentile(sorted, 0.99)
			b.Min, b.Max, b.Outside = b.AdjLow, b.AdjHigh, nil
			lo, hi = min(lo, b.AdjLow), max(hi, b.AdjHigh)
			b.Offset = (vg.Length(j) - vg.Length(len(g.Bases)-1)/2) * (width + vg.Points(2))
			b.FillColor = color.NRGBA{col.R, col.G, col.B, 0x55}
			b.BoxStyle.Color, b.MedianStyle.Color, b.WhiskerStyle.Color = col, col, col
			b.MedianStyle.Width = vg.Points(2)
			p.Add(b)
		}
		p.Legend.Add(tcgLegend(base, tcg), swatch{col})
	}
	if anyTCG {
		p.Title.Text += tcgTitleLine
	}
	var ticks []plot.Tick
	for i, c := range g.Counts {
		ticks = append(ticks, plot.Tick{Value: float64(i), Label: strconv.Itoa(c)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = -0.6, float64(len(g.Counts))-0.4
	if lo > 0 && hi/lo > 20 {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Label.Text += ", log scale"
		p.Y.Min, p.Y.Max = lo/1.2, hi*2 // room for the legend above the boxes
	} else if hi > lo {
		p.Y.Min, p.Y.Max = max(0, lo-(hi-lo)*0.1), hi+(hi-lo)*0.3
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.ThumbnailWidth = vg.Points(10)
	return p, nil
}

// networkLoadText says how the network background load of this run was throttled: capped per
// pair, unthrottled (study D's "highest bandwidth"), or not recorded ("" without network load).
func (r *Report) networkLoadText() string {
	var caps []string
	unknown := false
	for _, row := range r.RTT {
		if row.Kind != "network" || row.Background <= 0 {
			continue
		}
		switch {
		case row.Bitrate == "":
			unknown = true
		case !slices.Contains(caps, row.Bitrate):
			caps = append(caps, row.Bitrate)
		}
	}
	if len(caps) == 0 && !unknown {
		return ""
	}
	var parts []string
	for _, c := range caps {
		if c == "max" {
			parts = append(parts, "unthrottled (bitrate max: iperf3 -u -b 0 per pair, as fast as each pair can send: study D's \"highest bandwidth occupation\")")
		} else {
			parts = append(parts, "capped at "+c+"bit/s per pair (iperf3 -u -b "+c+")")
		}
	}
	if unknown {
		parts = append(parts, "of a cap not recorded in this run (recorded since the bitrate label; the default was 100M)")
	}
	return "Network background load in this run: " + strings.Join(parts, "; ") + ". Cells are named -at-BITRATE when the run has more than one."
}
