package experiment

// Order returns the order in which the n scenarios run in repetition rep (1-based), as
// indexes into Scenarios: the rows of a Williams balanced Latin square, one row per
// repetition in turn. Over n repetitions (2n when n is odd) every scenario runs once in every
// position and follows every other scenario equally often, so drift on the machine and the
// carry-over of one scenario into the next average out instead of always hitting the same
// one (with a fixed order the baseline always ran first, on a cold machine).
//
// With Experiment.Order "fixed" every repetition runs in the file's order.
func Order(n, rep int) []int {
	if n <= 0 {
		return nil
	}
	// The first row 0, 1, n-1, 2, n-2, ...; row r adds r to each entry (mod n); for odd
	// n the rows n..2n-1 are the first n rows reversed.
	first := make([]int, n)
	lo, hi := 1, n-1
	for i := 1; i < n; i++ {
		if i%2 == 1 {
			first[i], lo = lo, lo+1
		} else {
			first[i], hi = hi, hi-1
		}
	}
	rows := n
	if n%2 == 1 {
		rows = 2 * n
	}
	r := ((rep-1)%rows + rows) % rows
	out := make([]int, n)
	for i := range out {
		out[i] = (first[i] + r%n) % n
	}
	if r >= n {
		for i, j := 0, n-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

// ScenarioOrder returns the scenarios in the order they run in repetition rep.
func (e *Experiment) ScenarioOrder(rep int) []*Scenario {
	if e.Order == OrderFixed {
		return e.Scenarios
	}
	out := make([]*Scenario, 0, len(e.Scenarios))
	for _, i := range Order(len(e.Scenarios), rep) {
		out = append(out, e.Scenarios[i])
	}
	return out
}

// The values of Experiment.Order.
const (
	// OrderBalanced rotates the scenarios' order per repetition (Order), the default.
	OrderBalanced = "balanced"
	// OrderFixed runs every repetition in the file's order.
	OrderFixed = "fixed"
)
