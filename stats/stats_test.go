package stats

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// reference mirrors testdata/reference.json, written by
// testdata/gen_reference.py with SciPy.
type reference struct {
	ScipyVersion string          `json:"scipy_version"`
	NumpyVersion string          `json:"numpy_version"`
	Summaries    []refSummary    `json:"summaries"`
	TCritical    []refTCritical  `json:"t_critical_95"`
	MannWhitneyU []refTwoSampled `json:"mannwhitneyu"`
	Wilcoxon     []refTwoSampled `json:"wilcoxon"`
	KendallTau   []refTwoSampled `json:"kendalltau"`
}

type refSummary struct {
	Name     string    `json:"name"`
	X        []float64 `json:"x"`
	N        int       `json:"n"`
	Mean     float64   `json:"mean"`
	Stdev    float64   `json:"stdev"`
	Min      float64   `json:"min"`
	Median   float64   `json:"median"`
	P99      float64   `json:"p99"`
	Max      float64   `json:"max"`
	CI95Low  *float64  `json:"ci95_low"`
	CI95High *float64  `json:"ci95_high"`
	CI95Half *float64  `json:"ci95_half"`
}

type refTCritical struct {
	DOF int     `json:"dof"`
	T   float64 `json:"t"`
}

type refTwoSampled struct {
	Name      string    `json:"name"`
	X         []float64 `json:"x"`
	Y         []float64 `json:"y"`
	Statistic float64   `json:"statistic"`
	PValue    float64   `json:"pvalue"`
	Method    string    `json:"method"` // "exact" or "asymptotic"
}

// Tolerances, relative.
const (
	// tolExact is for values computed by the same closed formula or the same
	// exact distribution as SciPy: only rounding differs.
	tolExact = 1e-9
	// tolTQuantile is for Student-t quantiles (TCritical95 and the CI
	// fields). gonum inverts its regularized incomplete beta function, SciPy
	// 1.10 uses cephes' stdtrit; neither is correctly rounded. Against the
	// closed forms for 1 and 2 degrees of freedom SciPy 1.10 is off by about
	// 2e-11 and gonum by under 1e-15, while for 5 degrees of freedom gonum is
	// off by 3.8e-10 (the largest gap seen). 1e-9 bounds both libraries'
	// errors; it is far below any effect on a confidence interval.
	tolTQuantile = 1e-9
)

func loadReference(t *testing.T) reference {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "reference.json"))
	if err != nil {
		t.Fatalf("read reference: %v", err)
	}
	var ref reference
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatalf("decode reference: %v", err)
	}
	if ref.ScipyVersion == "" {
		t.Fatalf("reference.json records no scipy version")
	}
	return ref
}

// approxEqual reports whether got and want agree to relative tolerance tol
// (absolute for values near zero).
func approxEqual(got, want, tol float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(got)
	}
	if got == want {
		return true
	}
	scale := math.Max(math.Abs(got), math.Abs(want))
	if scale < 1e-300 {
		return true
	}
	return math.Abs(got-want) <= tol*scale
}

func checkClose(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if !approxEqual(got, want, tol) {
		t.Errorf("%s = %.17g, want %.17g (rel tol %g)", what, got, want, tol)
	}
}

func checkMethod(t *testing.T, got, want string) {
	t.Helper()
	switch want {
	case "exact":
		if got != MethodExact {
			t.Errorf("method = %q, want exact", got)
		}
	case "asymptotic":
		if got != MethodNormalTie && got != MethodNormalTieContinuity {
			t.Errorf("method = %q, want a normal approximation", got)
		}
	default:
		t.Fatalf("unknown reference method %q", want)
	}
}

func TestReferenceVersion(t *testing.T) {
	ref := loadReference(t)
	t.Logf("reference from scipy %s, numpy %s", ref.ScipyVersion, ref.NumpyVersion)
	if len(ref.MannWhitneyU) < 12 || len(ref.Wilcoxon) < 12 || len(ref.KendallTau) < 12 {
		t.Errorf("reference has too few cases: %d MWU, %d Wilcoxon, %d Kendall",
			len(ref.MannWhitneyU), len(ref.Wilcoxon), len(ref.KendallTau))
	}
}

