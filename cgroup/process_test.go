package cgroup

import (
	"errors"
	"math"
	"os"
	"testing"
	"time"
)

func TestMountOf(t *testing.T) {
	mi := `35 25 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:14 - cgroup cgroup rw,cpu,cpuacct
36 25 0:31 / /sys/fs/cgroup/memory rw,nosuid shared:15 - cgroup cgroup rw,memory
40 25 0:35 /inner /sys/fs/cgroup/unified rw shared:9 - cgroup2 cgroup2 rw
`
	if mp, root, ok := mountOf(mi, "cgroup", "cpuacct"); !ok || mp != "/sys/fs/cgroup/cpu,cpuacct" || root != "/" {
		t.Errorf("v1: %q %q %v", mp, root, ok)
	}
	if mp, _, ok := mountOf(mi, "cgroup2", ""); !ok || mp != "/sys/fs/cgroup/unified" {
		t.Errorf("v2: %q %v", mp, ok)
	}
	// v1 wins when the process has a cpuacct line; a v2-only process is found below the
	// cgroup2 mount with the mount's root taken off.
	if g, ok := processGroup("4:cpu,cpuacct:/docker/abc\n0::/inner/x.scope\n", mi, "cpuacct"); !ok || g.dir != "/sys/fs/cgroup/cpu,cpuacct/docker/abc" || g.v2 {
		t.Errorf("v1 process: %+v %v", g, ok)
	}
	if g, ok := processGroup("0::/inner/x.scope\n", mi, "cpuacct"); !ok || g.dir != "/sys/fs/cgroup/unified/x.scope" || !g.v2 {
		t.Errorf("v2 process: %+v %v", g, ok)
	}
	if _, ok := processGroup("0::/x\n", "1 2 0:3 / /proc rw - proc proc rw\n", "cpuacct"); ok {
		t.Error("found a group without a cgroup mount")
	}
}

// TestOfProcessSelf: this process's own group reads a CPU time that grows as it works.
func TestOfProcessSelf(t *testing.T) {
	g, err := OfProcess(os.Getpid())
	if err != nil {
		t.Skipf("SKIPPED LOUDLY: no cgroup hierarchy to read: %v", err)
	}
	before, err := g.CPU()
	if err != nil {
		t.Fatal(err)
	}
	for x, end := 0.0, time.Now().Add(50*time.Millisecond); time.Now().Before(end); x = math.Sqrt(x + 2) {
	}
	after, err := g.CPU()
	if err != nil {
		t.Fatal(err)
	}
	if after.Total() <= before.Total() {
		t.Errorf("cpu of %s did not grow over 50 ms of work: %v then %v", g.Path(), before, after)
	}
}

func TestEnginePercent(t *testing.T) {
	prev := EngineStats{CPU: 1e9, System: 100e9, CPUs: 2}
	cur := EngineStats{CPU: 2e9, System: 102e9, CPUs: 2, Read: time.Now()}
	// 1 s of container CPU over 2 s of host CPU time (1 s wall on 2 CPUs) = one busy CPU.
	if got, err := EnginePercent(prev, cur); got != 100 || err != nil {
		t.Errorf("EnginePercent = %v, %v; want 100", got, err)
	}
	idle := EngineStats{CPU: 1e9, System: 102e9, CPUs: 2}
	if got, err := EnginePercent(prev, idle); got != 0 || err != nil {
		t.Errorf("idle container: %v, %v; want a real 0", got, err)
	}
	// No usable delta is no figure, never an invented 0 %.
	for name, pair := range map[string][2]EngineStats{
		"backwards":         {cur, prev},
		"host not advanced": {prev, {CPU: 2e9, System: 100e9, CPUs: 2}},
		"no CPU count":      {prev, {CPU: 2e9, System: 102e9}},
	} {
		if got, err := EnginePercent(pair[0], pair[1]); !errors.Is(err, ErrNoStatsDelta) || !math.IsNaN(got) {
			t.Errorf("%s: %v, %v; want NaN and ErrNoStatsDelta", name, got, err)
		}
	}
}
