package report

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"

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
	Counts                   []int
	Bases                    []string
	// Cells[base][i] is the scenario of base at Counts[i] ("" when the run has none).
	Cells map[string][]string
}

// rttBoxName is the chart's name: rtt-box-KIND-SIDE-RATE.
func rttBoxName(g RTTBoxGroup) string {
	return "rtt-box-" + g.Kind + "-" + g.Side + "-" + g.Rate
}

// rttBoxTitle is the chart's caption.
func rttBoxTitle(kind, side, rate string) string {
	return fmt.Sprintf("Path RTT by background nodes (%s load, on the %s's host) at %s: box quartiles, line median, whiskers p1 and p99", kind, side, rateWords(rate))
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
	type gk struct{ kind, side, rate string }
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
		k := gk{row.Kind, row.Side, row.Rate}
		g := byKey[k]
		if g == nil {
			g = &RTTBoxGroup{Kind: k.kind, Side: k.side, Rate: k.rate, Figure: FigurePath, Cells: map[string][]string{}}
			byKey[k], cells[k] = g, map[string]map[int]string{}
			keys = append(keys, k)
		}
		base := baseOf(row.Scenario)
		if cells[k][base] == nil {
			cells[k][base] = map[int]string{}
			g.Bases = append(g.Bases, base)
			if z, ok := zero[[2]string{base, row.Rate}]; ok {
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
	title := fmt.Sprintf("%s, %s load on the %s's host, at %s\nbox: quartiles; line: median; whiskers: p1 and p99", what, g.Kind, g.Side, rateWords(g.Rate))
	p := newPlot(title, "background nodes", ylabel)
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.Add(gridLines())
	width := vg.Points(min(36, 240/float64(max(1, len(g.Counts)*len(g.Bases)))))
	lo, hi := math.Inf(1), math.Inf(-1)
	for j, base := range g.Bases {
		col := palette[j%len(palette)]
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
		p.Legend.Add(base, swatch{col})
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