func TestSummarizeReference(t *testing.T) {
	ref := loadReference(t)
	for _, c := range ref.Summaries {
		t.Run(c.Name, func(t *testing.T) {
			s := Summarize(c.X)
			if s.N != c.N {
				t.Fatalf("N = %d, want %d", s.N, c.N)
			}
			checkClose(t, "Mean", s.Mean, c.Mean, 1e-12)
			checkClose(t, "Stdev", s.Stdev, c.Stdev, 1e-12)
			checkClose(t, "Min", s.Min, c.Min, 0)
			checkClose(t, "Max", s.Max, c.Max, 0)
			checkClose(t, "Median", s.Median, c.Median, 1e-12)
			checkClose(t, "P99", s.P99, c.P99, 1e-12)
			if c.CI95Low == nil {
				if !math.IsNaN(s.CI95Low) || !math.IsNaN(s.CI95High) || !math.IsNaN(s.CI95Half) {
					t.Errorf("CI = [%v, %v] ±%v, want NaN for n < 2", s.CI95Low, s.CI95High, s.CI95Half)
				}
				return
			}
			checkClose(t, "CI95Low", s.CI95Low, *c.CI95Low, tolTQuantile)
			checkClose(t, "CI95High", s.CI95High, *c.CI95High, tolTQuantile)
			checkClose(t, "CI95Half", s.CI95Half, *c.CI95Half, tolTQuantile)
		})
	}
}

func TestTCritical95Reference(t *testing.T) {
	ref := loadReference(t)
	for _, c := range ref.TCritical {
		checkClose(t, "TCritical95", TCritical95(c.DOF), c.T, tolTQuantile)
	}
	// Closed forms: t_{0.975,1} = tan(0.475*pi), t_{0.975,2} = 0.95/sqrt(2*0.975*0.025).
	checkClose(t, "TCritical95(1)", TCritical95(1), math.Tan(0.475*math.Pi), 1e-12)
	checkClose(t, "TCritical95(2)", TCritical95(2), 0.95/math.Sqrt(2*0.975*0.025), 1e-12)
	if !math.IsNaN(TCritical95(0)) {
		t.Errorf("TCritical95(0) = %v, want NaN", TCritical95(0))
	}
}

func TestMannWhitneyUReference(t *testing.T) {
	ref := loadReference(t)
	for _, c := range ref.MannWhitneyU {
		t.Run(c.Name, func(t *testing.T) {
			res, err := MannWhitneyU(c.X, c.Y)
			if err != nil {
				t.Fatalf("MannWhitneyU: %v", err)
			}
			checkClose(t, "U", res.Statistic, c.Statistic, 1e-12)
			checkClose(t, "p", res.PValue, c.PValue, tolExact)
			checkMethod(t, res.Method, c.Method)
			if c.Method == "asymptotic" && res.Method != MethodNormalTieContinuity {
				t.Errorf("method = %q, want %q", res.Method, MethodNormalTieContinuity)
			}
		})
	}
}

func TestWilcoxonSignedRankReference(t *testing.T) {
	ref := loadReference(t)
	for _, c := range ref.Wilcoxon {
		t.Run(c.Name, func(t *testing.T) {
			res, err := WilcoxonSignedRank(c.X, c.Y)
			if err != nil {
				t.Fatalf("WilcoxonSignedRank: %v", err)
			}
			checkClose(t, "W", res.Statistic, c.Statistic, 1e-12)
			checkClose(t, "p", res.PValue, c.PValue, tolExact)
			checkMethod(t, res.Method, c.Method)
		})
	}
}

func TestKendallTauBReference(t *testing.T) {
	ref := loadReference(t)
	for _, c := range ref.KendallTau {
		t.Run(c.Name, func(t *testing.T) {
			res, err := KendallTauB(c.X, c.Y)
			if err != nil {
				t.Fatalf("KendallTauB: %v", err)
			}
			checkClose(t, "tau", res.Statistic, c.Statistic, 1e-12)
			checkClose(t, "p", res.PValue, c.PValue, tolExact)
			checkMethod(t, res.Method, c.Method)
		})
	}
}

