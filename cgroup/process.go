package cgroup

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// OfProcess returns the group a process is in, wherever it is (a container's, not only one
// under sfclab's root): on cgroup v1 its path in the cpuacct hierarchy (/proc/PID/cgroup, e.g.
// 4:cpu,cpuacct:/docker/ID) below that hierarchy's mount point, on v2 its unified path
// (0::/system.slice/docker-ID.scope) below the cgroup2 mount; the mount's root (a cgroup
// namespace's) is taken off the path. Its CPU reads as any group's.
func OfProcess(pid int) (*Group, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, fmt.Errorf("find cgroup of pid %d: %w", pid, err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("find cgroup mounts: %w", err)
	}
	g, ok := processGroup(string(data), string(mounts), "cpuacct")
	if !ok {
		return nil, fmt.Errorf("find cgroup of pid %d: %w", pid, ErrNoHierarchy)
	}
	return g, nil
}

// ControllerDir returns the directory of a process's group in the hierarchy of controller
// (e.g. "memory"; on cgroup v2 the unified group) and whether it is v2.
func ControllerDir(pid int, controller string) (dir string, v2 bool, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", false, fmt.Errorf("find %s cgroup of pid %d: %w", controller, pid, err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", false, fmt.Errorf("find cgroup mounts: %w", err)
	}
	g, ok := processGroup(string(data), string(mounts), controller)
	if !ok {
		return "", false, fmt.Errorf("find %s cgroup of pid %d: %w", controller, pid, ErrNoHierarchy)
	}
	return g.dir, g.v2, nil
}

// processGroup finds the group of /proc/PID/cgroup's lines in mountinfo: on cgroup v1 in the
// hierarchy of controller, else the unified one.
func processGroup(procCgroup, mountinfo, controller string) (*Group, bool) {
	var v2path string
	for _, line := range strings.Split(procCgroup, "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			v2path = f[2]
			continue
		}
		if slices.Contains(strings.Split(f[1], ","), controller) {
			if mp, root, ok := mountOf(mountinfo, "cgroup", controller); ok {
				rel := relTo(f[2], root)
				return &Group{rel: rel, dir: filepath.Join(mp, rel)}, true
			}
		}
	}
	if v2path != "" {
		if mp, root, ok := mountOf(mountinfo, "cgroup2", ""); ok {
			rel := relTo(v2path, root)
			return &Group{rel: rel, dir: filepath.Join(mp, rel), v2: true}, true
		}
	}
	return nil, false
}

func relTo(path, root string) string {
	if root != "/" {
		if r, ok := strings.CutPrefix(path, root); ok {
			return r
		}
	}
	return path
}

// mountOf finds the mount point and root of a cgroup file system in /proc/self/mountinfo's
// text; for v1 (fstype "cgroup"), the one whose super options include controller.
func mountOf(mountinfo, fstype, controller string) (mountPoint, root string, ok bool) {
	for _, line := range strings.Split(mountinfo, "\n") {
		pre, post, found := strings.Cut(line, " - ")
		if !found {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 || b[0] != fstype {
			continue
		}
		if controller != "" && !slices.Contains(strings.Split(b[2], ","), controller) {
			continue
		}
		return unescapeMount(a[4]), unescapeMount(a[3]), true
	}
	return "", "", false
}

// ClockTicks returns USER_HZ, the unit of /proc/stat's times and of cpuacct.stat, as the
// system says it (the auxiliary vector's AT_CLKTCK; `getconf CLK_TCK` prints it), 100 when it
// cannot be read.
func ClockTicks() int64 { return clockTicks() }

// EngineStats is one reading of a container engine's CPU counters for one container (the
// Docker stats API): cumulative, as the engine reports them. The engine reads them from the
// container's group and /proc/stat; two readings give the CPU figure `docker stats` shows
// (EnginePercent).
type EngineStats struct {
	// Read is when the engine read them.
	Read time.Time
	// CPU is the container's CPU time (cpu_stats.cpu_usage.total_usage).
	CPU time.Duration
	// System is the host's CPU time over all CPUs (cpu_stats.system_cpu_usage).
	System time.Duration
	// CPUs is cpu_stats.online_cpus.
	CPUs int
}

// ErrNoStatsDelta is EnginePercent's error when the two readings give no usable delta (the
// host counter did not advance, a counter went backwards, no CPU count): the figure is not
// available, which is not 0 %.
var ErrNoStatsDelta = errors.New("no CPU delta between the two stats samples")

// EnginePercent computes CPU use between two readings as `docker stats` does:
// cpu_delta / system_delta * online_cpus * 100 (200 = two CPUs busy). An idle container gives
// 0; readings without a usable delta give NaN and ErrNoStatsDelta (where `docker stats`
// prints 0 %).
func EnginePercent(prev, cur EngineStats) (float64, error) {
	cpuDelta := float64(cur.CPU) - float64(prev.CPU)
	sysDelta := float64(cur.System) - float64(prev.System)
	cpus := float64(cur.CPUs)
	if cpuDelta < 0 || sysDelta <= 0 || cpus == 0 {
		return math.NaN(), fmt.Errorf("compute docker stats CPU %%: %w (cpu %+.0f ns, system %+.0f ns, %v CPUs)", ErrNoStatsDelta, cpuDelta, sysDelta, cpus)
	}
	return cpuDelta / sysDelta * cpus * 100, nil
}
