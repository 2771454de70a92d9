package stats

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// equivalenceRef mirrors testdata/equivalence.json, written by testdata/gen_equivalence.py
// with SciPy 1.10.1 (ttest_1samp with alternative="greater"/"less" for TOST's two sides,
// page_trend_test for Page's L).
type equivalenceRef struct {
	Tost []struct {
		Name      string
		X         []float64
		Low, High float64
		PLow      float64 `json:"p_low"`
		PHigh     float64 `json:"p_high"`
	}
	Page []struct {
		Name   string
		Data   [][]float64
		Method string
		L, P   float64
	}
}

func loadEquivalenceRef(t *testing.T) equivalenceRef {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "equivalence.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref equivalenceRef
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	return ref
}

func TestTOSTAgainstSciPy(t *testing.T) {
	for _, c := range loadEquivalenceRef(t).Tost {
		t.Run(c.Name, func(t *testing.T) {
			e, err := TOST(c.X, c.Low, c.High)
			if err != nil {
				t.Fatal(err)
			}
			// gonum's and SciPy's t distributions differ in the last digits only.
			if !closeRel(e.PLow, c.PLow, 1e-6) || !closeRel(e.PHigh, c.PHigh, 1e-6) || e.P != math.Max(e.PLow, e.PHigh) {
				t.Errorf("TOST = %+v, want p_low %g p_high %g", e, c.PLow, c.PHigh)
			}
		})
	}
}

// TestTOSTDecides checks the decisions the verdict rests on: a 22 % drop is not equivalent to
// a 33 % one within ±10 points, a 33 % drop is; an open side passes; bad input fails.
func TestTOSTDecides(t *testing.T) {
	lo, hi := math.Log(1-0.43), math.Log(1-0.23)
	for _, tt := range []struct {
		name   string
		xs     []float64
		lo, hi float64
		equiv  bool
	}{
		{"33 % drop", []float64{math.Log(0.66), math.Log(0.67), math.Log(0.675)}, lo, hi, true},
		{"22 % drop", []float64{math.Log(0.78), math.Log(0.775), math.Log(0.785)}, lo, hi, false},
		{"33 % drop but spread", []float64{math.Log(0.5), math.Log(0.67), math.Log(0.8)}, lo, hi, false},
		{"92 % drop, open below", []float64{math.Log(0.08), math.Log(0.081), math.Log(0.079)}, math.Inf(-1), math.Log(0.18), true},
		{"no spread inside", []float64{0.1, 0.1}, 0, 1, true},
		{"no spread outside", []float64{2, 2}, 0, 1, false},
	} {
		e, err := TOST(tt.xs, tt.lo, tt.hi)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if (e.P < 0.05) != tt.equiv {
			t.Errorf("%s: %+v, want equivalent %v", tt.name, e, tt.equiv)
		}
	}
	for _, bad := range []struct {
		xs     []float64
		lo, hi float64
		want   error
	}{{[]float64{1}, 0, 2, ErrTooFewSamples}, {[]float64{1, math.NaN()}, 0, 2, ErrNaN}, {[]float64{1, 2}, 2, 0, nil}} {
		_, err := TOST(bad.xs, bad.lo, bad.hi)
		if err == nil || (bad.want != nil && !errors.Is(err, bad.want)) {
			t.Errorf("TOST(%v, %g, %g) error %v, want %v", bad.xs, bad.lo, bad.hi, err, bad.want)
		}
	}
}

func TestPageTrendAgainstSciPy(t *testing.T) {
	for _, c := range loadEquivalenceRef(t).Page {
		t.Run(c.Name, func(t *testing.T) {
			res, err := PageTrend(c.Data)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"exact": MethodExact, "asymptotic": MethodNormalTie}[c.Method]
			if res.Method != want || !closeRel(res.Statistic, c.L, 1e-12) || !closeRel(res.PValue, c.P, 1e-9) {
				t.Errorf("PageTrend = %+v, want L %g p %g (%s)", res, c.L, c.P, c.Method)
			}
		})
	}
	for _, bad := range [][][]float64{nil, {{1, 2}}, {{1, 2, 3}, {1, 2}}, {{1, 2, math.NaN()}}} {
		if _, err := PageTrend(bad); err == nil {
			t.Errorf("PageTrend(%v) gave no error", bad)
		}
	}
}

func closeRel(got, want, tol float64) bool {
	if want == 0 {
		return math.Abs(got) <= tol
	}
	return math.Abs(got-want) <= tol*math.Abs(want)
}
