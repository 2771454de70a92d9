package stats

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// Equivalence is the outcome of TOST: Schuirmann's two one-sided t-tests that a sample's mean
// lies strictly between two bounds.
type Equivalence struct {
	// Low and High are the bounds tested (on the scale of the sample; ±Inf for an open side).
	Low, High float64
	// PLow is the one-sided p-value of H0: mean <= Low against mean > Low; PHigh that of
	// H0: mean >= High against mean < High (each Student's t with n-1 degrees of freedom).
	PLow, PHigh float64
	// P is max(PLow, PHigh): equivalence is shown at level alpha when P < alpha, which is the
	// same as the (1-2·alpha) t confidence interval of the mean lying inside (Low, High).
	P float64
	// N is the sample size.
	N int
}

// TOST tests whether the mean of xs lies strictly inside (low, high) by two one-sided
// one-sample t-tests (Schuirmann 1987). An infinite bound makes that side's p-value 0. A
// sample with no spread gets p 0 on a side its mean is strictly inside of and 1 otherwise.
//
// It returns an error wrapping ErrTooFewSamples for fewer than 2 values, ErrNaN if xs holds
// NaN, and an error when low >= high.
func TOST(xs []float64, low, high float64) (Equivalence, error) {
	e := Equivalence{Low: low, High: high, N: len(xs)}
	if len(xs) < 2 {
		return e, fmt.Errorf("tost: %w (need at least 2, got %d)", ErrTooFewSamples, len(xs))
	}
	if slices.ContainsFunc(xs, math.IsNaN) || math.IsNaN(low) || math.IsNaN(high) {
		return e, fmt.Errorf("tost: %w", ErrNaN)
	}
	if !(low < high) {
		return e, fmt.Errorf("tost: lower bound %g is not below upper bound %g", low, high)
	}
	s := Summarize(xs)
	se := s.Stdev / math.Sqrt(float64(s.N))
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(s.N - 1)}
	// side gives P(T >= (mean-bound)/se) for H0 mean <= bound (upper = false), or
	// P(T <= (mean-bound)/se) for H0 mean >= bound (upper = true).
	side := func(bound float64, upper bool) float64 {
		switch {
		case math.IsInf(bound, -1) && !upper, math.IsInf(bound, 1) && upper:
			return 0
		case se == 0:
			if (!upper && s.Mean > bound) || (upper && s.Mean < bound) {
				return 0
			}
			return 1
		}
		z := (s.Mean - bound) / se
		if upper {
			return t.CDF(z)
		}
		return t.Survival(z)
	}
	e.PLow, e.PHigh = side(low, false), side(high, true)
	e.P = math.Max(e.PLow, e.PHigh)
	return e, nil
}

// PageTrend performs Page's L test for an ordered alternative (Page 1963): blocks[i][j] is the
// observation of treatment j in block i (every block the same length k >= 3), ranked within
// each block (ties get average ranks), and L = sum over j of (j+1) times the column's rank sum.
// The alternative is that observations grow with j (for a falling trend, negate the data).
// Statistic is L; PValue is one-sided, P(L >= observed) under H0 (every within-block order
// equally likely): exact from the permutation distribution when no block has ties and k <= 8,
// otherwise the normal approximation with mean n·k(k+1)²/4 and variance n·k²(k+1)(k²-1)/144
// (no tie correction or continuity correction, as SciPy's page_trend_test).
//
// It returns an error wrapping ErrTooFewSamples with no block or k < 3, ErrLengthMismatch if
// the blocks differ in length, ErrNaN if any value is NaN.
func PageTrend(blocks [][]float64) (TestResult, error) {
	n := len(blocks)
	if n == 0 {
		return TestResult{}, fmt.Errorf("page trend test: %w (no block)", ErrTooFewSamples)
	}
	k := len(blocks[0])
	if k < 3 {
		return TestResult{}, fmt.Errorf("page trend test: %w (need at least 3 treatments, got %d)", ErrTooFewSamples, k)
	}
	var l float64
	ties := false
	for _, b := range blocks {
		if len(b) != k {
			return TestResult{}, fmt.Errorf("page trend test: %w (blocks of %d and %d treatments)", ErrLengthMismatch, k, len(b))
		}
		if slices.ContainsFunc(b, math.IsNaN) {
			return TestResult{}, fmt.Errorf("page trend test: %w", ErrNaN)
		}
		ranks, t := rankAverage(b)
		ties = ties || len(t) > 0
		for j, r := range ranks {
			l += float64(j+1) * r
		}
	}
	if !ties && k <= 8 {
		return TestResult{Statistic: l, PValue: pageExactSF(n, k, int(math.Round(l))), Method: MethodExact}, nil
	}
	fk, fn := float64(k), float64(n)
	mu := fn * fk * (fk + 1) * (fk + 1) / 4
	v := fn * fk * fk * (fk + 1) * (fk*fk - 1) / 144
	return TestResult{Statistic: l, PValue: clamp01(normalSF((l - mu) / math.Sqrt(v))), Method: MethodNormalTie}, nil
}

// pageExactSF is P(L >= l) for n blocks of k treatments with no ties: the distribution of one
// block's sum of (j+1)·rank over the k! equally likely rankings, convolved n times.
func pageExactSF(n, k, l int) float64 {
	maxL := k * (k + 1) * (2*k + 1) / 6 // every rank in its own position
	one := make([]float64, maxL+1)
	perm := make([]int, k)
	for i := range perm {
		perm[i] = i + 1
	}
	var walk func(int)
	walk = func(i int) { // every permutation of perm[i:], by swaps
		if i == k {
			s := 0
			for j, r := range perm {
				s += (j + 1) * r
			}
			one[s]++
			return
		}
		for j := i; j < k; j++ {
			perm[i], perm[j] = perm[j], perm[i]
			walk(i + 1)
			perm[i], perm[j] = perm[j], perm[i]
		}
	}
	walk(0)
	total := factorial(k)
	for i := range one {
		one[i] /= total
	}
	dist := []float64{1}
	for range n {
		next := make([]float64, len(dist)+maxL)
		for a, pa := range dist {
			if pa == 0 {
				continue
			}
			for b, pb := range one {
				next[a+b] += pa * pb
			}
		}
		dist = next
	}
	p := 0.0
	for s := l; s < len(dist); s++ {
		if s >= 0 {
			p += dist[s]
		}
	}
	return clamp01(p)
}
