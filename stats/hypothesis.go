package stats

import (
	"fmt"
	"math"
	"slices"
)

// Method names reported in TestResult.Method.
const (
	// MethodExact marks a p-value from the exact null distribution.
	MethodExact = "exact"
	// MethodNormalTie marks a p-value from the normal approximation whose
	// variance is corrected for ties (no continuity correction).
	MethodNormalTie = "normal approximation with tie correction"
	// MethodNormalTieContinuity marks a p-value from the normal
	// approximation with tie-corrected variance and a continuity correction
	// of 0.5.
	MethodNormalTieContinuity = "normal approximation with tie correction and continuity correction"
)

// TestResult is the outcome of a two-sided hypothesis test: the test
// statistic, its p-value, and how the p-value was obtained (one of
// MethodExact, MethodNormalTie or MethodNormalTieContinuity).
type TestResult struct {
	Statistic float64
	PValue    float64
	Method    string
}

// MannWhitneyU performs the two-sided Mann-Whitney U (Wilcoxon rank-sum)
// test of independent samples x and y, as scipy.stats.mannwhitneyu does
// with its defaults (alternative="two-sided", use_continuity=True,
// method="auto").
//
// Statistic is U of x: R_x - n_x(n_x+1)/2 where R_x is the sum of the
// mid-ranks of x in the pooled sample. The p-value is exact (from the exact
// null distribution of U, twice the upper tail of max(U_x, U_y), capped at
// 1) when at least one sample has at most 8 observations and the pooled
// sample has no ties — the rule of SciPy 1.10 "auto", which is exact unless
// both samples exceed 8 or there are ties. Otherwise it is the normal
// approximation with tie-corrected variance and continuity correction 0.5.
//
// It returns an error wrapping ErrTooFewSamples if x or y is empty and
// ErrNaN if either contains NaN. ±Inf are ranked like any other value.
func MannWhitneyU(x, y []float64) (TestResult, error) {
	nan := TestResult{Statistic: math.NaN(), PValue: math.NaN()}
	if len(x) == 0 || len(y) == 0 {
		return nan, fmt.Errorf("run Mann-Whitney U test: %w", ErrTooFewSamples)
	}
	if checkNaN(x) != nil || checkNaN(y) != nil {
		return nan, fmt.Errorf("run Mann-Whitney U test: %w", ErrNaN)
	}
	n1, n2 := len(x), len(y)
	pooled := make([]float64, 0, n1+n2)
	pooled = append(pooled, x...)
	pooled = append(pooled, y...)
	ranks, ties := rankAverage(pooled)

	var r1 float64
	for _, r := range ranks[:n1] {
		r1 += r
	}
	fn1, fn2 := float64(n1), float64(n2)
	u1 := r1 - fn1*(fn1+1)/2
	u2 := fn1*fn2 - u1
	u := math.Max(u1, u2)

	res := TestResult{Statistic: u1}
	if (n1 <= 8 || n2 <= 8) && len(ties) == 0 {
		// Without ties U is an integer; the two-sided p-value is twice
		// P(U >= u) = P(U <= n1*n2 - u) by symmetry.
		k := n1*n2 - int(math.Round(u))
		res.PValue = clamp01(2 * mwuCDF(k, n1, n2))
		res.Method = MethodExact
		return res, nil
	}
	n := fn1 + fn2
	var tieTerm float64
	for _, t := range ties {
		ft := float64(t)
		tieTerm += ft*ft*ft - ft
	}
	s := math.Sqrt(fn1 * fn2 / 12 * ((n + 1) - tieTerm/(n*(n-1))))
	z := (u - fn1*fn2/2 - 0.5) / s
	res.PValue = clamp01(2 * normalSF(z))
	res.Method = MethodNormalTieContinuity
	return res, nil
}

