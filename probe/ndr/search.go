package ndr

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrGeneratorLimited means the load generator could not offer more than the chain took: the
// chain lost nothing at the highest rate the generator reached, so its no-drop rate is above
// what this generator can measure. The result then has no NDR, only a lower bound.
var ErrGeneratorLimited = errors.New("the generator cannot offer more than the chain takes")

// ErrGeneratorShort means the generator could not hold a rate below the chain's drop point
// (Search.ShortRepeats): a trial that offered less than its request is not a trial at that
// rate (RFC 2544 section 23's constant offered rate), so its result moves no bound; the
// search found no loss below the lowest rate the generator could not hold, and its NDR is a
// lower bound, not a drop point.
var ErrGeneratorShort = errors.New("the generator fell short of the requested rate")

// Outcome is what one trial at one offered rate measured.
type Outcome struct {
	// Requested is the rate the trial asked for (pps); 0 means as fast as the generator can.
	Requested float64
	// Offered is the rate the generator really sent (pps), Sent packets over the trial.
	Offered  float64
	Sent     uint64
	Received uint64
	// ReceiverDrops are packets that reached the receiving node and were dropped there by the
	// measuring receiver itself (its socket buffer full), not by the chain: the chain
	// delivered them, so they are not chain loss. They are reported apart (Step, Result).
	ReceiverDrops uint64
	// Skipped are frames the generator did not send because it was held off behind its
	// schedule (pktgen's schedule; XDP generator only): not sent, so not in Sent or Offered.
	Skipped uint64
	// Refused are frames the generator sent that its interface refused to pass on (a veth
	// whose peer's ring was full: the chain's first hop did not take them; XDP generator
	// only). They are in Sent and count as loss: the first hop could not take that rate. An
	// unpaced trial outruns any first hop, so the generator's ceiling is the rate of the
	// frames that left (Sent less Refused), never Offered.
	Refused uint64
	// Disturbed says the chain's receiving side was held off its CPU by another task during
	// the trial for longer than the chain's first veth ring takes to half fill at the trial's
	// rate (pktgen.StallWatch; XDP generator placed on two CPUs only): a loss in such a trial
	// may be the host's, not the chain's. Stall is the longest such wait and StallBy the task
	// that ran before the thread got its CPU.
	Disturbed bool
	Stall     time.Duration
	StallBy   string
}

// Loss is the fraction of sent packets the chain lost (0..1): neither received nor dropped by
// the measuring receiver after the chain delivered them.
func (o Outcome) Loss() float64 {
	if o.Sent == 0 {
		return 1
	}
	got := o.Received + o.ReceiverDrops
	if got >= o.Sent {
		return 0
	}
	return float64(o.Sent-got) / float64(o.Sent)
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
	// ShortRepeats, when above 0, makes a paced trial whose generator fell short (by more
	// than Shortfall) invalid: it moves no bound and is run again, up to ShortRepeats times.
	// When every repetition fell short too, the rate is out of the generator's reach
	// (Result.ShortAt): the search goes on below it, never taking the short offered rate as
	// a pass or a loss. If no loss is found below it, the NDR is a lower bound (Result.Short,
	// ErrGeneratorShort); a short repetition of a converged NDR (Confirm) stops the search
	// so. The first trial at MaxRate is repeated the same way but then taken as it is (a
	// pass there is the generator's limit, Limited). Only the last of a rate's repetitions
	// counts against MaxTrials. 0 keeps every trial and bounds the search with the offered
	// rate.
	ShortRepeats int
	// DisturbedRepeats, when above 0, makes a trial that lost frames while it was Disturbed
	// invalid: it moves no bound and is run again, up to DisturbedRepeats times. A trial that
	// passed counts whatever happened beside it, and a loss still disturbed after every
	// repetition counts as a loss (the search never takes a lossy rate as passing).
	DisturbedRepeats int
	// Confirm is how many times a converged NDR is tried again before it is reported (RFC
	// 8219 section 7 repeats trials because one lossless trial near the drop point may be
	// luck): a loss in any repetition counts as a failure at that rate and the search goes on
	// below it. 0 reports the bound without repeating it.
	Confirm int
}

