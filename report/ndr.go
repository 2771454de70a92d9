package report

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

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
	// Sender is where the sender ran when not in the source's own stack from the host (a VM
	// source: "sendmmsg in the guest (its agent)"), "" otherwise.
	Sender string
	// Stopped says why the NDR is a lower bound set by the generator, not a drop point: no
	// loss below a rate the generator could not hold.
	Stopped string
	// AtLeast says the chain lost nothing at the search's max rate: NDR (PDRAtLeast: PDR) is
	// a lower bound, "NDR >= max rate", not a drop point.
	AtLeast, PDRAtLeast bool
	// NDRHi is the lowest offered rate that lost packets: the drop point lies in [NDR, NDRHi).
	NDRHi float64
	// Inconsistent counts trials that contradicted an earlier one; ReceiverDrops are packets
	// the measuring receiver dropped (not chain loss).
	Inconsistent  int
	ReceiverDrops float64
	// GeneratorMax is the most the generator offered into the chain; Calibrated the most it
	// sent with no chain in the way.
	GeneratorMax, Calibrated float64
	Path                     []NDRStep
	// Generator is the load generator's method (xdp, sendmmsg), Receiver what counted at the
	// destination; SenderCPU and ReceiveCPU the CPUs the sender and the chain's receiving
	// side were placed on ("-1": not placed; "": not recorded), Placement the probe's words
	// on it; Ceiling the generator's measured ceiling (pps; 0: not recorded), ClampedFrom the
	// max rate asked for when it was above the ceiling and clamped; Fallback why the XDP
	// generator was not used.
	Generator, Receiver, SenderCPU, ReceiveCPU, Placement string
	Ceiling                                               float64
	ClampedFrom, Fallback                                 string
	// Disturbed is the probe's count of trials run again because they lost frames while the
	// chain's receiving side was held off its CPU, and of those whose loss still counted
	// ("N, M kept as loss"; "": not watched).
	Disturbed string
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
		if snd := x.Labels["sender"]; snd != "" {
			n.Sender = snd // on every result sample of a guest's search, limited or not
		}
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
			n.Stopped = x.Labels["stopped"]
			n.PDRLoss = x.Labels["pdr_loss"]
			n.AtLeast, n.PDRAtLeast = x.Labels["ndr_bound"] == "at least", x.Labels["pdr_bound"] == "at least"
			n.NDRHi, _ = strconv.ParseFloat(x.Labels["ndr_hi_pps"], 64)
			n.Inconsistent, _ = strconv.Atoi(x.Labels["inconsistent_trials"])
			n.ReceiverDrops, _ = strconv.ParseFloat(x.Labels["receiver_drops"], 64)
			n.Disturbed = x.Labels["disturbed_trials"]
		case "generator_max_pps":
			n.GeneratorMax = x.Value
			n.Limited, n.Reason = x.Labels["limited"] == "true", x.Labels["reason"]
			n.Trials, _ = strconv.Atoi(x.Labels["trials"])
		case "generator_calibrated_pps":
			n.Calibrated = x.Value
		case "generator_ceiling_pps":
			n.Ceiling = x.Value
			n.Generator, n.Receiver, n.Placement = x.Labels["generator"], x.Labels["receiver"], x.Labels["placement"]
			n.SenderCPU, n.ReceiveCPU = x.Labels["sender_cpu"], x.Labels["receive_cpu"]
			n.ClampedFrom, n.Fallback = x.Labels["max_rate_clamped_from"], x.Labels["fallback_reason"]
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
		"and what it sends with no chain in the way. \"≥\" marks a search that lost nothing at its max rate: a lower bound, not a drop point. " +
		"A converged NDR is repeated before it is reported (RFC 8219 §7); the drop point lies between the NDR and the lowest rate that lost packets. " +
		"A search in which every trial lost packets has no NDR: the row says \"not converged\" with the lowest rate it tried and that trial's loss. " +
		"Packets the measuring receiver itself dropped are not counted as chain loss; their number is shown."})
	t := &table{id: "ndr-table", header: []string{"scenario", "frame", "trial", "NDR kpps", "NDR Mbit/s", "lowest loss kpps", "PDR kpps", "PDR loss", "trials", "inconsistent", "receiver drops", "offered max kpps", "generator alone kpps"},
		right: []bool{false, false, true, true, true, true, true, true, true, true, true, true, true}}
	for _, n := range r.NDR {
		ndr, bits, pdr := n.ndrText(), fixed(n.NDRBits/1e6, 1), fixed(n.PDR/1e3, 1)
		hi := dash
		if n.NDRHi > 0 && !n.AtLeast {
			hi = fixed(n.NDRHi/1e3, 1)
		}
		if n.AtLeast {
			bits = "≥ " + bits
		}
		if n.PDRAtLeast {
			pdr = "≥ " + pdr
		}
		if n.Limited {
			bits, pdr = dash, dash
		}
		if n.noPass() {
			bits = dash
		}
		if n.PDR == 0 && !n.PDRAtLeast {
			pdr = dash // no trial within the partial-drop threshold: 0 is no measured PDR
		}
		t.rows = append(t.rows, []string{r.ScenarioLabel(n.Scenario), n.Frame, strconv.Itoa(n.Trial), ndr, bits, hi, pdr, orDash(n.PDRLoss),
			strconv.Itoa(n.Trials), strconv.Itoa(n.Inconsistent), fixed(n.ReceiverDrops, 0), fixed(n.GeneratorMax/1e3, 1), fixed(n.Calibrated/1e3, 1)})
	}
	sec.blocks = append(sec.blocks, block{table: t})
	if s := r.guestSenderText(); s != "" {
		sec.blocks = append(sec.blocks, block{para: s})
	}
	sec.blocks = append(sec.blocks, r.ndrGeneratorBlocks()...)
	sec.blocks = append(sec.blocks, block{chart: "ndr-path"})
	return sec
}

