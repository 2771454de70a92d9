package ndr

import (
	"context"
	"errors"
	"fmt"
)

// ErrGeneratorLimited means the load generator could not offer more than the chain took: the
// chain lost nothing at the highest rate the generator reached, so its no-drop rate is above
// what this generator can measure. The result then has no NDR, only a lower bound.
var ErrGeneratorLimited = errors.New("the generator cannot offer more than the chain takes")

// Outcome is what one trial at one offered rate measured.
type Outcome struct {
	// Requested is the rate the trial asked for (pps); 0 means as fast as the generator can.
	Requested float64
	// Offered is the rate the generator really sent (pps), Sent packets over the trial.
	Offered  float64
	Sent     uint64
	Received uint64
}

// Loss is the fraction of sent packets not received (0..1).
func (o Outcome) Loss() float64 {
	if o.Sent == 0 {
		return 1
	}
	if o.Received >= o.Sent {
		return 0
	}
	return float64(o.Sent-o.Received) / float64(o.Sent)
}

// Trial runs the chain at a requested rate (packets per second; 0 = unpaced) and says what
// happened.
type Trial func(ctx context.Context, pps float64) (Outcome, error)

// Search configures a binary search for the no-drop rate (NDR) and the partial-drop rate
// (PDR), as RFC 2544 section 26.1 and NFVbench do.
type Search struct {
	// MaxRate is the upper bound in pps; 0 means the fastest the generator can send.
	MaxRate float64
	// NDRLoss and PDRLoss are the loss fractions allowed at the NDR (usually 0) and the PDR
	// (e.g. 0.001 = 0.1 %).
	NDRLoss, PDRLoss float64
	// Precision is the relative width at which a bound is found: (hi-lo)/hi <= Precision.
	Precision float64
	// MaxTrials bounds the search.
	MaxTrials int
	// Shortfall is how far below the requested rate the generator may fall before a trial
	// counts as generator-limited (e.g. 0.02 = 2 %).
	Shortfall float64
}

// Step is one trial of a search, with the bounds as they were after it.
type Step struct {
	Outcome
	Iteration int
	// Pass says whether the trial's loss was within the NDR or PDR threshold.
	PassNDR, PassPDR bool
	// GeneratorShort says the generator fell short of the requested rate.
	GeneratorShort bool
}

// Result is a finished search.
type Result struct {
	// NDR and PDR are the highest rates (pps) found within each loss threshold; 0 when
	// Limited.
	NDR, PDR float64
	// NDRConverged and PDRConverged say whether the bound was found to Precision within
	// MaxTrials.
	NDRConverged, PDRConverged bool
	// Limited is set when the generator could not offer more than the chain took;
	// GeneratorMax is then the highest rate it reached, a lower bound of the NDR.
	Limited      bool
	GeneratorMax float64
	Steps        []Step
}