func TestSummarizeHandChecked(t *testing.T) {
	// xs = 2, 4, 4, 5, 7: mean 22/5 = 4.4, squared deviations sum to 13.2,
	// variance 13.2/4 = 3.3. t_{0.975,4} = 2.7764451051977987.
	s := Summarize([]float64{7, 4, 2, 5, 4})
	half := 2.7764451051977987 * math.Sqrt(3.3) / math.Sqrt(5)
	want := Summary{
		N: 5, Mean: 4.4, Stdev: math.Sqrt(3.3), Min: 2, Median: 4,
		P99: 6.92, // h = 4*0.99 = 3.96: 5 + 0.96*(7-5)
		Max: 7, CI95Low: 4.4 - half, CI95High: 4.4 + half, CI95Half: half,
	}
	if s.N != want.N {
		t.Errorf("N = %d, want %d", s.N, want.N)
	}
	for _, f := range []struct {
		name      string
		got, want float64
	}{
		{"Mean", s.Mean, want.Mean}, {"Stdev", s.Stdev, want.Stdev},
		{"Min", s.Min, want.Min}, {"Median", s.Median, want.Median},
		{"P99", s.P99, want.P99}, {"Max", s.Max, want.Max},
		{"CI95Low", s.CI95Low, want.CI95Low}, {"CI95High", s.CI95High, want.CI95High},
		{"CI95Half", s.CI95Half, want.CI95Half},
	} {
		checkClose(t, f.name, f.got, f.want, 1e-12)
	}
	// Rounded by hand: 2.2556 half-width.
	if math.Abs(s.CI95Half-2.2556) > 5e-5 {
		t.Errorf("CI95Half = %v, want about 2.2556", s.CI95Half)
	}
}

func TestSummarizeSmallAndInvalid(t *testing.T) {
	empty := Summarize(nil)
	if empty.N != 0 || !math.IsNaN(empty.Mean) || !math.IsNaN(empty.Median) || !math.IsNaN(empty.CI95Half) {
		t.Errorf("Summarize(nil) = %+v, want N 0 and NaN fields", empty)
	}
	if _, err := SummarizeChecked(nil); !errors.Is(err, ErrTooFewSamples) {
		t.Errorf("SummarizeChecked(nil) error = %v, want ErrTooFewSamples", err)
	}

	one := Summarize([]float64{3.5})
	if one.N != 1 || one.Mean != 3.5 || one.Stdev != 0 || one.Min != 3.5 || one.Max != 3.5 ||
		one.Median != 3.5 || one.P99 != 3.5 {
		t.Errorf("Summarize([3.5]) = %+v", one)
	}
	if !math.IsNaN(one.CI95Low) || !math.IsNaN(one.CI95High) || !math.IsNaN(one.CI95Half) {
		t.Errorf("Summarize([3.5]) CI = [%v, %v] ±%v, want NaN", one.CI95Low, one.CI95High, one.CI95Half)
	}

	withNaN := []float64{1, math.NaN(), 3}
	if _, err := SummarizeChecked(withNaN); !errors.Is(err, ErrNaN) {
		t.Errorf("SummarizeChecked(NaN) error = %v, want ErrNaN", err)
	}
	if s := Summarize(withNaN); s.N != 3 || !math.IsNaN(s.Mean) || !math.IsNaN(s.Max) {
		t.Errorf("Summarize(NaN) = %+v, want NaN fields", s)
	}
	if _, err := SummarizeChecked([]float64{1, math.Inf(1)}); !errors.Is(err, ErrInfinite) {
		t.Errorf("SummarizeChecked(Inf) error = %v, want ErrInfinite", err)
	}

	in := []float64{3, 1, 2}
	Summarize(in)
	if in[0] != 3 || in[1] != 1 || in[2] != 2 {
		t.Errorf("Summarize modified its input: %v", in)
	}
}

func TestPercentile(t *testing.T) {
	xs := []float64{15, 20, 35, 40, 50}
	for _, c := range []struct{ p, want float64 }{
		{0, 15}, {100, 50}, {50, 35}, {40, 29}, {25, 20}, {99, 49.6}, {10, 17},
	} {
		got, err := Percentile(xs, c.p)
		if err != nil {
			t.Fatalf("Percentile(%v): %v", c.p, err)
		}
		checkClose(t, "Percentile", got, c.want, 1e-12)
	}
	if _, err := Percentile(nil, 50); !errors.Is(err, ErrTooFewSamples) {
		t.Errorf("Percentile(nil) error = %v, want ErrTooFewSamples", err)
	}
	if _, err := Percentile(xs, 101); err == nil {
		t.Errorf("Percentile(101) returned no error")
	}
	if _, err := Percentile([]float64{1, math.NaN()}, 50); !errors.Is(err, ErrNaN) {
		t.Errorf("Percentile(NaN) error = %v, want ErrNaN", err)
	}
}