// ndrGeneratorBlocks says how each search's load was made: the generator's method and what
// counted at the receiver, where the sender and the chain's receiving side ran, the
// generator's ceiling into the chain, and a max rate clamped to it or a fallback's reason.
func (r *Report) ndrGeneratorBlocks() []block {
	t := &table{id: "ndr-generator", header: []string{"scenario", "frame", "trial", "generator", "receiver counted by", "sender CPU", "receiving side CPU", "generator ceiling kpps", "max rate clamped", "note"},
		right: []bool{false, false, true, false, false, true, true, true, false, false}}
	cpu := func(c string) string {
		switch c {
		case "":
			return dash
		case "-1":
			return "not placed"
		}
		return c
	}
	for _, n := range r.NDR {
		if n.Generator == "" {
			continue // recorded before the generator's labels
		}
		clamp := "no"
		if n.ClampedFrom != "" {
			clamp = "from " + n.ClampedFrom + " pps"
		}
		ceil := dash
		if n.Ceiling > 0 {
			ceil = fixed(n.Ceiling/1e3, 1)
		}
		note := n.Placement
		if n.Fallback != "" {
			note = "the xdp generator could not run: " + n.Fallback
		}
		if n.Disturbed != "" && !strings.HasPrefix(n.Disturbed, "0,") {
			note = strings.TrimPrefix(note+"; ", "; ") + "disturbed trials re-run: " + n.Disturbed
		}
		if n.Sender != "" { // a VM guest's sender: first, as it bears on every figure of the row
			note = strings.TrimSuffix("sender: "+n.Sender+" (guest's clock, its virtual NIC before the chain); "+note, "; ")
		}
		t.rows = append(t.rows, []string{r.ScenarioLabel(n.Scenario), n.Frame, strconv.Itoa(n.Trial), n.Generator, orDash(n.Receiver), cpu(n.SenderCPU), cpu(n.ReceiveCPU),
			ceil, clamp, orDash(note)})
	}
	if len(t.rows) == 0 {
		return nil
	}
	return []block{{para: "How each search's load was made: the generator (xdp: the XDP live-frame generator, frames built in the kernel; sendmmsg: the socket path), " +

		"what counted the frames at the destination (xdp-counter: before any socket, so receiver drops cannot pose as chain loss), " +
		"the CPUs the sender and the chain's receiving side ran on (on one CPU the chain's work runs on the sender's and slows it down instead of dropping), " +
		"the generator's ceiling into the chain (what left its interface unpaced; frames the first hop refused are not in it), and a max rate above that ceiling clamped to it; " +
		"the note names a sender that ran in a VM guest (by its agent) rather than in the source's stack from the host. " +
		"A trial that lost frames while another task held the chain's receiving threads off their CPU for longer than half the fill time of the forwarder's receive ring is disturbed: it is run again, up to 3 times, and its loss counts if it stays disturbed (docs/verdicts.md); the note gives how many were re-run and kept."}, {table: t}}
}

