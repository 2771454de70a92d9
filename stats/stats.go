// Package stats holds the pure statistics used by sfclab: descriptive
// summaries of benchmark samples (mean, standard deviation, percentiles,
// Student-t confidence intervals), relative degradation figures, and the
// non-parametric tests used to compare runs (Mann-Whitney U, Wilcoxon
// signed-rank, Kendall's tau-b).
//
// The package does no I/O. Its results are checked against SciPy (see
// testdata/gen_reference.py and testdata/reference.json): percentiles follow
// NumPy's default "linear" method (Hyndman & Fan type 7), and the hypothesis
// tests follow the two-sided defaults of scipy.stats.mannwhitneyu,
// scipy.stats.wilcoxon and scipy.stats.kendalltau, including their choice
// between exact and asymptotic p-values. Deviations are documented on each
// function.
package stats

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Sentinel errors returned (wrapped) by the functions of this package. Test
// them with errors.Is.
var (
	// ErrTooFewSamples means an input has fewer observations than the
	// computation needs (for example an empty sample).
	ErrTooFewSamples = errors.New("too few samples")
	// ErrNaN means an input contains a NaN value.
	ErrNaN = errors.New("NaN in input")
	// ErrInfinite means an input contains +Inf or -Inf where only finite
	// values are meaningful (descriptive summaries).
	ErrInfinite = errors.New("infinite value in input")
	// ErrLengthMismatch means two paired samples differ in length.
	ErrLengthMismatch = errors.New("samples differ in length")
	// ErrAllZeroDifferences means every paired difference is zero, so the
	// Wilcoxon signed-rank test has nothing to rank.
	ErrAllZeroDifferences = errors.New("all paired differences are zero")
	// ErrConstantInput means a sample has no variation at all (every value
	// identical), so a correlation is undefined.
	ErrConstantInput = errors.New("constant input")
)

// Summary is a descriptive summary of one sample.
//
// Stdev is the sample standard deviation (denominator n-1). Median and P99
// are percentiles by linear interpolation between order statistics (NumPy's
// default, Hyndman & Fan type 7). CI95Low and CI95High bound the two-sided
// 95 % confidence interval of the mean from Student's t distribution with
// n-1 degrees of freedom, and CI95Half is its half-width
// t_{0.975, n-1} * Stdev / sqrt(n).
//
// For N < 2 Stdev is 0 and the three CI fields are NaN. For N == 0 every
// float field is NaN.
type Summary struct {
	N        int
	Mean     float64
	Stdev    float64
	Min      float64
	Median   float64
	P99      float64
	Max      float64
	CI95Low  float64
	CI95High float64
	CI95Half float64
}

// Summarize returns the descriptive summary of xs (see Summary for the
// definitions). It never fails: for an empty xs it returns N == 0 and NaN in
// every float field, for a single value it returns Stdev 0 and NaN CI
// fields, and if xs contains NaN or ±Inf the float fields are NaN. Use
// SummarizeChecked to get an error instead. xs is not modified.
func Summarize(xs []float64) Summary {
	s, err := SummarizeChecked(xs)
	if err != nil {
		return nanSummary(len(xs))
	}
	return s
}