// mwuCDF returns P(U <= k) for the Mann-Whitney U statistic of samples of
// sizes n1 and n2 under the null hypothesis, without ties. The number of
// arrangements with U = j is the coefficient of q^j in the Gaussian binomial
// [n1+n2 choose m]_q = prod_{i=1..m} (1 - q^(N+i)) / (1 - q^i) with
// m = min(n1, n2) and N = max(n1, n2); the product is built one factor at a
// time, truncated at degree k, so the cost is O(m*k).
func mwuCDF(k, n1, n2 int) float64 {
	if k < 0 {
		return 0
	}
	if k >= n1*n2 {
		return 1
	}
	m, big := min(n1, n2), max(n1, n2)
	c := make([]float64, k+1)
	c[0] = 1
	for i := 1; i <= m; i++ {
		// Multiply by (1 - q^(big+i)).
		for j := k; j >= big+i; j-- {
			c[j] -= c[j-big-i]
		}
		// Divide by (1 - q^i): c[j] += c[j-i], ascending.
		for j := i; j <= k; j++ {
			c[j] += c[j-i]
		}
	}
	var sum float64
	for _, v := range c {
		sum += v
	}
	return sum / binomial(n1+n2, m)
}

// binomial returns C(n, k) as a float64.
func binomial(n, k int) float64 {
	if k < 0 || k > n {
		return 0
	}
	k = min(k, n-k)
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return math.Round(r)
}

// WilcoxonSignedRank performs the two-sided Wilcoxon signed-rank test of
// paired samples x and y on the differences d = x - y, as
// scipy.stats.wilcoxon does with its defaults (zero_method="wilcox",
// correction=False, alternative="two-sided").
//
// Zero differences are dropped. Statistic is min(W+, W-), the smaller of
// the sums of mid-ranks of |d| over positive and negative differences. The
// p-value is exact (twice the smaller tail of the exact null distribution
// of W+, capped at 1) when there are at most 50 pairs, no zero differences
// and no ties among |d|; otherwise it is the normal approximation with
// tie-corrected variance and no continuity correction.
//
// The exact/approximate choice matches SciPy 1.10 except for tied |d|
// without zeros and n <= 50: SciPy 1.10 then still applies the exact
// distribution to a truncated, non-integer W+ (SciPy >= 1.15 switches to a
// permutation test for n <= 13 and to the normal approximation above),
// whereas this function uses the tie-corrected normal approximation.
//
// It returns an error wrapping ErrLengthMismatch if the lengths differ,
// ErrTooFewSamples if they are empty, ErrNaN if x, y or a difference is NaN
// (for example Inf - Inf), and ErrAllZeroDifferences if every difference is
// zero.
func WilcoxonSignedRank(x, y []float64) (TestResult, error) {
	nan := TestResult{Statistic: math.NaN(), PValue: math.NaN()}
	if len(x) != len(y) {
		return nan, fmt.Errorf("run Wilcoxon signed-rank test: %w (%d and %d)", ErrLengthMismatch, len(x), len(y))
	}
	if len(x) == 0 {
		return nan, fmt.Errorf("run Wilcoxon signed-rank test: %w", ErrTooFewSamples)
	}
	d := make([]float64, 0, len(x))
	zeros := 0
	for i := range x {
		v := x[i] - y[i]
		if math.IsNaN(v) {
			return nan, fmt.Errorf("run Wilcoxon signed-rank test: %w", ErrNaN)
		}
		if v == 0 {
			zeros++
			continue
		}
		d = append(d, v)
	}
	if len(d) == 0 {
		return nan, fmt.Errorf("run Wilcoxon signed-rank test: %w", ErrAllZeroDifferences)
	}

	abs := make([]float64, len(d))
	for i, v := range d {
		abs[i] = math.Abs(v)
	}
	ranks, ties := rankAverage(abs)
	var rPlus, rMinus float64
	for i, v := range d {
		if v > 0 {
			rPlus += ranks[i]
		} else {
			rMinus += ranks[i]
		}
	}
	res := TestResult{Statistic: math.Min(rPlus, rMinus)}
	count := len(d)

	if len(x) <= 50 && zeros == 0 && len(ties) == 0 {
		pmf := wilcoxonPMF(count)
		r := int(math.Round(rPlus))
		var pLess, pGreater float64
		for i, p := range pmf {
			if i <= r {
				pLess += p
			}
			if i >= r {
				pGreater += p
			}
		}
		if r == (len(pmf)-1)/2 {
			res.PValue = 1
		} else {
			res.PValue = clamp01(2 * math.Min(pLess, pGreater))
		}
		res.Method = MethodExact
		return res, nil
	}

	fc := float64(count)
	mn := fc * (fc + 1) * 0.25
	se := fc * (fc + 1) * (2*fc + 1)
	for _, t := range ties {
		ft := float64(t)
		se -= 0.5 * ft * (ft*ft - 1)
	}
	se = math.Sqrt(se / 24)
	z := (res.Statistic - mn) / se
	res.PValue = clamp01(2 * normalSF(math.Abs(z)))
	res.Method = MethodNormalTie
	return res, nil
}