// Run searches: the first trial at MaxRate (or unpaced), then the NDR interval, then the PDR
// interval, each between the highest passing and the lowest failing offered rate. Every other
// trial is a guess instead of the midpoint: after a loss, the rate the chain delivered (less
// half the precision); after a pass that verified such a guess, the rate that would close the
// interval to the precision. Guesses outside the interval fall back to the midpoint, so the
// search is never slower than bisection by more than one trial in two. A trial where the generator fell short of its request and passed cannot lower a
// bound; if that happens at the top, the result is Limited and err wraps ErrGeneratorLimited.
func (s Search) Run(ctx context.Context, trial Trial) (*Result, error) {
	if s.MaxTrials < 1 || s.Precision <= 0 || s.Precision >= 1 || s.PDRLoss < s.NDRLoss {
		return nil, fmt.Errorf("configure search: max trials %d, precision %v (0-1), pdr loss %v >= ndr loss %v",
			s.MaxTrials, s.Precision, s.PDRLoss, s.NDRLoss)
	}
	res := &Result{}
	step := func(pps float64) (Step, error) {
		o, err := trial(ctx, pps)
		if err != nil {
			return Step{}, fmt.Errorf("trial %d at %.0f pps: %w", len(res.Steps)+1, pps, err)
		}
		st := Step{Outcome: o, Iteration: len(res.Steps) + 1, PassNDR: o.Loss() <= s.NDRLoss, PassPDR: o.Loss() <= s.PDRLoss}
		st.GeneratorShort = pps > 0 && o.Offered < pps*(1-s.Shortfall)
		res.Steps = append(res.Steps, st)
		return st, nil
	}
	first, err := step(s.MaxRate)
	if err != nil {
		return res, err
	}
	res.GeneratorMax = first.Offered
	if first.PassNDR && (s.MaxRate == 0 || first.GeneratorShort) {
		// No loss at the most the generator could offer: no bound found.
		res.Limited = true
		return res, fmt.Errorf("search ndr: %w: no loss at %.0f pps, the most it offered (requested %.0f)", ErrGeneratorLimited, first.Offered, s.MaxRate)
	}
	top := first.Offered
	ndr, pdr := bounds{hi: top}, bounds{hi: top}
	if first.PassNDR { // MaxRate reached without loss: the bound is the MaxRate itself
		ndr, pdr = bounds{lo: top, hi: top}, bounds{lo: top, hi: top}
	} else if first.PassPDR {
		pdr = bounds{lo: top, hi: top}
	}
	kind := "first"
	for len(res.Steps) < s.MaxTrials {
		var b *bounds
		switch {
		case !ndr.done(s.Precision):
			b = &ndr
		case !pdr.done(s.Precision):
			if pdr.lo < ndr.lo {
				pdr.lo = ndr.lo
			}
			if pdr.done(s.Precision) {
				continue
			}
			b = &pdr
		}
		if b == nil {
			break
		}
		last := res.Steps[len(res.Steps)-1]
		pass := last.PassNDR
		if b == &pdr {
			pass = last.PassPDR
		}
		var rate float64
		rate, kind = next(b, last, kind, pass, s.Precision)
		st, err := step(rate)
		if err != nil {
			return res, err
		}
		r := st.Offered // the rate really offered is what passed or failed
		switch {
		case st.PassNDR:
			ndr.pass(r)
			pdr.pass(r)
		case st.PassPDR:
			ndr.fail(r)
			pdr.pass(r)
		default:
			ndr.fail(r)
			pdr.fail(r)
		}
	}
	if pdr.lo < ndr.lo {
		pdr.lo = ndr.lo
	}
	res.NDR, res.PDR = ndr.lo, pdr.lo
	res.NDRConverged, res.PDRConverged = ndr.done(s.Precision), pdr.done(s.Precision)
	return res, nil
}

// next picks the next rate in b and says how: "estimate" after a loss (what the chain
// delivered, less half the precision: it took that much), "close" after a pass (the rate that
// would close the interval to the precision above the highest pass), else "bisect". Two
// guesses of one kind never follow each other, so bisection halves the interval at least
// every other trial.
func next(b *bounds, last Step, lastKind string, pass bool, precision float64) (float64, string) {
	in := func(g float64) bool { return g > b.lo && g < b.hi }
	if !pass && lastKind != "estimate" {
		if g := last.Offered * (1 - last.Loss()) * (1 - precision/2); in(g) {
			return g, "estimate"
		}
	}
	if b.lo > 0 && lastKind != "close" {
		if g := b.lo / (1 - 0.9*precision); in(g) {
			return g, "close"
		}
	}
	return (b.lo + b.hi) / 2, "bisect"
}

// bounds is the interval a rate is searched in: lo passed, hi failed.
type bounds struct{ lo, hi float64 }

func (b *bounds) done(precision float64) bool { return b.hi <= 0 || (b.hi-b.lo) <= precision*b.hi }

func (b *bounds) pass(r float64) {
	if r > b.lo {
		b.lo = r
	}
	if b.hi < b.lo {
		b.hi = b.lo
	}
}

func (b *bounds) fail(r float64) {
	if r < b.hi {
		b.hi = r
	}
	if b.lo > b.hi {
		b.lo = b.hi
	}
}