// Step is one trial of a search, with the bounds as they were after it.
type Step struct {
	Outcome
	Iteration int
	// Pass says whether the trial's loss was within the NDR or PDR threshold.
	PassNDR, PassPDR bool
	// GeneratorShort says the generator fell short of the requested rate.
	GeneratorShort bool
	// Inconsistent says the trial contradicted an earlier one (a loss below a rate that passed,
	// or a pass above a rate that lost): the chain is not monotone or the measurement is noisy.
	Inconsistent bool
	// Confirming says the trial repeated a converged NDR (Search.Confirm).
	Confirming bool
	// Invalid says the generator fell short, or the trial lost frames while Disturbed, and the
	// trial was run again (Search.ShortRepeats, Search.DisturbedRepeats): it moved no bound.
	Invalid bool
}

// Result is a finished search.
type Result struct {
	// NDR and PDR are the highest rates (pps) found within each loss threshold; 0 when
	// Limited. Each is a rate at which a trial passed, and no trial at or below it lost more
	// than the threshold allows.
	NDR, PDR float64
	// NDRConverged and PDRConverged say whether the bound was found to Precision within
	// MaxTrials.
	NDRConverged, PDRConverged bool
	// AtMax says the chain lost nothing at MaxRate, which the generator reached: NDR and PDR
	// are then lower bounds ("NDR >= MaxRate"), not drop points.
	AtMax bool
	// PDRAtMax says the same of the PDR alone: the first trial, at MaxRate or the
	// generator's most, lost no more than PDRLoss, so the PDR is at least that rate.
	PDRAtMax bool
	// NDRHi and PDRHi are the lowest offered rates that failed each threshold (0 when none
	// did): the true drop point lies in [NDR, NDRHi).
	NDRHi, PDRHi float64
	// Inconsistent counts trials that contradicted an earlier one (Step.Inconsistent).
	Inconsistent int
	// Short says the NDR is bounded by the generator, not the chain: no loss was found below
	// the lowest rate the generator could not hold (ShortAt), or a repetition of the NDR fell
	// short (Search.ShortRepeats). NDR is then a lower bound, not converged.
	Short bool
	// ShortAt is the lowest requested rate the generator fell short of in every repetition (0
	// when none).
	ShortAt float64
	// ReceiverDrops is the sum of Outcome.ReceiverDrops over the trials, and
	// ReceiverDropTrials how many trials had any.
	ReceiverDrops      uint64
	ReceiverDropTrials int
	// Disturbed counts the trials that lost frames while Disturbed (Outcome.Disturbed), those
	// run again included; DisturbedKept those of them whose loss counted (still disturbed
	// after every repetition).
	Disturbed, DisturbedKept int
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
// search is never slower than bisection by more than one trial in two. A trial where the
// generator fell short of its request and passed cannot lower a bound; if that happens at the
// top, the result is Limited and err wraps ErrGeneratorLimited. No loss at MaxRate (reached)
// ends the search with AtMax: the NDR is at least MaxRate.
//
// The chain need not be monotone: a loss at or below the highest passing rate moves the
// upper bound down to it and the lower bound to the highest pass below it (or 0), so an NDR
// is always a rate that passed with no loss measured at or below it; a pass at or above the
// lowest failing rate moves nothing. Both count as Inconsistent.
func (s Search) Run(ctx context.Context, trial Trial) (*Result, error) {
	if s.MaxTrials < 1 || s.Precision <= 0 || s.Precision >= 1 || s.PDRLoss < s.NDRLoss || s.Confirm < 0 || s.ShortRepeats < 0 || s.DisturbedRepeats < 0 {
		return nil, fmt.Errorf("configure search: max trials %d, precision %v (0-1), pdr loss %v >= ndr loss %v, confirm %d >= 0, short repeats %d and disturbed repeats %d >= 0",
			s.MaxTrials, s.Precision, s.PDRLoss, s.NDRLoss, s.Confirm, s.ShortRepeats, s.DisturbedRepeats)
	}
	res := &Result{}
	// valid counts the trials that count against MaxTrials (all but the Invalid ones).
	valid := 0
	// step runs a trial at pps; with ShortRepeats, a short one is marked Invalid and run
	// again. It returns the last trial and whether it is still short after every repetition.
	step := func(pps float64) (Step, bool, error) {
		for rep, drep := 0, 0; ; {
			o, err := trial(ctx, pps)
			if err != nil {
				return Step{}, false, fmt.Errorf("trial %d at %.0f pps: %w", len(res.Steps)+1, pps, err)
			}
			st := Step{Outcome: o, Iteration: len(res.Steps) + 1, PassNDR: o.Loss() <= s.NDRLoss, PassPDR: o.Loss() <= s.PDRLoss}
			st.GeneratorShort = pps > 0 && o.Offered < pps*(1-s.Shortfall)
			if o.ReceiverDrops > 0 {
				res.ReceiverDrops += o.ReceiverDrops
				res.ReceiverDropTrials++
			}
			if st.GeneratorShort && s.ShortRepeats > 0 && rep < s.ShortRepeats {
				st.Invalid = true
				res.Steps = append(res.Steps, st)
				rep++
				continue
			}
			if o.Disturbed && !st.PassNDR {
				res.Disturbed++
				if drep < s.DisturbedRepeats {
					st.Invalid = true
					res.Steps = append(res.Steps, st)
					drep++
					continue
				}
				if s.DisturbedRepeats > 0 {
					res.DisturbedKept++
				}
			}
			res.Steps = append(res.Steps, st)
			valid++
			return st, st.GeneratorShort && s.ShortRepeats > 0, nil
		}
	}
	first, _, err := step(s.MaxRate)
	if err != nil {
		return res, err
	}
	res.GeneratorMax = first.Offered
	if first.PassNDR && (s.MaxRate == 0 || first.GeneratorShort) {
		// No loss at the most the generator could offer: no bound found.
		res.Limited = true
		return res, fmt.Errorf("search ndr: %w: no loss at %.0f pps, the most it offered (requested %.0f)", ErrGeneratorLimited, first.Offered, s.MaxRate)
	}
	// No loss at MaxRate, reached: repeated Confirm times, it makes the NDR at least MaxRate
	// (no drop point); a loss in a repetition starts the search from it.
	for i := 0; first.PassNDR && i < s.Confirm && valid < s.MaxTrials; i++ {
		if first, _, err = step(s.MaxRate); err != nil {
			return res, err
		}
		res.Steps[len(res.Steps)-1].Confirming = true
	}
	top := first.Offered
	if first.PassNDR {
		res.NDR, res.PDR, res.AtMax, res.PDRAtMax = top, top, true, true
		return res, nil
	}
	ndr, pdr := bounds{hi: top}, bounds{hi: top}
	if first.PassPDR {
		pdr = bounds{lo: top, hi: top, passes: []float64{top}}
		res.PDRAtMax = true
	}
	kind := "first"
	// confirmed counts passing repetitions of the NDR at confirmedAt; a bound that moved
	// (a pass in the PDR phase raised it, a loss lowered it) is confirmed afresh.
	confirmed, confirmedAt := 0, 0.0
	for valid < s.MaxTrials {
		var b *bounds
		confirming := false
		switch {
		case !ndr.done(s.Precision):
			b = &ndr
		case s.Confirm > 0 && ndr.lo > 0 && (confirmed < s.Confirm || confirmedAt != ndr.lo):
			confirming = true
			if confirmedAt != ndr.lo {
				confirmed, confirmedAt = 0, ndr.lo
			}
		case !pdr.done(s.Precision):
			if pdr.lo < ndr.lo {
				pdr.pass(ndr.lo)
			}
			if pdr.done(s.Precision) {
				continue
			}
			b = &pdr
		}
		if b == nil && !confirming {
			break
		}
		var rate float64
		if confirming {
			rate, kind = ndr.lo, "confirm"
		} else {
			last := res.Steps[len(res.Steps)-1]
			pass := last.PassNDR
			if b == &pdr {
				pass = last.PassPDR
			}
			rate, kind = next(b, last, kind, pass, s.Precision)
		}
		st, short, err := step(rate)
		if err != nil {
			return res, err
		}
		if short {
			// Still short after every repetition: the generator cannot offer this rate. It
			// is no loss of the chain's; the search goes on below it.
			res.Steps[len(res.Steps)-1].Invalid = true
			if res.ShortAt == 0 || rate < res.ShortAt {
				res.ShortAt = rate
			}
			if confirming {
				res.Short = true
				break
			}
			if b == &ndr {
				ndr.hi = min(ndr.hi, rate)
			}
			pdr.hi = min(pdr.hi, rate)
			continue
		}
		r := st.Offered // the rate really offered is what passed or failed
		var odd bool
		switch {
		case st.PassNDR && confirming:
			// A repetition confirms the bound; it does not move it (the generator's offered
			// rate wanders a little around the request).
			ndr.passes = append(ndr.passes, r)
			odd = pdr.pass(r)
		case st.PassNDR:
			odd = ndr.pass(r)
			odd = pdr.pass(r) || odd
		case st.PassPDR:
			odd = ndr.fail(r)
			odd = pdr.pass(r) || odd
		default:
			odd = ndr.fail(r)
			odd = pdr.fail(r) || odd
		}
		if confirming {
			if st.PassNDR {
				confirmed++
			} else {
				confirmed = 0
			}
		}
		if odd {
			res.Inconsistent++
		}
		res.Steps[len(res.Steps)-1].Inconsistent = odd
		res.Steps[len(res.Steps)-1].Confirming = confirming
	}
	if pdr.lo < ndr.lo {
		pdr.pass(ndr.lo)
	}
	res.NDR, res.PDR, res.NDRHi, res.PDRHi = ndr.lo, pdr.lo, ndr.hi, pdr.hi
	// A top that is the generator's limit, not a loss, is no drop point.
	pdrShort := res.ShortAt > 0 && pdr.hi == res.ShortAt
	if res.ShortAt > 0 && ndr.hi == res.ShortAt {
		res.Short, res.NDRHi = true, 0
	}
	if pdrShort {
		res.PDRHi = 0
	}
	res.NDRConverged = ndr.lo > 0 && ndr.done(s.Precision) && (s.Confirm == 0 || (confirmed >= s.Confirm && confirmedAt == ndr.lo)) && !res.Short
	res.PDRAtMax = res.PDRAtMax && pdr.lo >= top
	res.PDRConverged = pdr.lo > 0 && pdr.done(s.Precision) && !res.PDRAtMax && !res.Short && !pdrShort
	if res.Short {
		return res, fmt.Errorf("search ndr: %w: no loss up to %.0f pps, and %.0f pps fell short in %d trials in a row",
			ErrGeneratorShort, res.NDR, res.ShortAt, s.ShortRepeats+1)
	}
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

// bounds is the interval a rate is searched in: lo is the highest offered rate that passed
// below every failing one (0 if none), hi the lowest that failed; passes remembers every rate
// that passed, so that a loss below lo can fall back to the highest pass below it.
type bounds struct {
	lo, hi float64
	passes []float64
}

func (b *bounds) done(precision float64) bool { return b.hi <= 0 || (b.hi-b.lo) <= precision*b.hi }

// pass records a passing rate; it says whether the pass contradicts a loss at or below it.
func (b *bounds) pass(r float64) bool {
	b.passes = append(b.passes, r)
	if r >= b.hi {
		return b.hi > b.lo || r > b.hi // a loss was measured at or below r: lo stays
	}
	if r > b.lo {
		b.lo = r
	}
	return false
}

// fail records a failing rate; it says whether the loss contradicts a pass at or above it.
func (b *bounds) fail(r float64) bool {
	if r < b.hi {
		b.hi = r
	}
	if r > b.lo {
		return false
	}
	// A loss at or below the highest pass: that pass cannot be the NDR. Fall back to the
	// highest pass strictly below the loss.
	b.lo = 0
	for _, p := range b.passes {
		if p < r && p > b.lo {
			b.lo = p
		}
	}
	return true
}
