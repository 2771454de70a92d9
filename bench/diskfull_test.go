package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/results"
)

// TestBenchStopsWhenDiskFills runs an experiment whose output directory is a small tmpfs that
// fills up after the first trial: the run stops with an error that says so, the lab of the trial
// that could not be stored is destroyed, and the first trial's samples stay readable.
func TestBenchStopsWhenDiskFills(t *testing.T) {
	requireRoot(t)
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("SKIPPED LOUDLY: cannot mount a tmpfs for the full disk: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	const exp = `name: t-full
repetitions: 3
scenarios:
  - {name: base, lab: base.yaml}
probes:
  ping: {count: 5, interval: 10ms}
`
	lab := strings.Replace(baseLab, "name: t-bb", "name: t-bfull", 1)
	e, err := experiment.Load(writeExperiment(t, exp, map[string]string{"base.yaml": lab}))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(mnt, "run")
	filler := filepath.Join(mnt, "filler")
	r := runner(t)
	r.Progress = func(done, _ int, _ string) {
		if done == 1 { // the first trial is stored: fill the disk before the second
			fill(t, filler)
		}
	}
	_, err = r.Run(context.Background(), e, out, nil)
	if err == nil {
		t.Fatal("run on a full disk succeeded")
	}
	if !errors.Is(err, syscall.ENOSPC) && !strings.Contains(err.Error(), "full") {
		t.Errorf("error does not say the disk is full: %v", err)
	}
	if !strings.Contains(err.Error(), "trial 2 of base") || !strings.Contains(err.Error(), out) {
		t.Errorf("error does not say which trial failed and where the rest is: %v", err)
	}
	assertNoLabs(t, "t-bfull")
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	store, err := results.Open(filepath.Join(out, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	samples, err := store.Samples()
	if err != nil {
		t.Fatal(err)
	}
	trials := map[int]int{}
	for _, s := range samples {
		trials[s.Trial]++
	}
	if trials[1] == 0 || trials[2] != 0 || trials[3] != 0 {
		t.Errorf("stored samples per trial = %v, want trial 1's only", trials)
	}
}

// fill writes path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for range 1 << 12 { // 256 MiB at most: bounded even if the mount were larger
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			return
		}
	}
	t.Fatalf("fill %s: the disk never filled", path)
}
