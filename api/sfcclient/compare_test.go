package sfcclient

import (
	"strings"
	"testing"
)

// TestCompareTable: each length and step has both runs' means and theirs/ours; a step one
// run lacks is left out.
func TestCompareTable(t *testing.T) {
	ours := []Sample{{1, 1, "FC", 0.001}, {2, 1, "FC", 0.003}, {1, 1, "total", 0.010}, {2, 1, "total", 0.010}, {1, 1, "first_packet", 0.002}}
	theirs := []Sample{{1, 1, "FC", 0.100}, {2, 1, "FC", 0.100}, {1, 1, "total", 0.500}, {2, 1, "total", 0.500}}
	var b strings.Builder
	if err := CompareTable(&b, ours, theirs, "sfclab", "networking-sfc"); err != nil {
		t.Fatal(err)
	}
	want := `| functions | step | sfclab, ms | networking-sfc, ms | ratio networking-sfc / sfclab |
|---:|---|---:|---:|---:|
| 1 | FC | 2.000 ± 12.706 | 100.000 ± 0.000 | 50.0 |
| 1 | total | 10.000 ± 0.000 | 500.000 ± 0.000 | 50.0 |
`
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