// wilcoxonPMF returns P(W+ = r) for r = 0..n(n+1)/2 under the null
// hypothesis for n untied, non-zero differences: each rank 1..n enters W+
// independently with probability 1/2, so the distribution is built by
// dynamic programming over the ranks.
func wilcoxonPMF(n int) []float64 {
	c := []float64{1}
	for k := 1; k <= n; k++ {
		next := make([]float64, k*(k+1)/2+1)
		m := len(c)
		for i, v := range c {
			next[i] += v * 0.5
			next[len(next)-m+i] += v * 0.5
		}
		c = next
	}
	return c
}

// KendallTauB returns Kendall's tau-b rank correlation of x and y with a
// two-sided p-value for the null hypothesis of no association, as
// scipy.stats.kendalltau does with its defaults (variant="b",
// method="auto", alternative="two-sided").
//
// Statistic is tau_b = (C - D) / sqrt((P - X) * (P - Y)) where C and D
// count concordant and discordant pairs, P = n(n-1)/2 and X, Y count pairs
// tied in x and in y. The p-value is exact (from the distribution of the
// number of inversions of a random permutation) when neither sample has
// ties and either n <= 33 or min(D, P-D) <= 1, which is SciPy 1.10's rule;
// otherwise it is the normal approximation of C - D with the tie-corrected
// variance of SciPy (Kendall 1970).
//
// It returns an error wrapping ErrLengthMismatch if the lengths differ,
// ErrTooFewSamples if n < 2 and ErrNaN if either contains NaN. If either
// sample is constant, tau is undefined: the result then has NaN Statistic
// and PValue (as SciPy returns) together with an error wrapping
// ErrConstantInput. The computation is O(n^2).
func KendallTauB(x, y []float64) (TestResult, error) {
	nan := TestResult{Statistic: math.NaN(), PValue: math.NaN()}
	if len(x) != len(y) {
		return nan, fmt.Errorf("compute Kendall tau-b: %w (%d and %d)", ErrLengthMismatch, len(x), len(y))
	}
	n := len(x)
	if n < 2 {
		return nan, fmt.Errorf("compute Kendall tau-b: %w (n=%d, need 2)", ErrTooFewSamples, n)
	}
	if checkNaN(x) != nil || checkNaN(y) != nil {
		return nan, fmt.Errorf("compute Kendall tau-b: %w", ErrNaN)
	}
	var con, dis, xtie, ytie int64
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			sx := cmpFloat(x[i], x[j])
			sy := cmpFloat(y[i], y[j])
			switch {
			case sx == 0 || sy == 0:
				if sx == 0 {
					xtie++
				}
				if sy == 0 {
					ytie++
				}
			case sx == sy:
				con++
			default:
				dis++
			}
		}
	}
	tot := int64(n) * int64(n-1) / 2
	if xtie == tot || ytie == tot {
		return nan, fmt.Errorf("compute Kendall tau-b: %w", ErrConstantInput)
	}
	cmd := float64(con - dis)
	tau := cmd / math.Sqrt(float64(tot-xtie)) / math.Sqrt(float64(tot-ytie))
	tau = math.Min(1, math.Max(-1, tau))
	res := TestResult{Statistic: tau}

	if xtie == 0 && ytie == 0 && (n <= 33 || min(dis, tot-dis) <= 1) {
		res.PValue = kendallExactP(n, tot-dis)
		res.Method = MethodExact
		return res, nil
	}
	x0, x1 := tieStats(x)
	y0, y1 := tieStats(y)
	fn := float64(n)
	m := fn * (fn - 1)
	v := (m*(2*fn+5)-x1-y1)/18 + 2*float64(xtie)*float64(ytie)/m
	if n > 2 {
		v += x0 * y0 / (9 * m * (fn - 2))
	}
	z := cmd / math.Sqrt(v)
	res.PValue = clamp01(2 * normalSF(math.Abs(z)))
	res.Method = MethodNormalTie
	return res, nil
}