func TestDegradationAndIncrease(t *testing.T) {
	// Study numbers: throughput 29.5 Gbit/s at baseline, 19.7 Gbit/s with
	// the chain: (29.5 - 19.7) / 29.5 * 100 = 33.22 %.
	d := Degradation(29.5, 19.7)
	if math.Round(d*10)/10 != 33.2 {
		t.Errorf("Degradation(29.5, 19.7) = %v, want 33.2 %% after rounding", d)
	}
	checkClose(t, "Degradation", d, 9.8/29.5*100, 1e-12)
	checkClose(t, "Degradation gain", Degradation(10, 12), -20, 1e-12)
	checkClose(t, "Degradation none", Degradation(10, 10), 0, 0)

	checkClose(t, "Increase", Increase(10, 12.5), 25, 1e-12)
	checkClose(t, "Increase drop", Increase(40, 30), -25, 1e-12)
	checkClose(t, "Increase none", Increase(7, 7), 0, 0)
	if !math.IsInf(Increase(0, 1), 1) {
		t.Errorf("Increase(0, 1) = %v, want +Inf", Increase(0, 1))
	}
}

func TestTestsRejectBadInput(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name string
		run  func() (TestResult, error)
		want error
	}{
		{"MWU empty x", func() (TestResult, error) { return MannWhitneyU(nil, []float64{1}) }, ErrTooFewSamples},
		{"MWU empty y", func() (TestResult, error) { return MannWhitneyU([]float64{1}, nil) }, ErrTooFewSamples},
		{"MWU NaN", func() (TestResult, error) { return MannWhitneyU([]float64{1, nan}, []float64{1, 2}) }, ErrNaN},
		{"Wilcoxon empty", func() (TestResult, error) { return WilcoxonSignedRank(nil, nil) }, ErrTooFewSamples},
		{"Wilcoxon length", func() (TestResult, error) { return WilcoxonSignedRank([]float64{1}, []float64{1, 2}) }, ErrLengthMismatch},
		{"Wilcoxon NaN", func() (TestResult, error) { return WilcoxonSignedRank([]float64{1, 2}, []float64{nan, 2}) }, ErrNaN},
		{"Wilcoxon Inf-Inf", func() (TestResult, error) {
			return WilcoxonSignedRank([]float64{math.Inf(1), 2}, []float64{math.Inf(1), 1})
		}, ErrNaN},
		{"Wilcoxon all zero", func() (TestResult, error) {
			return WilcoxonSignedRank([]float64{3, 3, 3, 3}, []float64{3, 3, 3, 3})
		}, ErrAllZeroDifferences},
		{"Kendall empty", func() (TestResult, error) { return KendallTauB(nil, nil) }, ErrTooFewSamples},
		{"Kendall one", func() (TestResult, error) { return KendallTauB([]float64{1}, []float64{2}) }, ErrTooFewSamples},
		{"Kendall length", func() (TestResult, error) { return KendallTauB([]float64{1, 2}, []float64{1}) }, ErrLengthMismatch},
		{"Kendall NaN", func() (TestResult, error) { return KendallTauB([]float64{1, 2, 3}, []float64{1, nan, 3}) }, ErrNaN},
		{"Kendall constant x", func() (TestResult, error) {
			return KendallTauB([]float64{5, 5, 5, 5}, []float64{1, 2, 3, 4})
		}, ErrConstantInput},
		{"Kendall constant y", func() (TestResult, error) {
			return KendallTauB([]float64{1, 2, 3, 4}, []float64{0, 0, 0, 0})
		}, ErrConstantInput},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := c.run()
			if !errors.Is(err, c.want) {
				t.Fatalf("error = %v, want %v", err, c.want)
			}
			if !math.IsNaN(res.Statistic) || !math.IsNaN(res.PValue) {
				t.Errorf("result = %+v, want NaN statistic and p-value", res)
			}
		})
	}
}

