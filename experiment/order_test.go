package experiment

import (
	"fmt"
	"slices"
	"testing"
)

// TestOrderBalanced: over one cycle of repetitions (n, or 2n for odd n) every scenario runs
// once per position as often as every other, and every ordered pair of neighbours occurs
// equally often (a Williams design); repetition 1 keeps the file's order first.
func TestOrderBalanced(t *testing.T) {
	for n := 1; n <= 7; n++ {
		rows := n
		if n%2 == 1 {
			rows = 2 * n
		}
		pos := map[[2]int]int{}
		pairs := map[[2]int]int{}
		for rep := 1; rep <= rows; rep++ {
			o := Order(n, rep)
			s := slices.Clone(o)
			slices.Sort(s)
			for i := range s {
				if s[i] != i {
					t.Fatalf("n=%d rep %d: %v is not a permutation", n, rep, o)
				}
			}
			for i, x := range o {
				pos[[2]int{x, i}]++
				if i > 0 {
					pairs[[2]int{o[i-1], x}]++
				}
			}
		}
		for k, c := range pos {
			if c != rows/n {
				t.Errorf("n=%d: scenario %d in position %d %d times, want %d", n, k[0], k[1], c, rows/n)
			}
		}
		if n > 1 {
			for k, c := range pairs {
				if c != rows/n {
					t.Errorf("n=%d: %d followed by %d %d times, want %d", n, k[0], k[1], c, rows/n)
				}
			}
			if len(pairs) != n*(n-1) {
				t.Errorf("n=%d: %d neighbour pairs, want all %d", n, len(pairs), n*(n-1))
			}
		}
		if !slices.Equal(Order(n, rows+1), Order(n, 1)) || Order(n, 1)[0] != 0 {
			t.Errorf("n=%d: cycle does not repeat or repetition 1 does not start with the first scenario: %v", n, Order(n, 1))
		}
	}
	if got := fmt.Sprint(Order(4, 1), Order(4, 2)); got != "[0 1 3 2] [1 2 0 3]" {
		t.Errorf("Order(4, 1..2) = %s", got)
	}
}

// TestScenarioOrderFixed: order: fixed keeps the file's order in every repetition.
func TestScenarioOrderFixed(t *testing.T) {
	e := &Experiment{Scenarios: []*Scenario{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	names := func(ss []*Scenario) (out []string) {
		for _, s := range ss {
			out = append(out, s.Name)
		}
		return out
	}
	if got := names(e.ScenarioOrder(2)); slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("balanced repetition 2 = %v, want it rotated", got)
	}
	e.Order = OrderFixed
	for rep := 1; rep <= 3; rep++ {
		if got := names(e.ScenarioOrder(rep)); !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Errorf("fixed repetition %d = %v", rep, got)
		}
	}
}
