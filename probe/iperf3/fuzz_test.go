package iperf3

import (
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/fuzzseed"
)

var updateSeeds = flag.Bool("update-seeds", false, "write missing fuzz seeds from the test tables into testdata/fuzz")

// badOutputs are outputs Parse must refuse; each is also a seed of FuzzParse.
var badOutputs = []string{"", "iperf3: error - unable to connect", `{"start":{},"end":{}}`, "null", `{"end":{"sum":null}}`}

// FuzzParse feeds any bytes to the iperf3 -J parser. It must never panic;
// it returns a result or an error, never both; an accepted result gives
// finite samples. Seeds: testdata/fuzz/FuzzParse (badOutputs) and every
// captured output in testdata.
//
//	go test ./probe/iperf3 -run '^$' -fuzz FuzzParse -fuzztime 60s
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		r, err := Parse(out)
		if err != nil {
			var ie *Error
			if errors.As(err, &ie) && ie.Msg == "" {
				t.Fatal("iperf3 error without a message")
			}
			if r != (Result{}) {
				t.Fatalf("Parse returned %+v and the error %v", r, err)
			}
			return
		}
		for _, s := range Samples(r, time.Unix(0, 0)) {
			if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
				t.Fatalf("sample %+v is not finite", s)
			}
		}
		if r.Measured < 0 || r.Omitted < 0 || math.IsNaN(r.Measured) || math.IsNaN(r.Omitted) {
			t.Fatalf("measured %v, omitted %v seconds", r.Measured, r.Omitted)
		}
		// The transfer window lies within the client's run, whatever the report says.
		started := time.Unix(r.Timesecs, 0).Add(-time.Second)
		exited := started.Add(3 * time.Second)
		if w, ok := r.Transfer(started, exited); ok && (w.From.Before(started) || w.To.After(exited) || w.To.Before(w.From)) {
			t.Fatalf("transfer %v..%v outside the client's run %v..%v", w.From, w.To, started, exited)
		}
	})
}

// TestFuzzSeedsCoverBadOutputs checks that every bad output is a committed
// seed of FuzzParse and that Parse refuses it.
func TestFuzzSeedsCoverBadOutputs(t *testing.T) {
	want := map[string][]byte{}
	for i, out := range badOutputs {
		if _, err := Parse([]byte(out)); err == nil {
			t.Errorf("Parse(%q) succeeded", out)
		}
		want[fuzzseed.Name("bad-", string(rune('a'+i)))] = []byte(out)
	}
	missing, err := fuzzseed.Sync(filepath.Join("testdata", "fuzz", "FuzzParse"), want, *updateSeeds)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("outputs not in testdata/fuzz/FuzzParse: %v; add them with go test ./probe/iperf3 -run TestFuzzSeeds -update-seeds", missing)
	}
}
