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
		{"no loss at the max rate: ndr is the max rate", chain{capacity: 2e6, soft: 1e3, genMax: 3e6}, 1e6, false, 1e6, 1e6, 1},
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
