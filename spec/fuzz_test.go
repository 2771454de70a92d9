package spec_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/internal/fuzzseed"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// updateSeeds writes the test tables' bad input into testdata/fuzz:
// go test ./spec -run TestFuzzSeeds -update-seeds
var updateSeeds = flag.Bool("update-seeds", false, "write missing fuzz seeds from the test tables into testdata/fuzz")

// FuzzDecode feeds any bytes to the lab decoder and validator. Whatever the
// input, Decode must return either a lab or an error and never panic; an
// error must be a file:line message naming the file; a lab it accepts must
// validate again without errors. Seeds: testdata/fuzz/FuzzDecode (every
// bad lab of TestDecodeBad, crashers found so far) and the shipped labs.
//
//	go test ./spec -run '^$' -fuzz FuzzDecode -fuzztime 1000000x
func FuzzDecode(f *testing.F) {
	for _, glob := range []string{"../examples/*.yaml", "../experiments/labs/*.yaml", "testdata/*.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte(good))
	f.Fuzz(func(t *testing.T, data []byte) {
		lab, err := spec.Decode(data, "fuzz.yaml", kinds.Spec())
		if err != nil {
			if lab != nil {
				t.Fatalf("Decode returned a lab and the error %v", err)
			}
			var es spec.Errors
			var e *spec.Error
			if !errors.As(err, &es) && !errors.As(err, &e) {
				t.Fatalf("error %T %v is not a spec error", err, err)
			}
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if lab == nil {
			t.Fatal("Decode returned neither a lab nor an error")
		}
		if errs := spec.Validate(lab); len(errs) > 0 {
			t.Fatalf("an accepted lab does not validate again: %v", errs)
		}
	})
}

// TestFuzzSeedsCoverBadLabs checks that every bad lab of TestDecodeBad is a
// committed seed of FuzzDecode.
func TestFuzzSeedsCoverBadLabs(t *testing.T) {
	want := map[string][]byte{}
	for _, b := range badLabs(t) {
		want[fuzzseed.Name("bad-", b.name)] = []byte(b.yaml)
	}
	missing, err := fuzzseed.Sync(filepath.Join("testdata", "fuzz", "FuzzDecode"), want, *updateSeeds)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("bad labs not in testdata/fuzz/FuzzDecode: %v; add them with go test ./spec -run TestFuzzSeeds -update-seeds", missing)
	}
}