// kendallExactP returns the exact two-sided p-value of Kendall's tau for n
// untied observations with c concordant pairs, following
// scipy.stats._mstats_basic._kendall_p_exact: twice the probability that a
// random permutation has at most min(c, P-c) inversions, capped at 1.
func kendallExactP(n int, c int64) float64 {
	tot := int64(n) * int64(n-1) / 2
	c = min(c, tot-c)
	switch {
	case n <= 2:
		return 1
	case c == 0:
		if n >= 171 {
			return 0
		}
		return clamp01(2 / factorial(n))
	case c == 1:
		if n >= 172 {
			return 0
		}
		return clamp01(2 / factorial(n-1))
	case 4*c == int64(n)*int64(n-1):
		return 1
	}
	// counts[k] = number of permutations of j elements with exactly k
	// inversions (k <= c), built for j = 1..n; for n >= 171 the counts are
	// kept divided by j! to stay finite.
	scaled := n >= 171
	counts := make([]float64, c+1)
	counts[0], counts[1] = 1, 1
	prev := make([]float64, c+1)
	for j := 3; j <= n; j++ {
		for k := 1; k <= int(c); k++ {
			counts[k] += counts[k-1]
		}
		if scaled {
			for k := range counts {
				counts[k] /= float64(j)
			}
		}
		if int64(j) <= c {
			copy(prev, counts)
			for k := j; k <= int(c); k++ {
				counts[k] -= prev[k-j]
			}
		}
	}
	var sum float64
	for _, v := range counts {
		sum += v
	}
	if scaled {
		return clamp01(sum)
	}
	return clamp01(2 * sum / factorial(n))
}

// tieStats returns sum t(t-1)(t-2) and sum t(t-1)(2t+5) over the sizes t
// of the groups of equal values in xs.
func tieStats(xs []float64) (s0, s1 float64) {
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	for i := 0; i < len(sorted); {
		j := i + 1
		for j < len(sorted) && sorted[j] == sorted[i] {
			j++
		}
		t := float64(j - i)
		if t > 1 {
			s0 += t * (t - 1) * (t - 2)
			s1 += t * (t - 1) * (2*t + 5)
		}
		i = j
	}
	return s0, s1
}

// rankAverage returns the 1-based mid-ranks of xs (ties get the average of
// the ranks they span, like scipy.stats.rankdata's default) and the sizes
// of the tie groups with more than one member. xs must not contain NaN.
func rankAverage(xs []float64) (ranks []float64, ties []int) {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmpFloat(xs[a], xs[b]) })
	ranks = make([]float64, len(xs))
	for i := 0; i < len(idx); {
		j := i + 1
		for j < len(idx) && xs[idx[j]] == xs[idx[i]] {
			j++
		}
		// Positions i..j-1 hold ranks i+1..j; their mean is (i+1+j)/2.
		r := float64(i+1+j) / 2
		for k := i; k < j; k++ {
			ranks[idx[k]] = r
		}
		if j-i > 1 {
			ties = append(ties, j-i)
		}
		i = j
	}
	return ranks, ties
}

// normalSF is the standard normal survival function P(Z > z), accurate in
// the upper tail.
func normalSF(z float64) float64 {
	return 0.5 * math.Erfc(z/math.Sqrt2)
}

func factorial(n int) float64 {
	f := 1.0
	for i := 2; i <= n; i++ {
		f *= float64(i)
	}
	return f
}

// cmpFloat compares two non-NaN values: -1, 0 or +1.
func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func clamp01(p float64) float64 {
	return math.Min(1, math.Max(0, p))
}
