package bench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/results"
	nsrt "github.com/sfclab/sfclab/runtime/netns"
)

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED LOUDLY: bench tests deploy real labs and need root")
	}
}

// writeExperiment writes an experiment and the labs it names into a temporary directory.
func writeExperiment(t *testing.T, exp string, labs map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range labs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := filepath.Join(dir, "exp.yaml")
	if err := os.WriteFile(f, []byte(exp), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

const baseLab = "name: t-bb\nendpoints: {client: {}, server: {}}\nchains: [{from: client, to: server}]\n"
const fwLab = "name: t-bf\nendpoints: {client: {}, server: {}}\nfunctions: {fw: {kind: firewall, params: {masquerade: true}}}\nchains: [{from: client, to: server, hops: [fw]}]\n"

// A firewall that drops iperf3's port: its trials fail, and must be recorded as failed.
const deadLab = "name: t-bd\nendpoints: {client: {}, server: {}}\nfunctions: {fw: {kind: firewall, params: {rules: [{action: reject, protocol: tcp, port: 5201}]}}}\nchains: [{from: client, to: server, hops: [fw]}]\n"

const smallExp = `name: t-small
repetitions: 2
scenarios:
  - {name: base, lab: base.yaml}
  - {name: fw, lab: fw.yaml}
probes:
  iperf3: {duration: 1s}
  ping: {count: 5, interval: 10ms}
  tcprtt: {connects: 5, requests: 10}
`

func runner(t *testing.T) *Runner {
	return &Runner{Deployer: &deploy.Deployer{Journal: deploy.Journal{Root: t.TempDir()}}, Version: "test", Log: t.Logf}
}

func assertNoLabs(t *testing.T, labs ...string) {
	t.Helper()
	for _, l := range labs {
		if left, _ := (nsrt.Runtime{}).Leftovers(context.Background(), l); len(left) > 0 {
			t.Errorf("lab %s left %v", l, left)
		}
	}
}

// TestBenchRunsAndReportsFromSamples runs a small experiment for real and checks the report
// is recomputed identically from the stored samples alone.
func TestBenchRunsAndReportsFromSamples(t *testing.T) {
	requireRoot(t)
	e, err := experiment.Load(writeExperiment(t, smallExp, map[string]string{"base.yaml": baseLab, "fw.yaml": fwLab}))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "run")
	outcome, err := runner(t).Run(context.Background(), e, out, Files{"experiment.yaml": []byte(smallExp)})
	if err != nil {
		t.Fatal(err)
	}
	assertNoLabs(t, "t-bb", "t-bf")
	if !outcome.Complete || outcome.Trials != 4 || outcome.Failed != 0 {
		t.Fatalf("outcome = %+v", outcome)
	}
	store, err := results.Open(filepath.Join(out, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	samples, _ := store.Samples()
	store.Close()
	count := map[string]int{}
	for _, s := range samples {
		count[s.Probe+"/"+s.Metric]++
		if s.Scenario == "" || s.Trial == 0 || s.Experiment != "t-small" {
			t.Fatalf("sample without its experiment/scenario/trial: %+v", s)
		}
	}
	for key, want := range map[string]int{"iperf3/throughput": 8, "ping/rtt": 20, "tcprtt/rtt": 40, "tcprtt/connect": 20, "cpu/cpu_user": 10, "deploy/deploy_time": 4} {
		if count[key] != want {
			t.Errorf("%s: %d samples, want %d (all: %v)", key, count[key], want, count)
		}
	}
	if _, err := WriteReport(out, nil, []string{"base", "fw"}, "base"); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(filepath.Join(out, "report.md"))
	if _, err := WriteReport(out, nil, []string{"base", "fw"}, "base"); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(filepath.Join(out, "report.md"))
	if !bytes.Equal(first, second) || !strings.Contains(string(first), "## Throughput") {
		t.Error("report is not reproducible from the stored samples")
	}
	if _, err := os.Stat(filepath.Join(out, "inputs", "experiment.yaml")); err != nil {
		t.Error("experiment file not kept with the results")
	}
	// A second run into the same directory is refused, not mixed in.
	if _, err := runner(t).Run(context.Background(), e, out, nil); err == nil {
		t.Error("second run into the same directory accepted")
	}
}

// TestBenchFailedTrialIsRecorded: a trial whose probe fails is stored as failed with its
// error, and the other scenario still runs.
func TestBenchFailedTrialIsRecorded(t *testing.T) {
	requireRoot(t)
	exp := strings.Replace(strings.Replace(smallExp, "repetitions: 2", "repetitions: 1", 1), "fw.yaml", "dead.yaml", 1)
	e, err := experiment.Load(writeExperiment(t, exp, map[string]string{"base.yaml": baseLab, "dead.yaml": deadLab}))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "run")
	outcome, err := runner(t).Run(context.Background(), e, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	assertNoLabs(t, "t-bb", "t-bd")
	if outcome.Failed != 1 || outcome.Trials != 2 {
		t.Fatalf("outcome = %+v, want 1 of 2 trials failed", outcome)
	}
	store, _ := results.Open(filepath.Join(out, "results.db"))
	defer store.Close()
	trials, _ := store.Trials()
	var failed *results.Trial
	for i := range trials {
		if trials[i].Status == results.TrialFailed {
			failed = &trials[i]
		}
	}
	if failed == nil || failed.Scenario != "fw" || failed.Error == "" {
		t.Fatalf("trials = %+v", trials)
	}
	t.Logf("failed trial recorded: %s", failed.Error)
}

// TestBenchInterrupted: cancelling during a run stops it, destroys the lab, keeps the samples
// and marks the run incomplete.
func TestBenchInterrupted(t *testing.T) {
	requireRoot(t)
	e, err := experiment.Load(writeExperiment(t, smallExp, map[string]string{"base.yaml": baseLab, "fw.yaml": fwLab}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := runner(t)
	r.Progress = func(done, total int, label string) {
		if done == 1 {
			cancel() // Ctrl-C while the second trial starts
		}
	}
	out := filepath.Join(t.TempDir(), "run")
	outcome, err := r.Run(ctx, e, out, nil)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	assertNoLabs(t, "t-bb", "t-bf")
	if outcome == nil || outcome.Complete {
		t.Fatalf("outcome = %+v, want incomplete", outcome)
	}
	store, _ := results.Open(filepath.Join(out, "results.db"))
	defer store.Close()
	run, _ := store.Run()
	samples, _ := store.Samples()
	if run.Complete || len(samples) == 0 {
		t.Errorf("run complete=%v with %d samples; want incomplete with the first trial's samples", run.Complete, len(samples))
	}
	if _, err := WriteReport(out, nil, nil, ""); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(out, "report.md"))
	if !strings.Contains(string(md), "incomplete") {
		t.Error("report of an interrupted run does not say it is incomplete")
	}
}
