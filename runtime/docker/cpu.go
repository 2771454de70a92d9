package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sfclab/sfclab/cgroup"
)

// cgroupDir is where a container's CPU accounting lives.
type cgroupDir struct {
	path string
	v2   bool
}

// containerCgroup finds the cgroup of a process: on cgroup v1 the cpuacct hierarchy's path in
// /proc/PID/cgroup (e.g. 4:cpu,cpuacct:/docker/ID) below that hierarchy's mount point, on v2
// the unified path (0::/system.slice/docker-ID.scope) below the cgroup2 mount.
func containerCgroup(pid int) (cgroupDir, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return cgroupDir{}, fmt.Errorf("find cgroup of pid %d: %w", pid, err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return cgroupDir{}, fmt.Errorf("find cgroup mounts: %w", err)
	}
	var v2path string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			v2path = f[2]
			continue
		}
		if slices.Contains(strings.Split(f[1], ","), "cpuacct") {
			if mp, root, ok := cgroupMount(string(mounts), "cgroup", "cpuacct"); ok {
				return cgroupDir{path: filepath.Join(mp, relTo(f[2], root))}, nil
			}
		}
	}
	if v2path != "" {
		if mp, root, ok := cgroupMount(string(mounts), "cgroup2", ""); ok {
			return cgroupDir{path: filepath.Join(mp, relTo(v2path, root)), v2: true}, nil
		}
	}
	return cgroupDir{}, fmt.Errorf("find cgroup of pid %d: %w", pid, cgroup.ErrNoHierarchy)
}

func relTo(path, root string) string {
	if root != "/" {
		if r, ok := strings.CutPrefix(path, root); ok {
			return r
		}
	}
	return path
}

// cgroupMount finds the mount point and root of a cgroup file system in mountinfo; for v1,
// the one whose super options include controller.
func cgroupMount(mountinfo, fstype, controller string) (mountPoint, root string, ok bool) {
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
		return unescapeOctal(a[4]), unescapeOctal(a[3]), true
	}
	return "", "", false
}

// CPU returns the CPU time the container's processes used so far (its init, `sleep`, and
// everything started with docker exec), read from its cgroup: cpuacct.usage_user and
// cpuacct.usage_sys on cgroup v1, cpu.stat on v2.
// Equivalent to: cat /sys/fs/cgroup/cpu,cpuacct/docker/ID/cpuacct.usage_{user,sys}
func (n *Node) CPU() (cgroup.Usage, error) {
	n.cgOnce.Do(func() { n.cg, n.cgErr = containerCgroup(n.PID) })
	if n.cgErr != nil {
		return cgroup.Usage{}, fmt.Errorf("read cpu of node %s: %w", n.Name, n.cgErr)
	}
	u, err := readUsage(n.cg)
	if err != nil {
		return cgroup.Usage{}, fmt.Errorf("read cpu of node %s: %w", n.Name, err)
	}
	return u, nil
}

func readUsage(d cgroupDir) (cgroup.Usage, error) {
	if d.v2 {
		kv, err := readKV(filepath.Join(d.path, "cpu.stat"))
		if err != nil {
			return cgroup.Usage{}, err
		}
		return cgroup.Usage{User: time.Duration(kv["user_usec"]) * time.Microsecond,
			System: time.Duration(kv["system_usec"]) * time.Microsecond}, nil
	}
	user, uerr := readUint(filepath.Join(d.path, "cpuacct.usage_user"))
	sys, serr := readUint(filepath.Join(d.path, "cpuacct.usage_sys"))
	if uerr == nil && serr == nil {
		return cgroup.Usage{User: time.Duration(user), System: time.Duration(sys)}, nil
	}
	kv, err := readKV(filepath.Join(d.path, "cpuacct.stat"))
	if err != nil {
		return cgroup.Usage{}, errors.Join(uerr, err)
	}
	const tick = 10 * time.Millisecond // USER_HZ 100
	return cgroup.Usage{User: time.Duration(kv["user"]) * tick, System: time.Duration(kv["system"]) * tick}, nil
}

func readUint(file string) (uint64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

func readKV(file string) (map[string]uint64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	kv := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				kv[f[0]] = v
			}
		}
	}
	return kv, nil
}