func TestMannWhitneyUIdenticalSamples(t *testing.T) {
	res, err := MannWhitneyU([]float64{2, 2, 2}, []float64{2, 2, 2, 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Statistic != 6 || res.PValue != 1 {
		t.Errorf("identical samples: %+v, want U 6 and p 1", res)
	}
}

func TestMannWhitneyUSymmetry(t *testing.T) {
	x := []float64{1.2, 3.4, 2.2, 5.1, 0.3, 4.4}
	y := []float64{2.9, 6.1, 7.7, 5.5, 8.0, 3.9, 6.6}
	a, _ := MannWhitneyU(x, y)
	b, _ := MannWhitneyU(y, x)
	checkClose(t, "U_x + U_y", a.Statistic+b.Statistic, float64(len(x)*len(y)), 0)
	checkClose(t, "p symmetric", a.PValue, b.PValue, 1e-15)
}

// TestMWUCDFBruteForce checks the exact U distribution against enumeration
// of every split of the ranks 1..n1+n2.
func TestMWUCDFBruteForce(t *testing.T) {
	for n1 := 1; n1 <= 6; n1++ {
		for n2 := 1; n2 <= 6; n2++ {
			n := n1 + n2
			counts := make([]float64, n1*n2+1)
			total := 0.0
			for mask := 0; mask < 1<<n; mask++ {
				if popcount(mask) != n1 {
					continue
				}
				rs := 0
				for i := 0; i < n; i++ {
					if mask&(1<<i) != 0 {
						rs += i + 1
					}
				}
				counts[rs-n1*(n1+1)/2]++
				total++
			}
			cum := 0.0
			for k := 0; k <= n1*n2; k++ {
				cum += counts[k]
				checkClose(t, "mwuCDF", mwuCDF(k, n1, n2), cum/total, 1e-13)
			}
		}
	}
}

// TestWilcoxonPMFBruteForce checks the exact W+ distribution against
// enumeration of every sign pattern.
func TestWilcoxonPMFBruteForce(t *testing.T) {
	for n := 1; n <= 12; n++ {
		pmf := wilcoxonPMF(n)
		counts := make([]float64, n*(n+1)/2+1)
		for mask := 0; mask < 1<<n; mask++ {
			w := 0
			for i := 0; i < n; i++ {
				if mask&(1<<i) != 0 {
					w += i + 1
				}
			}
			counts[w]++
		}
		for w, c := range counts {
			checkClose(t, "wilcoxonPMF", pmf[w], c/float64(int(1)<<n), 1e-15)
		}
	}
}

// TestKendallExactBruteForce checks the exact Kendall p-value against
// enumeration of all permutations.
func TestKendallExactBruteForce(t *testing.T) {
	for n := 3; n <= 7; n++ {
		tot := n * (n - 1) / 2
		counts := make([]float64, tot+1) // by number of inversions
		perm := make([]int, n)
		for i := range perm {
			perm[i] = i
		}
		permute(perm, 0, func(p []int) {
			inv := 0
			for i := 0; i < n; i++ {
				for j := i + 1; j < n; j++ {
					if p[i] > p[j] {
						inv++
					}
				}
			}
			counts[inv]++
		})
		nf := factorial(n)
		for con := 0; con <= tot; con++ {
			// con concordant pairs means tot-con inversions; two-sided p is
			// twice the smaller tail, capped at 1.
			c := min(con, tot-con)
			var tail float64
			for k := 0; k <= c; k++ {
				tail += counts[k]
			}
			want := math.Min(1, 2*tail/nf)
			checkClose(t, "kendallExactP", kendallExactP(n, int64(con)), want, 1e-13)
		}
	}
}

func TestKendallPerfect(t *testing.T) {
	x := []float64{1, 2, 3, 4, 5, 6}
	res, err := KendallTauB(x, []float64{10, 20, 30, 40, 50, 60})
	if err != nil {
		t.Fatal(err)
	}
	checkClose(t, "tau", res.Statistic, 1, 1e-15)
	checkClose(t, "p", res.PValue, 2/720.0, 1e-12)
	res, err = KendallTauB(x, []float64{6, 5, 4, 3, 2, 1})
	if err != nil {
		t.Fatal(err)
	}
	checkClose(t, "tau", res.Statistic, -1, 1e-15)
	checkClose(t, "p", res.PValue, 2/720.0, 1e-12)
}

func popcount(v int) int {
	c := 0
	for ; v != 0; v &= v - 1 {
		c++
	}
	return c
}

func permute(a []int, k int, visit func([]int)) {
	if k == len(a) {
		visit(a)
		return
	}
	for i := k; i < len(a); i++ {
		a[k], a[i] = a[i], a[k]
		permute(a, k+1, visit)
		a[k], a[i] = a[i], a[k]
	}
}
