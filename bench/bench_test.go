package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/internal/testroot"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/probe/cpu"
	"github.com/sfclab/sfclab/results"
	nsrt "github.com/sfclab/sfclab/runtime/netns"
)

func requireRoot(t testing.TB) { testroot.Require(t, "bench tests deploy real labs") }

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
	return &Runner{Deployer: &deploy.Deployer{Journal: journal.Journal{Root: t.TempDir()}}, Version: "test", Log: t.Logf}
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
	// The scenarios ran in the order recorded with the run, rotated per repetition.
	run, _ := store.Run()
	trials, _ := store.Trials()
	store.Close()
	order, ok := results.ScenarioOrder(run.Env)
	var ran, recorded []string
	for _, tr := range trials {
		ran = append(ran, fmt.Sprintf("%d:%s", tr.Trial, tr.Scenario))
	}
	for i, row := range order {
		for _, name := range row {
			recorded = append(recorded, fmt.Sprintf("%d:%s", i+1, name))
		}
	}
	if !ok || strings.Join(ran, " ") != "1:base 1:fw 2:fw 2:base" || strings.Join(recorded, " ") != strings.Join(ran, " ") {
		t.Errorf("trials ran %v, recorded order %v (%v): want repetition 2 rotated and the record to match", ran, recorded, ok)
	}
	count := map[string]int{}
	for _, s := range samples {
		count[s.Probe+"/"+s.Metric]++
		if s.Scenario == "" || s.Trial == 0 || s.Experiment != "t-small" {
			t.Fatalf("sample without its experiment/scenario/trial: %+v", s)
		}
	}
	for key, want := range map[string]int{"iperf3/throughput": 8, "ping/rtt": 20, "tcprtt/rtt": 40, "tcprtt/connect": 20, "cpu/cpu_user": 10, "cpu/window": 4, "deploy/deploy_time": 4} {
		if count[key] != want {
			t.Errorf("%s: %d samples, want %d (all: %v)", key, count[key], want, count)
		}
	}
	// Values, not only counts: each within what this host can physically give.
	bounds := map[string][2]float64{
		"iperf3/throughput":  {1e6, 1e12}, // bit/s: a live chain moves more than 1 Mbit/s, less than 1 Tbit/s
		"ping/rtt":           {0.001, 100},
		"tcprtt/rtt":         {0.001, 100},
		"tcprtt/connect":     {0.001, 1000},
		"cpu/cpu_user":       {0, float64(goruntime.NumCPU()) + 0.05}, // cores
		"cpu/cpu_system":     {0, float64(goruntime.NumCPU()) + 0.05},
		"deploy/deploy_time": {0.001, 60},
		// s: the snapshots inside a 1 s transfer read every 100 ms (0.8 s and more; less when
		// the shared host delays the sampler's reads, but at least half the transfer)
		"cpu/window": {0.5, 1.05},
	}
	for _, s := range samples {
		if s.Probe == cpu.Name && s.Metric == cpu.WindowMetric && s.Labels["bound"] != "inside" {
			t.Errorf("cpu window of %s trial %d bound %q, want inside the iperf3 transfer", s.Scenario, s.Trial, s.Labels["bound"])
		}
		if b, ok := bounds[s.Probe+"/"+s.Metric]; ok && (s.Value < b[0] || s.Value > b[1] || math.IsNaN(s.Value)) {
			t.Errorf("%s/%s of %s trial %d = %v %s, outside [%v, %v]", s.Probe, s.Metric, s.Scenario, s.Trial, s.Value, s.Unit, b[0], b[1])
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
	// Its logs outlive its lab: the iperf3 server's log, where the error says.
	keep := filepath.Join(out, FailedDir, "fw-1")
	logs, _ := filepath.Glob(filepath.Join(keep, "iperf3-server-*.log"))
	if !strings.Contains(failed.Error, "its logs are kept in "+keep) || len(logs) != 1 {
		t.Errorf("failed trial's error %q, server logs kept %v; want the iperf3 server's log in %s, named in the error", failed.Error, logs, keep)
	}
	if ents, _ := os.ReadDir(filepath.Join(out, FailedDir)); len(ents) != 1 {
		t.Errorf("%d trial log directories kept; want only the failed trial's", len(ents))
	}
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

// A balancer killed during a trial fails it with that reason, not only with what iperf3 saw.
func TestBenchTrialNamesDeadBalancer(t *testing.T) {
	requireRoot(t)
	const lbLab = "name: t-bl\nendpoints: {client: {}, server: {}}\nfunctions: {lb: {kind: l4lb, params: {impl: haproxy, port: 5201}}}\nchains: [{from: client, to: server, hops: [lb]}]\n"
	exp := "name: t-deadlb\nrepetitions: 1\nscenarios:\n  - {name: lb, lab: lb.yaml}\nprobes:\n  iperf3: {duration: 3s}\n"
	e, err := experiment.Load(writeExperiment(t, exp, map[string]string{"lb.yaml": lbLab}))
	if err != nil {
		t.Fatal(err)
	}
	r := runner(t)
	pidFile := filepath.Join(r.Deployer.Journal.NodeDir("t-bl"), "lb.haproxy.pid")
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if data, err := os.ReadFile(pidFile); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
					time.Sleep(time.Second) // inside the iperf3 run
					_ = syscall.Kill(pid, syscall.SIGKILL)
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	out := filepath.Join(t.TempDir(), "run")
	outcome, err := r.Run(context.Background(), e, out, nil)
	<-killed
	if err != nil {
		t.Fatal(err)
	}
	assertNoLabs(t, "t-bl")
	store, _ := results.Open(filepath.Join(out, "results.db"))
	defer store.Close()
	trials, _ := store.Trials()
	if outcome.Failed != 1 || len(trials) != 1 || !strings.Contains(trials[0].Error, "haproxy process") || !strings.Contains(trials[0].Error, "is gone") {
		t.Fatalf("outcome %+v, trials %+v; want the trial failed because haproxy is gone", outcome, trials)
	}
	t.Logf("failed trial recorded: %s", trials[0].Error)
}