// Stats is one sample of the Docker stats API for a container: cumulative counters, in
// nanoseconds, as the engine reports them.
type Stats struct {
	Read time.Time `json:"read"`
	// CPUTotal is cpu_stats.cpu_usage.total_usage: the container's CPU time.
	CPUTotal uint64 `json:"cpu_total_ns"`
	// SystemCPU is cpu_stats.system_cpu_usage: the host's CPU time over all CPUs.
	SystemCPU uint64 `json:"system_cpu_ns"`
	// OnlineCPUs is cpu_stats.online_cpus.
	OnlineCPUs uint32 `json:"online_cpus"`
}

// ErrNoStatsDelta is CPUPercent's error when the two samples give no usable delta (the host
// counter did not advance, a counter went backwards, no CPU count): the figure is not
// available, which is not 0 %.
var ErrNoStatsDelta = errors.New("no CPU delta between the two stats samples")

// CPUPercent computes CPU use between two samples as `docker stats` does:
// cpu_delta / system_delta * online_cpus * 100 (200 = two CPUs busy). An idle container gives
// 0; samples without a usable delta give ErrNoStatsDelta (where `docker stats` prints 0 %).
func CPUPercent(prev, cur Stats) (float64, error) {
	cpuDelta := float64(cur.CPUTotal) - float64(prev.CPUTotal)
	sysDelta := float64(cur.SystemCPU) - float64(prev.SystemCPU)
	cpus := float64(cur.OnlineCPUs)
	if cpuDelta < 0 || sysDelta <= 0 || cpus == 0 {
		return math.NaN(), fmt.Errorf("compute docker stats CPU %%: %w (cpu %+.0f ns, system %+.0f ns, %v CPUs)", ErrNoStatsDelta, cpuDelta, sysDelta, cpus)
	}
	return cpuDelta / sysDelta * cpus * 100, nil
}

func statsOf(c container.CPUStats, read time.Time) Stats {
	s := Stats{Read: read, CPUTotal: c.CPUUsage.TotalUsage, SystemCPU: c.SystemUsage, OnlineCPUs: c.OnlineCPUs}
	if s.OnlineCPUs == 0 {
		s.OnlineCPUs = uint32(len(c.CPUUsage.PercpuUsage))
	}
	return s
}

// stats reads one stats record; with previous, the engine takes two samples a second apart
// and returns both (what `docker stats --no-stream` shows), otherwise one at once (one-shot).
func (n *Node) stats(ctx context.Context, previous bool) (cur, prev Stats, err error) {
	res, err := n.cli.ContainerStats(ctx, n.ID, client.ContainerStatsOptions{IncludePreviousSample: previous})
	if err != nil {
		return Stats{}, Stats{}, fmt.Errorf("read stats of container %s: %w", n.Container, err)
	}
	defer res.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil {
		return Stats{}, Stats{}, fmt.Errorf("decode stats of container %s: %w", n.Container, err)
	}
	return statsOf(s.CPUStats, s.Read), statsOf(s.PreCPUStats, s.PreRead), nil
}

// Stats takes one sample of the Docker stats API at once (one-shot); two samples taken around
// a trial give its CPU use with CPUPercent, as docker stats computes it.
// Equivalent to: curl --unix-socket /var/run/docker.sock 'http://v1.41/containers/NAME/stats?stream=false&one-shot=true'
func (n *Node) Stats(ctx context.Context) (Stats, error) {
	cur, _, err := n.stats(ctx, false)
	return cur, err
}

// StatsCPUPercent is the CPU use `docker stats --no-stream` shows for the container: the
// engine samples twice, a second apart, and the percentage is computed between them.
// Equivalent to: docker stats --no-stream --format '{{.CPUPerc}}' sfc.LAB.NODE
func (n *Node) StatsCPUPercent(ctx context.Context) (float64, error) {
	cur, prev, err := n.stats(ctx, true)
	if err != nil {
		return 0, err
	}
	return CPUPercent(prev, cur)
}

// StatsCPUPercent is Node.StatsCPUPercent for a lab's node on the default engine, for the
// bench to record beside the cgroup reading.
// Equivalent to: docker stats --no-stream --format '{{.CPUPerc}}' sfc.LAB.NODE
func StatsCPUPercent(ctx context.Context, lab, node string) (float64, error) {
	n, err := Runtime{}.OpenNode(ctx, lab, node)
	if err != nil {
		return 0, err
	}
	return n.StatsCPUPercent(ctx)
}
