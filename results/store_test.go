package results

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var t0 = time.Date(2026, 3, 14, 9, 26, 53, 589793238, time.UTC)

func testSamples() []Sample {
	cet := time.FixedZone("CET", 3600)
	return []Sample{
		{Experiment: "fw-chain", Scenario: "baseline", Trial: 1, Probe: "iperf3", Metric: "throughput",
			Value: 29.512e9, Unit: "bit/s", Time: t0,
			Labels: map[string]string{"side": "receiver", "protocol": "tcp", "streams": "1"}},
		{Experiment: "fw-chain", Scenario: "baseline", Trial: 1, Probe: "iperf3", Metric: "throughput",
			Value: 29.6e9, Unit: "bit/s", Time: t0.Add(time.Nanosecond),
			Labels: map[string]string{"side": "sender", "protocol": "tcp", "streams": "1"}},
		{Experiment: "fw-chain", Scenario: "fw", Trial: 2, Probe: "ping", Metric: "rtt",
			Value: 0.177, Unit: "ms", Time: t0.Add(90 * time.Second).In(cet),
			Labels: map[string]string{"seq": "7"}},
		{Experiment: "fw-chain", Scenario: "fw", Trial: 2, Probe: "cpu", Metric: "cpu_system",
			Value: 0.0001, Unit: "cores", Time: t0.Add(2 * time.Minute),
			Labels: map[string]string{"node": "fw, the firewall"}},
		{Experiment: "fw-chain", Scenario: "fw-lb", Trial: 3, Probe: "tcprtt", Metric: "connect",
			Value: 1.0 / 3, Unit: "ms", Time: t0.Add(3 * time.Minute)},
	}
}

func newStore(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "results.db")
	s, err := Create(path)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return s, path
}

