package vm_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/bench"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/runtime/vm"
)

// A guest that dies during a bench trial (its QEMU killed while ping runs through it) fails
// the trial with that reason, not only with what the probe saw, and at once: the trial stops
// its probes (ping would go on sending for its count) and says so; the trial's destroy leaves
// nothing of the lab.
func TestBenchTrialNamesDeadVM(t *testing.T) {
	requireVM(t)
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	lab := strings.Replace(routedLab, "t-vmfwd", "t-vmdead", 1)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "lab.yaml"), []byte(lab), 0o644); err != nil {
		t.Fatal(err)
	}
	exp := "name: t-vmdead\nrepetitions: 1\nscenarios:\n  - {name: vm, lab: lab.yaml}\nprobes:\n  ping: {count: 30, interval: 200ms}\n"
	if err := os.WriteFile(filepath.Join(dir, "exp.yaml"), []byte(exp), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := experiment.Load(filepath.Join(dir, "exp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	j := journal.Journal{Root: t.TempDir()}
	r := &bench.Runner{Deployer: &deploy.Deployer{Journal: j}, Version: "test", Log: t.Logf}
	killed := make(chan bool, 1)
	go func() {
		deadline := time.Now().Add(150 * time.Second) // image build and a TCG boot on a loaded host
		for time.Now().Before(deadline) {
			if st, err := j.ReadState("t-vmdead"); err == nil && st.Status == journal.StatusReady {
				time.Sleep(time.Second) // inside the ping run
				pids := vm.QEMUPids("t-vmdead")
				for _, pid := range pids {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
				killed <- len(pids) > 0
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		killed <- false
	}()
	out := filepath.Join(t.TempDir(), "run")
	outcome, err := r.Run(context.Background(), e, out, nil)
	if !<-killed {
		t.Fatal("test setup: the trial's QEMU was never killed")
	}
	if err != nil {
		t.Fatal(err)
	}
	assertNoVMLeft(t, labtest.Plan(t, lab))
	store, err := results.Open(filepath.Join(out, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	trials, _ := store.Trials()
	if outcome.Failed != 1 || len(trials) != 1 || !strings.Contains(trials[0].Error, "node fwd is down: its QEMU process is not running") {
		t.Fatalf("outcome %+v, trials %+v; want the trial failed because fwd's QEMU is gone", outcome, trials)
	}
	if stopped := "the probes were stopped when it went down"; !strings.Contains(trials[0].Error, stopped) {
		t.Errorf("trial error %q; want %q (ping's 30 requests cut short when the guest died)", trials[0].Error, stopped)
	}
	t.Logf("failed trial recorded: %s", trials[0].Error)
}
