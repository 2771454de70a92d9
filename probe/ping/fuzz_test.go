package ping

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/sfclab/sfclab/internal/fuzzseed"
)

var updateSeeds = flag.Bool("update-seeds", false, "write missing fuzz seeds from the test tables into testdata/fuzz")

// FuzzParse feeds any bytes to the ping output parser. It must never panic,
// every reply it reads must have a finite, non-negative RTT, and Samples
// must give one rtt sample per reply plus one loss sample. Seeds:
// testdata/fuzz/FuzzParse (every output of parseTests) and the captured run.
//
//	go test ./probe/ping -run '^$' -fuzz FuzzParse -fuzztime 60s
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("testdata/fw-20x10ms.txt"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		r := Parse(out)
		for _, rep := range r.Replies {
			if math.IsNaN(rep.RTT) || math.IsInf(rep.RTT, 0) || rep.RTT < 0 {
				t.Fatalf("reply %+v has an impossible RTT", rep)
			}
		}
		if r.Transmitted < 0 || r.Received < 0 || r.Duplicates < 0 || r.Errors < 0 {
			t.Fatalf("negative count in %+v", r)
		}
		s := Samples(r, 56)
		if len(s) != len(r.Replies)+1 || s[len(s)-1].Metric != "loss" {
			t.Fatalf("%d samples for %d replies", len(s), len(r.Replies))
		}
	})
}

// TestFuzzSeedsCoverParseTests checks that every output of parseTests is a
// committed seed of FuzzParse.
func TestFuzzSeedsCoverParseTests(t *testing.T) {
	want := map[string][]byte{}
	for _, tt := range parseTests {
		want[fuzzseed.Name("table-", tt.name)] = []byte(tt.out)
	}
	missing, err := fuzzseed.Sync(filepath.Join("testdata", "fuzz", "FuzzParse"), want, *updateSeeds)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("outputs not in testdata/fuzz/FuzzParse: %v; add them with go test ./probe/ping -run TestFuzzSeeds -update-seeds", missing)
	}
}
