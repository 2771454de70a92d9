package report

import (
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// figurePlot draws a study figure: one column per category, every series
// a set of points side by side in it; this run's points are filled (with
// their 95 % CI as whiskers), the published ones hollow rings labelled
// "published" in the legend, in the colour of the series they belong to.
// A series keeps its colour in every chart of the report (seriesStyle); this
// run's figures of VMs under TCG are triangles, and the series that holds all
// of a figure's (scenarioFigure's) is in tcgColour, as the throughput chart's
// bars are.
func (r *Report) figurePlot(f studyFigure) (*plot.Plot, error) {
	p := newPlot(wrapTitle(f.Title, 52), "", f.ylabel)
	p.Add(gridLines())
	n := len(f.series)
	lo, hi := math.Inf(1), math.Inf(-1)
	for k, se := range f.series {
		// Side by side within a category, at most 0.6 wide in all.
		off := 0.0
		if n > 1 {
			w := min(0.6, 0.15*float64(n-1))
			off = -w/2 + w*float64(k)/float64(n-1)
		}
		var pts plotter.XYs
		var errPts plotter.XYs
		var errs plotter.YErrors
		for _, pt := range se.pts {
			pts = append(pts, plotter.XY{X: float64(pt.cat) + off, Y: pt.y})
			lo, hi = math.Min(lo, pt.y), math.Max(hi, pt.y)
			if !math.IsNaN(pt.lo) && !math.IsNaN(pt.hi) {
				errPts = append(errPts, plotter.XY{X: float64(pt.cat) + off, Y: pt.y})
				errs = append(errs, struct{ Low, High float64 }{pt.y - pt.lo, pt.hi - pt.y})
				lo, hi = math.Min(lo, pt.lo), math.Max(hi, pt.hi)
			}
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, err
		}
		key := se.key
		if key == "" {
			key = strings.TrimSuffix(strings.TrimSuffix(se.name, publishedLabel), " ")
		}
		var col color.NRGBA
		switch {
		case se.published && key == "": // the published figures of the whole figure
			col = palette[7]
		case se.key == "" && se.tcg: // scenarioFigure's: this run's figures of VMs under TCG
			col = tcgColour
		case se.key == "" && !se.published: // scenarioFigure's: this run's other figures
			col = palette[0]
		default:
			col = r.seriesStyle(key).colour
		}
		sc.GlyphStyle.Color = col
		switch {
		case se.published && key == "":
			sc.GlyphStyle.Shape = draw.CrossGlyph{}
			sc.GlyphStyle.Radius = vg.Points(5.5)
		case se.published:
			sc.GlyphStyle.Shape = draw.RingGlyph{}
			sc.GlyphStyle.Radius = vg.Points(5.5)
		case se.tcg:
			sc.GlyphStyle.Shape = draw.TriangleGlyph{}
			sc.GlyphStyle.Radius = vg.Points(4)
		default:
			sc.GlyphStyle.Shape = draw.CircleGlyph{}
			sc.GlyphStyle.Radius = vg.Points(3.5)
		}
		p.Add(sc)
		if len(errPts) > 0 {
			eb := &plotter.YErrorBars{XYs: errPts, YErrors: errs, LineStyle: plotter.DefaultLineStyle, CapWidth: vg.Points(6)}
			eb.LineStyle.Color = col
			eb.LineStyle.Width = vg.Points(1.2)
			p.Add(eb)
		}
		p.Legend.Add(se.name, sc)
	}
	p.NominalX(f.cats...)
	if len(f.cats) > 10 {
		p.X.Tick.Label.Rotation = math.Pi / 2
		p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	}
	p.X.Min, p.X.Max = -0.6, float64(len(f.cats))-0.4
	if lo >= 0 {
		p.Y.Min = 0
	} else {
		p.Y.Min = lo * 1.15
	}
	// Room above the data for the legend, a line per series.
	if hi > 0 {
		p.Y.Max = hi * 1.3
	} else {
		p.Y.Max = 0
	}
	if span := p.Y.Max - p.Y.Min; span > 0 {
		p.Y.Max += span * 0.07 * float64(max(0, len(f.series)-2))
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	return p, nil
}

// wrapTitle breaks a chart title into lines of at most about width characters, at spaces.
func wrapTitle(title string, width int) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(title) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = w
			continue
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n")
}