func sameSamples(t *testing.T, got, want []Sample) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d samples, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !g.Time.Equal(w.Time) {
			t.Errorf("sample %d: time %v, want %v", i, g.Time, w.Time)
		}
		if math.IsNaN(w.Value) {
			if !math.IsNaN(g.Value) {
				t.Errorf("sample %d: value %v, want NaN", i, g.Value)
			}
			g.Value, w.Value = 0, 0
		}
		g.Time, w.Time = time.Time{}, time.Time{}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("sample %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

func TestSamplesRoundTrip(t *testing.T) {
	s, path := newStore(t)
	want := testSamples()
	if err := s.PutSamples(want[:2]); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSamples(want[2:]); err != nil {
		t.Fatal(err)
	}
	extra := []Sample{
		{Experiment: "x", Scenario: "s", Trial: 1, Probe: "p", Metric: "nan", Value: math.NaN(), Unit: "ms"},
		{Experiment: "x", Scenario: "s", Trial: 1, Probe: "p", Metric: "inf", Value: math.Inf(1), Unit: "ms",
			Labels: map[string]string{}},
	}
	if err := s.PutSamples(extra); err != nil {
		t.Fatal(err)
	}
	want = append(want, extra...)
	want[len(want)-1].Labels = nil // empty labels come back as nil
	if err := s.PutSamples(nil); err != nil {
		t.Fatalf("PutSamples(nil): %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	got, err := s.Samples()
	if err != nil {
		t.Fatal(err)
	}
	sameSamples(t, got, want)
	if got[2].Time.Location() != time.UTC {
		t.Errorf("times should come back in UTC, got %v", got[2].Time.Location())
	}
}

func TestTrialsRoundTrip(t *testing.T) {
	s, path := newStore(t)
	trials := []Trial{
		{Experiment: "fw-chain", Scenario: "baseline", Trial: 1, Status: TrialOK, Started: t0, Ended: t0.Add(31 * time.Second)},
		{Experiment: "fw-chain", Scenario: "fw", Trial: 2, Status: "running", Started: t0.Add(time.Minute)},
		{Experiment: "fw-chain", Scenario: "fw", Trial: 3, Status: TrialOK, Started: t0.Add(2 * time.Minute), Ended: t0.Add(150 * time.Second)},
	}
	for _, tr := range trials {
		if err := s.PutTrial(tr); err != nil {
			t.Fatal(err)
		}
	}
	// The second trial fails: putting it again updates it in place.
	trials[1].Status = TrialFailed
	trials[1].Error = "iperf3: unable to connect to server: Connection refused"
	trials[1].Ended = t0.Add(65*time.Second + 123456789)
	if err := s.PutTrial(trials[1]); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Trials()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(trials) {
		t.Fatalf("got %d trials, want %d: %+v", len(got), len(trials), got)
	}
	for i := range trials {
		g, w := got[i], trials[i]
		if !g.Started.Equal(w.Started) || !g.Ended.Equal(w.Ended) {
			t.Errorf("trial %d: times %v..%v, want %v..%v", i, g.Started, g.Ended, w.Started, w.Ended)
		}
		g.Started, g.Ended, w.Started, w.Ended = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if g != w {
			t.Errorf("trial %d: got %+v, want %+v", i, g, w)
		}
	}
	if !got[1].Ended.Equal(t0.Add(65*time.Second + 123456789)) {
		t.Errorf("nanoseconds lost: %v", got[1].Ended)
	}
}

func TestRunRoundTrip(t *testing.T) {
	s, path := newStore(t)
	if _, err := s.Run(); !errors.Is(err, ErrNoRun) {
		t.Fatalf("Run on an empty store: %v, want ErrNoRun", err)
	}
	r := Run{Experiment: "fw-chain", Study: "A", Started: t0, Complete: false,
		Env: map[string]string{"kernel": "6.8.0-45-generic", "cores": "2", "iperf3": "3.16", "sfclab": "v0.1.0"}}
	if err := s.PutRun(r); err != nil {
		t.Fatal(err)
	}
	r.Ended = t0.Add(15 * time.Minute)
	r.Complete = true
	if err := s.PutRun(r); err != nil { // replaces the single row
		t.Fatal(err)
	}
	s.Close()

	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Run()
	if err != nil {
		t.Fatal(err)
	}
	if !got.Started.Equal(r.Started) || !got.Ended.Equal(r.Ended) {
		t.Errorf("times %v..%v, want %v..%v", got.Started, got.Ended, r.Started, r.Ended)
	}
	got.Started, got.Ended, r.Started, r.Ended = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("got %+v, want %+v", got, r)
	}
	var n int
	if err := s.db.QueryRow("SELECT count(*) FROM run").Scan(&n); err != nil || n != 1 {
		t.Errorf("run rows = %d (%v), want 1", n, err)
	}
}

func TestCreateOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing.db")); err == nil {
		t.Error("Open of a missing file succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !os.IsNotExist(err) {
		t.Errorf("Open created the missing file: %v", err)
	}
	s, path := newStore(t)
	s.Close()
	if _, err := Create(path); err == nil {
		t.Error("Create over an existing store succeeded")
	}
	if s, err := Open(path); err != nil {
		t.Errorf("existing store damaged by the failed Create: %v", err)
	} else {
		s.Close()
	}
	other := filepath.Join(dir, "other.db")
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(other); err == nil || !strings.Contains(err.Error(), "schema version") {
		t.Errorf("Open of an empty file: %v, want a schema version error", err)
	}
}

func TestPutSamplesAtomic(t *testing.T) {
	s, _ := newStore(t)
	defer s.Close()
	if err := s.PutSamples(testSamples()[:1]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`CREATE TRIGGER no_bad BEFORE INSERT ON samples WHEN NEW.metric = 'bad'
		BEGIN SELECT RAISE(ABORT, 'bad metric'); END`); err != nil {
		t.Fatal(err)
	}
	batch := testSamples()
	batch[3].Metric = "bad"
	if err := s.PutSamples(batch); err == nil {
		t.Fatal("PutSamples with a failing row succeeded")
	}
	got, err := s.Samples()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Errorf("after a failed batch %d samples are stored, want 1 (the batch must roll back)", len(got))
	}
}

func TestWriteCSVGolden(t *testing.T) {
	samples := append(testSamples(), Sample{Experiment: "fw-chain", Scenario: "fw", Trial: 1, Probe: "ping",
		Metric: "rtt", Value: math.NaN(), Unit: "ms"})
	var buf bytes.Buffer
	if err := WriteCSV(&buf, samples); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "samples.csv")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./results/ -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("CSV differs from %s:\n--- got\n%s--- want\n%s", golden, buf.Bytes(), want)
	}
}

func TestWriteJSONL(t *testing.T) {
	samples := testSamples()
	samples = append(samples, Sample{Experiment: "x", Metric: "nan", Value: math.NaN()})
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, samples); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&buf)
	var got []Sample
	for sc.Scan() {
		var x Sample
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			t.Fatalf("line %d: %v: %s", len(got)+1, err, sc.Bytes())
		}
		if strings.Contains(sc.Text(), `"metric":"nan"`) && !strings.Contains(sc.Text(), `"value":null`) {
			t.Errorf("NaN not written as null: %s", sc.Text())
		}
		got = append(got, x)
	}
	if len(got) != len(samples) {
		t.Fatalf("%d lines, want %d", len(got), len(samples))
	}
	samples[len(samples)-1].Value = 0 // null leaves the field at zero
	sameSamples(t, got, samples)
}
