package report

import (
	"fmt"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/sfclab/sfclab/results"
)

// ndrProbe is the name of the no-drop-rate search probe in samples.
const ndrProbe = "ndr"

// NDRRow is one no-drop-rate search: a scenario, frame size and trial.
type NDRRow struct {
	Scenario string
	Frame    string
	Trial    int
	// NDR and PDR are in packets per second and bits per second of frames; 0 when Limited.
	NDR, NDRBits, PDR, PDRBits float64
	PDRLoss                    string
	Trials                     int
	Converged                  bool
	// Limited says the generator could not offer more than the chain took (Reason
	// "generator"), or the chain slowed it down without loss ("back-pressure"): no NDR.
	Limited bool
	Reason  string
	// GeneratorMax is the most the generator offered into the chain; Calibrated the most it
	// sent with no chain in the way.
	GeneratorMax, Calibrated float64
	Path                     []NDRStep
}

// NDRStep is one trial of a search.
type NDRStep struct {
	Iteration int
	Offered   float64
	Loss      float64
	PassNDR   bool
}

type ndrKey struct {
	scenario, frame string
	trial           int
}

// buildNDR gathers the searches from the samples of trials that did not fail.
func (r *Report) buildNDR(samples []results.Sample, failed map[trialKey]*FailedTrial) {
	rows := map[ndrKey]*NDRRow{}
	var keys []ndrKey
	row := func(x results.Sample) *NDRRow {
		k := ndrKey{x.Scenario, x.Labels["frame"], x.Trial}
		if rows[k] == nil {
			rows[k] = &NDRRow{Scenario: k.scenario, Frame: k.frame, Trial: k.trial}
			keys = append(keys, k)
		}
		return rows[k]
	}
	steps := map[ndrKey]map[int]*NDRStep{}
	for _, x := range samples {
		if x.Probe != ndrProbe || failed[trialKey{x.Scenario, x.Trial}] != nil {
			continue
		}
		n := row(x)
		switch x.Metric {
		case "ndr_pps", "pdr_pps", "ndr_bps", "pdr_bps":
			switch x.Metric {
			case "ndr_pps":
				n.NDR = x.Value
			case "pdr_pps":
				n.PDR = x.Value
			case "ndr_bps":
				n.NDRBits = x.Value
			case "pdr_bps":
				n.PDRBits = x.Value
			}
			n.Trials, _ = strconv.Atoi(x.Labels["trials"])
			n.Converged = x.Labels["ndr_converged"] == "true" && x.Labels["pdr_converged"] == "true"
			n.PDRLoss = x.Labels["pdr_loss"]
		case "generator_max_pps":
			n.GeneratorMax = x.Value
			n.Limited, n.Reason = x.Labels["limited"] == "true", x.Labels["reason"]
			n.Trials, _ = strconv.Atoi(x.Labels["trials"])
		case "generator_calibrated_pps":
			n.Calibrated = x.Value
		case "trial_offered_pps", "trial_loss":
			k := ndrKey{x.Scenario, x.Labels["frame"], x.Trial}
			it, _ := strconv.Atoi(x.Labels["iteration"])
			if steps[k] == nil {
				steps[k] = map[int]*NDRStep{}
			}
			st := steps[k][it]
			if st == nil {
				st = &NDRStep{Iteration: it, PassNDR: x.Labels["pass_ndr"] == "true"}
				steps[k][it] = st
			}
			if x.Metric == "trial_offered_pps" {
				st.Offered = x.Value
			} else {
				st.Loss = x.Value
			}
		}
	}
	for _, k := range keys {
		n := rows[k]
		for _, st := range steps[k] {
			n.Path = append(n.Path, *st)
		}
		sort.Slice(n.Path, func(i, j int) bool { return n.Path[i].Iteration < n.Path[j].Iteration })
		r.NDR = append(r.NDR, *n)
	}
}

func (r *Report) ndrSection() section {
	sec := section{id: "ndr", title: "No-drop rate (UDP, binary search)", level: 2}
	sec.blocks = append(sec.blocks, block{para: "Binary search over the offered UDP rate per frame size (RFC 2544 §26.1, NFVbench): " +
		"the NDR is the highest offered rate with no loss, the PDR the highest within the partial-drop threshold. " +
		"Where the generator could not offer more than the chain took, no NDR is claimed: the row says so, with the most it offered " +
		"and what it sends with no chain in the way."})
	t := &table{id: "ndr-table", header: []string{"scenario", "frame", "trial", "NDR kpps", "NDR Mbit/s", "PDR kpps", "PDR loss", "trials", "offered max kpps", "generator alone kpps"},
		right: []bool{false, false, true, true, true, true, true, true, true, true}}
	for _, n := range r.NDR {
		ndr, bits, pdr := fixed(n.NDR/1e3, 1), fixed(n.NDRBits/1e6, 1), fixed(n.PDR/1e3, 1)
		if !n.Converged {
			ndr += " (not converged)"
		}
		if n.Limited {
			ndr, bits, pdr = "not found: "+limitText(n.Reason), dash, dash
		}
		t.rows = append(t.rows, []string{n.Scenario, n.Frame, strconv.Itoa(n.Trial), ndr, bits, pdr, orDash(n.PDRLoss),
			strconv.Itoa(n.Trials), fixed(n.GeneratorMax/1e3, 1), fixed(n.Calibrated/1e3, 1)})
	}
	sec.blocks = append(sec.blocks, block{table: t}, block{chart: "ndr-path"})
	return sec
}

func limitText(reason string) string {
	if reason == "back-pressure" {
		return "back-pressure (the chain slowed the sender without loss)"
	}
	return "generator-limited (no loss at its maximum)"
}

// ndrPlot draws every search's path: the offered rate of each trial, a filled mark where it
// passed without loss, a cross where it lost packets.
func (r *Report) ndrPlot() (*plot.Plot, error) {
	if len(r.NDR) == 0 {
		return nil, nil
	}
	p := newPlot("NDR search path", "trial", "offered rate (kpps)")
	for i, n := range r.NDR {
		var line plotter.XYs
		var pass, fail plotter.XYs
		for _, st := range n.Path {
			xy := plotter.XY{X: float64(st.Iteration), Y: st.Offered / 1e3}
			line = append(line, xy)
			if st.PassNDR {
				pass = append(pass, xy)
			} else {
				fail = append(fail, xy)
			}
		}
		if len(line) == 0 {
			continue
		}
		c := palette[i%len(palette)]
		l, err := plotter.NewLine(line)
		if err != nil {
			return nil, fmt.Errorf("plot ndr path: %w", err)
		}
		l.Color = c
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s %s #%d", n.Scenario, n.Frame, n.Trial), l)
		for _, pts := range []struct {
			xy    plotter.XYs
			shape draw.GlyphDrawer
		}{{pass, draw.CircleGlyph{}}, {fail, draw.CrossGlyph{}}} {
			if len(pts.xy) == 0 {
				continue
			}
			s, err := plotter.NewScatter(pts.xy)
			if err != nil {
				return nil, fmt.Errorf("plot ndr path: %w", err)
			}
			s.GlyphStyle.Shape, s.GlyphStyle.Color, s.GlyphStyle.Radius = pts.shape, c, vg.Points(3)
			p.Add(s)
		}
	}
	p.Legend.Top = true
	return p, nil
}
