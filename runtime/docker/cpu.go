package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sfclab/sfclab/cgroup"
)

// CPU returns the CPU time the container's processes used so far (its init, `sleep`, and
// everything started with docker exec), read from its cgroup: cpuacct.usage_user and
// cpuacct.usage_sys on cgroup v1, cpu.stat on v2.
// Equivalent to: cat /sys/fs/cgroup/cpu,cpuacct/docker/ID/cpuacct.usage_{user,sys}
func (n *Node) CPU() (cgroup.Usage, error) {
	n.cgOnce.Do(func() { n.cg, n.cgErr = cgroup.OfProcess(n.PID) })
	if n.cgErr != nil {
		return cgroup.Usage{}, fmt.Errorf("read cpu of node %s: %w", n.Name, n.cgErr)
	}
	u, err := n.cg.CPU()
	if err != nil {
		return cgroup.Usage{}, fmt.Errorf("read cpu of node %s: %w", n.Name, err)
	}
	return u, nil
}

func statsOf(c container.CPUStats, read time.Time) cgroup.EngineStats {
	s := cgroup.EngineStats{Read: read, CPU: time.Duration(c.CPUUsage.TotalUsage), System: time.Duration(c.SystemUsage), CPUs: int(c.OnlineCPUs)}
	if s.CPUs == 0 {
		s.CPUs = len(c.CPUUsage.PercpuUsage)
	}
	return s
}

// stats reads one stats record; with previous, the engine takes two samples a second apart
// and returns both (what `docker stats --no-stream` shows), otherwise one at once (one-shot).
func (n *Node) stats(ctx context.Context, previous bool) (cur, prev cgroup.EngineStats, err error) {
	res, err := n.cli.ContainerStats(ctx, n.ID, client.ContainerStatsOptions{IncludePreviousSample: previous})
	if err != nil {
		return cgroup.EngineStats{}, cgroup.EngineStats{}, fmt.Errorf("read stats of container %s: %w", n.Container, err)
	}
	defer res.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil {
		return cgroup.EngineStats{}, cgroup.EngineStats{}, fmt.Errorf("decode stats of container %s: %w", n.Container, err)
	}
	return statsOf(s.CPUStats, s.Read), statsOf(s.PreCPUStats, s.PreRead), nil
}

// EngineCPU takes one sample of the Docker stats API at once (one-shot); two samples taken
// around a trial give its CPU use with cgroup.EnginePercent, as docker stats computes it. It
// is the optional engine capability the cpu probe reads (cpu.Engine).
// Equivalent to: curl --unix-socket /var/run/docker.sock 'http://v1.41/containers/NAME/stats?stream=false&one-shot=true'
func (n *Node) EngineCPU(ctx context.Context) (cgroup.EngineStats, error) {
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
	return cgroup.EnginePercent(prev, cur)
}