// SummarizeChecked is Summarize with input validation: it returns an error
// wrapping ErrTooFewSamples for an empty xs, ErrNaN if xs contains NaN and
// ErrInfinite if it contains ±Inf. A single value is accepted (Stdev 0, CI
// fields NaN). xs is not modified.
func SummarizeChecked(xs []float64) (Summary, error) {
	if len(xs) == 0 {
		return nanSummary(0), fmt.Errorf("summarize sample: %w", ErrTooFewSamples)
	}
	for _, v := range xs {
		if math.IsNaN(v) {
			return nanSummary(len(xs)), fmt.Errorf("summarize sample: %w", ErrNaN)
		}
		if math.IsInf(v, 0) {
			return nanSummary(len(xs)), fmt.Errorf("summarize sample: %w", ErrInfinite)
		}
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	n := len(sorted)
	s := Summary{
		N:        n,
		Mean:     stat.Mean(sorted, nil),
		Min:      sorted[0],
		Max:      sorted[n-1],
		Median:   medianSorted(sorted),
		P99:      quantileSorted(sorted, 0.99),
		CI95Low:  math.NaN(),
		CI95High: math.NaN(),
		CI95Half: math.NaN(),
	}
	if n >= 2 {
		s.Stdev = stat.StdDev(sorted, nil)
		s.CI95Half = TCritical95(n-1) * s.Stdev / math.Sqrt(float64(n))
		s.CI95Low = s.Mean - s.CI95Half
		s.CI95High = s.Mean + s.CI95Half
	}
	return s, nil
}

func nanSummary(n int) Summary {
	nan := math.NaN()
	return Summary{
		N: n, Mean: nan, Stdev: nan, Min: nan, Median: nan, P99: nan, Max: nan,
		CI95Low: nan, CI95High: nan, CI95Half: nan,
	}
}

// TCritical95 returns the two-sided 95 % critical value of Student's t
// distribution with dof degrees of freedom, i.e. its 0.975 quantile
// (12.706... for dof 1, 1.95996... as dof grows). It returns NaN for
// dof < 1.
func TCritical95(dof int) float64 {
	if dof < 1 {
		return math.NaN()
	}
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(dof)}.Quantile(0.975)
}

// Percentile returns the p-th percentile (0 <= p <= 100) of xs by linear
// interpolation between order statistics, as numpy.percentile does by
// default (Hyndman & Fan type 7): with h = (n-1)*p/100, the result is
// x[floor(h)] + (h-floor(h)) * (x[floor(h)+1] - x[floor(h)]) on the sorted
// sample. It returns an error wrapping ErrTooFewSamples for an empty xs and
// ErrNaN if xs contains NaN, and fails for p outside [0, 100]. xs is not
// modified.
func Percentile(xs []float64, p float64) (float64, error) {
	if len(xs) == 0 {
		return math.NaN(), fmt.Errorf("compute percentile: %w", ErrTooFewSamples)
	}
	if math.IsNaN(p) || p < 0 || p > 100 {
		return math.NaN(), fmt.Errorf("compute percentile: percentile %v outside [0, 100]", p)
	}
	if err := checkNaN(xs); err != nil {
		return math.NaN(), fmt.Errorf("compute percentile: %w", err)
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	return quantileSorted(sorted, p/100), nil
}

// quantileSorted is NumPy's "linear" quantile of an ascending, non-empty
// slice, including NumPy's two-sided lerp for numerical symmetry.
func quantileSorted(sorted []float64, q float64) float64 {
	n := len(sorted)
	h := float64(n-1) * q
	lo := math.Floor(h)
	i := int(lo)
	if i >= n-1 {
		return sorted[n-1]
	}
	if i < 0 {
		return sorted[0]
	}
	t := h - lo
	a, b := sorted[i], sorted[i+1]
	diff := b - a
	if t >= 0.5 {
		return b - diff*(1-t)
	}
	return a + diff*t
}

// medianSorted is the median of an ascending, non-empty slice, computed as
// numpy.median does (mean of the two middle values for even n). It equals
// the type-7 50th percentile.
func medianSorted(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// Degradation returns the relative throughput degradation, in percent, of
// value against the baseline base:
//
//	D_th = (T_base - T) / T_base * 100
//
// A positive result is a loss (for example base 29.5 and value 19.7 give
// 33.2 %), a negative one a gain. base 0 gives ±Inf or NaN.
func Degradation(base, value float64) float64 {
	return (base - value) / base * 100
}

// Increase returns the relative latency increase, in percent, of value
// against the baseline base:
//
//	K_lat = (L - L_base) / L_base * 100
//
// A positive result means the latency grew, a negative one that it shrank.
// base 0 gives ±Inf or NaN.
func Increase(base, value float64) float64 {
	return (value - base) / base * 100
}

func checkNaN(xs []float64) error {
	for _, v := range xs {
		if math.IsNaN(v) {
			return ErrNaN
		}
	}
	return nil
}