// limitText says why a search found no drop point. A sender in a VM guest is calibrated into
// a socket of its own guest, so a shortfall into the chain also counts its emulated NIC's cost,
// not only the chain's: the text does not blame the chain alone.
func limitText(reason, sender string) string {
	switch {
	case reason == "back-pressure" && strings.Contains(sender, "guest"):
		return "back-pressure (the guest's sender offered less into the chain than into its own guest, without loss: its virtual NIC or the chain held it back)"
	case reason == "back-pressure":
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
	tcg := false
	for _, n := range r.NDR {
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
		// A scenario's style in every chart of the report; its frame sizes and trials share it
		// (the legend names each).
		st := r.seriesStyle(n.Scenario)
		c := st.colour
		l, err := plotter.NewLine(line)
		if err != nil {
			return nil, fmt.Errorf("plot ndr path: %w", err)
		}
		l.Color, l.Dashes = c, st.dashes
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s %s #%d", tcgLegend(n.Scenario, r.Emulated(n.Scenario)), n.Frame, n.Trial), l)
		tcg = tcg || r.Emulated(n.Scenario)
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
	if tcg {
		p.Title.Text += tcgTitleLine
	}
	p.Legend.Top = true
	return p, nil
}

// ndrText is the NDR as the table and the verdict give it, in kpps: a lower bound marked "≥"
// with why, "(not converged)", "not found" with the generator's limit, or, when no trial
// passed, what the lowest rate tried lost (never "0.0", which reads as a measured NDR of zero).
func (n NDRRow) ndrText() string {
	ndr := fixed(n.NDR/1e3, 1)
	switch {
	case n.Limited:
		return "not found: " + limitText(n.Reason, n.Sender)
	case n.AtLeast:
		return "≥ " + ndr + " (no loss at the max rate)"
	case n.noPass():
		why := "not converged"
		if n.Converged {
			why = "no NDR"
		}
		if n.Stopped != "" {
			why = "no NDR (" + n.Stopped + ")"
		}
		if low, ok := n.lowestTried(); ok {
			return why + ": lowest rate tried " + fixed(low.Offered/1e3, 1) + " kpps lost " + pct(low.Loss, false)
		}
		if n.NDRHi > 0 {
			return why + ": every trial lost packets, the lowest at " + fixed(n.NDRHi/1e3, 1) + " kpps"
		}
		return why + ": no trial ran without loss"
	case n.Stopped != "":
		return "≥ " + ndr + " (" + n.Stopped + ")"
	case !n.Converged:
		return ndr + " (not converged)"
	}
	return ndr
}

// noPass says the search has no NDR because no trial passed: the NDR field is 0, which is
// no measured rate, so it must not be printed as one.
func (n NDRRow) noPass() bool {
	if n.Limited || n.AtLeast || n.NDR > 0 {
		return false
	}
	for _, st := range n.Path {
		if st.PassNDR {
			return false
		}
	}
	return true
}

// lowestTried is the trial at the lowest offered rate of the search's path (false when the
// path was not recorded).
func (n NDRRow) lowestTried() (NDRStep, bool) {
	var low NDRStep
	found := false
	for _, st := range n.Path {
		if st.Offered > 0 && (!found || st.Offered < low.Offered) {
			low, found = st, true
		}
	}
	return low, found
}

// ndrVerdict gives the verdict one line per scenario with NDR searches: each frame size's NDR
// in kpps (every trial's), so a run's answer is on its first screen, not only in its section.
func (r *Report) ndrVerdict() []string {
	var items []string
	for _, s := range r.Scenarios {
		var frames []string
		byFrame := map[string][]string{}
		for _, n := range r.NDR {
			if n.Scenario != s {
				continue
			}
			if byFrame[n.Frame] == nil {
				frames = append(frames, n.Frame)
			}
			byFrame[n.Frame] = append(byFrame[n.Frame], n.ndrText())
		}
		if len(frames) == 0 {
			continue
		}
		parts := make([]string, len(frames))
		for i, f := range frames {
			name := f
			if _, err := strconv.Atoi(f); err == nil {
				name += " B"
			}
			parts[i] = name + ": " + strings.Join(byFrame[f], ", ")
		}
		sent := ""
		if snd := r.ndrSender(s); snd != "" {
			sent = "; sent from a VM guest (" + snd + "), its virtual NIC before the chain"
		}
		items = append(items, fmt.Sprintf("No-drop rate (UDP) of %s, kpps per frame size: %s (the no-drop rate section has each search's path and its generator%s).",
			r.ScenarioLabel(s), strings.Join(parts, "; "), sent))
	}
	return items
}

// ndrSender is the sender of scenario s's searches when one ran in a VM guest (label sender),
// "" otherwise.
func (r *Report) ndrSender(s string) string {
	for _, n := range r.NDR {
		if n.Scenario == s && n.Sender != "" {
			return n.Sender
		}
	}
	return ""
}

// guestSenderText says, under the NDR table, which scenarios' searches were sent from a VM
// guest and what that changes; "" when none was.
func (r *Report) guestSenderText() string {
	var names []string
	sender := ""
	for _, s := range r.Scenarios {
		if snd := r.ndrSender(s); snd != "" {
			names = append(names, s)
			sender = snd
		}
	}
	if len(names) == 0 {
		return ""
	}
	if len(names) > 1 {
		sender = "see the generator table's notes below"
	}
	return "Sent from a VM guest (sender: " + sender + "): " + strings.Join(names, ", ") + ". These searches' load was made and paced in the guest, each trial's sending timed by the guest's clock (under TCG an emulated CPU's), " +
		"and crossed the guest's virtual NIC before the chain: their NDR is that of the guest's sender and the chain together (the generator alone is calibrated into a socket of the guest itself)."
}
