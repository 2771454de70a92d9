package experiment

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/internal/fuzzseed"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

var updateSeeds = flag.Bool("update-seeds", false, "write missing fuzz seeds from the test tables into testdata/fuzz")

var errNoLab = errors.New("no such lab")

// memLabs returns a LabLoader that decodes the shipped labs from memory by
// base name (baseline.yaml, fw.yaml, ...), so fuzzing reads no files.
func memLabs(tb testing.TB) LabLoader {
	tb.Helper()
	labs := map[string][]byte{}
	for _, glob := range []string{"../examples/*.yaml", "../experiments/labs/*.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				tb.Fatal(err)
			}
			labs[filepath.Base(f)] = b
		}
	}
	return func(path string) (*spec.Lab, error) {
		b, ok := labs[filepath.Base(path)]
		if !ok {
			return nil, fmt.Errorf("read lab file: %s: %w", path, errNoLab)
		}
		return spec.Decode(b, path, kinds.Spec())
	}
}

// FuzzDecode feeds any bytes to the experiment decoder (labs come from
// memory). It must never panic and must return an experiment or an error
// naming the file, never both. Seeds: testdata/fuzz/FuzzDecode (every bad
// experiment of TestLoadBad) and the shipped experiments.
//
//	go test ./experiment -run '^$' -fuzz FuzzDecode -fuzztime 60s
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("../experiments/*.yaml")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	load := memLabs(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Decode(data, "fuzz.yaml", ".", load)
		if err != nil {
			if e != nil {
				t.Fatalf("Decode returned an experiment and the error %v", err)
			}
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if e == nil || len(e.Scenarios) == 0 {
			t.Fatalf("Decode accepted an experiment without scenarios: %+v", e)
		}
	})
}

// TestFuzzSeedsCoverBadExperiments checks that every bad experiment of
// TestLoadBad is a committed seed of FuzzDecode.
func TestFuzzSeedsCoverBadExperiments(t *testing.T) {
	want := map[string][]byte{}
	for _, tt := range badExperiments {
		want[fuzzseed.Name("bad-", tt.name)] = []byte(strings.ReplaceAll(tt.text, "LABDIR", "../examples"))
	}
	missing, err := fuzzseed.Sync(filepath.Join("testdata", "fuzz", "FuzzDecode"), want, *updateSeeds)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("bad experiments not in testdata/fuzz/FuzzDecode: %v; add them with go test ./experiment -run TestFuzzSeeds -update-seeds", missing)
	}
}
