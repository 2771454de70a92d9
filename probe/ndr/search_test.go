package ndr

import (
	"context"
	"errors"
	"math"
	"testing"
)

// chain is a model of a chain: no loss up to capacity, then loss growing with the excess,
// behind a generator that sends at most genMax pps.
type chain struct {
	capacity, soft, genMax float64
}

func (c chain) trial(_ context.Context, pps float64) (Outcome, error) {
	offered := pps
	if pps == 0 || pps > c.genMax {
		offered = c.genMax
	}
	sent := uint64(offered) // one second trial
	recv := sent
	switch {
	case offered > c.capacity+c.soft:
		recv = uint64(c.capacity)
	case offered > c.capacity: // a little loss: below the PDR threshold near capacity
		recv = sent - uint64((offered-c.capacity)/c.soft*float64(sent)*0.0005)
	}
	return Outcome{Requested: pps, Offered: offered, Sent: sent, Received: recv}, nil
}

func TestSearch(t *testing.T) {
	base := Search{NDRLoss: 0, PDRLoss: 0.001, Precision: 0.01, MaxTrials: 20, Shortfall: 0.02}
	cases := []struct {
		name      string
		c         chain
		max       float64
		limited   bool
		ndr, pdr  float64
		maxTrials int
	}{
		{"unpaced top, chain takes 40 %, sharp knee", chain{capacity: 400e3, soft: 2e3, genMax: 1e6}, 0, false, 400e3, 402e3, 10},
		{"unpaced top, wide partial-drop region", chain{capacity: 400e3, soft: 20e3, genMax: 1e6}, 0, false, 400e3, 420e3, 20},
		{"max rate given, generator reaches it", chain{capacity: 123e3, soft: 1e3, genMax: 1e6}, 500e3, false, 123e3, 124e3, 10},
		{"generator slower than the chain", chain{capacity: 2e6, soft: 1e3, genMax: 1e6}, 0, true, 0, 0, 1},
		{"max rate beyond the generator, no loss", chain{capacity: 2e6, soft: 1e3, genMax: 1e6}, 1.5e6, true, 0, 0, 1},
		{"no loss at the max rate: ndr is at least the max rate", chain{capacity: 2e6, soft: 1e3, genMax: 3e6}, 1e6, false, 1e6, 1e6, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := base
			s.MaxRate = c.max
			res, err := s.Run(context.Background(), c.c.trial)
			if c.limited {
				if !errors.Is(err, ErrGeneratorLimited) || !res.Limited || res.NDR != 0 {
					t.Fatalf("want generator-limited, got err %v, %+v", err, res)
				}
				if res.GeneratorMax != c.c.genMax {
					t.Errorf("generator max %v, want %v", res.GeneratorMax, c.c.genMax)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if atMax := c.max > 0 && c.c.capacity >= c.max; atMax {
				// No loss at the max rate is a lower bound (NDR >= max rate), not a drop point.
				if !res.AtMax || !res.PDRAtMax || res.NDRConverged || res.NDR != c.max || len(res.Steps) != 1 {
					t.Errorf("want NDR >= %.0f (at max, not converged, one trial), got %+v", c.max, res)
				}
				return
			}
			if res.AtMax {
				t.Errorf("loss found below the max rate, yet reported at max: %+v", res)
			}
			if !res.NDRConverged || !res.PDRConverged {
				t.Errorf("not converged in %d trials: %+v", len(res.Steps), res)
			}
			if len(res.Steps) > c.maxTrials {
				t.Errorf("%d trials, want <= %d", len(res.Steps), c.maxTrials)
			}
			// The true bound lies within the precision below what was found, never above.
			if res.NDR > c.ndr*(1+s.Precision) || res.NDR < c.ndr*(1-2*s.Precision) {
				t.Errorf("ndr %.0f, want within %.0f %% below %.0f", res.NDR, 2*s.Precision*100, c.ndr)
			}
			if res.PDR > c.pdr+1 || res.PDR < c.ndr {
				t.Errorf("pdr %.0f, want between ndr %.0f and %.0f", res.PDR, c.ndr, c.pdr)
			}
			for _, st := range res.Steps {
				if math.IsNaN(st.Offered) {
					t.Errorf("step %+v", st)
				}
			}
		})
	}
	if _, err := (Search{Precision: 0.01}).Run(context.Background(), chain{}.trial); err == nil {
		t.Error("max trials 0 accepted")
	}
}

// shortGen is a generator in front of a chain model that falls short of some requests: when
// short(pps, attempt) says so (attempt counts the trials at that rate so far, from 0), it sends
// half the frames, in bursts at the requested rate, so the chain loses as it would at pps.
type shortGen struct {
	c        chain
	short    func(pps float64, attempt int) bool
	attempts map[float64]int
}

func (g *shortGen) trial(ctx context.Context, pps float64) (Outcome, error) {
	o, err := g.c.trial(ctx, pps)
	a := g.attempts[pps]
	g.attempts[pps]++
	if err != nil || pps == 0 || !g.short(pps, a) {
		return o, err
	}
	o.Offered, o.Sent, o.Received, o.Skipped = o.Offered/2, o.Sent/2, o.Received/2, o.Sent-o.Sent/2
	return o, nil
}

// TestSearchShortTrials: a trial whose generator fell short moves no bound and is repeated; a
// rate still short after the repetitions is out of the generator's reach and the search goes
// on below it, converging where the chain's loss lies below that rate and reporting a lower
// bound (ErrGeneratorShort) where it does not; without the rule (ShortRepeats 0) a short
// trial's low offered rate moves the bound (the fault the rule removes); a generator that is
// never short sees the same search either way.
func TestSearchShortTrials(t *testing.T) {
	c := chain{capacity: 400e3, soft: 2e3, genMax: 1e6}
	above := func(r float64) func(float64, int) bool { return func(p float64, _ int) bool { return p > r } }
	cases := []struct {
		name    string
		short   func(pps float64, attempt int) bool
		repeats int
		// want: "right" (NDR within 2 precisions below capacity, converged), "misled" (NDR
		// below 90 % of capacity), "bound" (ErrGeneratorShort: NDR a lower bound below
		// capacity).
		want    string
		invalid bool // some step Invalid
		shortAt bool // some rate out of reach
	}{
		{"held off once above capacity, repeated", func(p float64, a int) bool { return p > c.capacity && a == 0 }, 2, "right", true, false},
		{"held off once below capacity, repeated", func(p float64, a int) bool { return p < c.capacity && a == 0 }, 2, "right", true, false},
		{"held off once above capacity, taken as it is", func(p float64, a int) bool { return p > c.capacity && a == 0 }, 0, "misled", false, false},
		{"out of reach above 1.5 x capacity: loss found below", above(1.5 * c.capacity), 2, "right", true, true},
		{"out of reach above 0.5 x capacity: no loss below", above(0.5 * c.capacity), 2, "bound", true, true},
		{"never short", func(float64, int) bool { return false }, 2, "right", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Search{NDRLoss: 0, PDRLoss: 0.001, Precision: 0.01, MaxTrials: 20, Shortfall: 0.02, ShortRepeats: tc.repeats}
			g := &shortGen{c: c, short: tc.short, attempts: map[float64]int{}}
			res, err := s.Run(context.Background(), g.trial)
			invalid := 0
			for _, st := range res.Steps {
				if st.Invalid {
					invalid++
				}
				if tc.repeats > 0 && st.GeneratorShort && !st.Invalid && st.Iteration > 1 {
					t.Errorf("step %d short of %.0f pps yet taken as valid", st.Iteration, st.Requested)
				}
			}
			if (invalid > 0) != tc.invalid {
				t.Errorf("%d invalid steps, want some: %v", invalid, tc.invalid)
			}
			if (res.ShortAt > 0) != tc.shortAt {
				t.Errorf("short at %.0f pps, want a rate out of reach: %v", res.ShortAt, tc.shortAt)
			}
			if len(res.Steps) > s.MaxTrials*(s.ShortRepeats+1) {
				t.Errorf("%d steps, want <= %d", len(res.Steps), s.MaxTrials*(s.ShortRepeats+1))
			}
			switch tc.want {
			case "right", "misled":
				if err != nil || res.Short {
					t.Fatalf("err %v, short %v", err, res.Short)
				}
				right := res.NDRConverged && res.NDR <= c.capacity*(1+s.Precision) && res.NDR >= c.capacity*(1-2*s.Precision)
				if right != (tc.want == "right") {
					t.Errorf("ndr %.0f (converged %v), want %s of capacity %.0f", res.NDR, res.NDRConverged, tc.want, c.capacity)
				}
				if tc.want == "misled" && res.NDR >= 0.9*c.capacity {
					t.Errorf("ndr %.0f: the short trial did not move the bound, the model tests nothing", res.NDR)
				}
				if tc.want == "right" && (res.NDRHi <= res.NDR || res.NDRHi > 1.5*c.capacity) {
					t.Errorf("lowest loss %.0f pps, want a loss of the chain's above ndr %.0f", res.NDRHi, res.NDR)
				}
			case "bound":
				if !errors.Is(err, ErrGeneratorShort) || !res.Short || res.NDRConverged || res.PDRConverged || res.NDRHi != 0 {
					t.Fatalf("want a lower bound set by the generator, got err %v, %+v", err, res)
				}
				// Converged up to the rate out of reach: the NDR is just below it.
				if res.NDR > res.ShortAt || res.NDR < res.ShortAt*(1-2*s.Precision) || res.ShortAt > 0.5*c.capacity*1.01 {
					t.Errorf("ndr %.0f, out of reach at %.0f: want the NDR within 2 precisions below it, and it at 0.5 x capacity", res.NDR, res.ShortAt)
				}
			}
		})
	}
	if _, err := (Search{Precision: 0.01, MaxTrials: 1, ShortRepeats: -1}).Run(context.Background(), chain{}.trial); err == nil {
		t.Error("short repeats -1 accepted")
	}
}
