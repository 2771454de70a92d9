package cpu

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/results"
)

// Engine is an optional capability of a node whose container engine reports its CPU use
// itself (a Docker container, through its stats API): a Recording records the engine's figure
// (docker_cpu_percent, as `docker stats` computes it) beside the cgroup's.
type Engine interface {
	// EngineCPU reads the engine's counters for the node now.
	EngineCPU(ctx context.Context) (cgroup.EngineStats, error)
}

// Recording is a trial's CPU window under way: the cgroup and softirq sampler and, for nodes
// with an Engine, the engine's first reading.
type Recording struct {
	ctx     context.Context
	env     probe.Env
	sampler *Sampler
	first   map[string]cgroup.EngineStats
}

// StartRecording starts sampling every node's cgroup and the host's softirq and, for containers,
// the engine's stats; Stop ends it and emits the samples: cpu_user, cpu_system (cores) per
// node, softirq (cores) for the host, docker_cpu_percent (as `docker stats` computes it)
// per container, and the span the cgroup figures cover (cpu.WindowMetric). docker_cpu_percent
// covers the span between the engine's two one-shot readings, right before the iperf3
// client's run (or the HTTP grid) and right after it: the stats API is too slow to be read
// every tracking interval.
//
// self, when not "", also counts sfclab's own process as a node of that name (the HTTP load
// generator runs in it).
func StartRecording(ctx context.Context, env probe.Env, self string) (*Recording, error) {
	names := nodeNames(env.Plan)
	sampler, err := Start(env, names)
	if err != nil {
		return nil, err
	}
	if hs := cpuHosts(env.Plan); len(hs) > 0 {
		if err := sampler.AddHosts(hs); err != nil {
			return nil, err
		}
	}
	if self != "" {
		if err := sampler.CountSelf(self); err != nil {
			return nil, err
		}
	}
	c := &Recording{ctx: ctx, env: env, sampler: sampler}
	c.first, _ = engineReadings(ctx, env, names) // a node without a first reading has no figure
	return c, nil
}

// engineReadings reads the engine's counters of the named nodes that have an Engine, all at
// once: the Docker Engine answers a stats request at its collector's next round, every second
// (Docker 20.10, one-shot requests too), so one after the other they took a second per
// container at both ends of every trial, and their readings spread over as many seconds. A
// node whose reading fails is left out; the errors are returned joined.
func engineReadings(ctx context.Context, env probe.Env, names []string) (map[string]cgroup.EngineStats, error) {
	engines := map[string]Engine{}
	for _, name := range names {
		if n, err := env.Node(name); err == nil {
			if e, ok := n.(Engine); ok {
				engines[name] = e
			}
		}
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	out := map[string]cgroup.EngineStats{}
	for name, e := range engines {
		wg.Go(func() {
			st, err := e.EngineCPU(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			out[name] = st
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// Track reads the cgroup counters every interval from now on (see Sampler.Track), so Stop can
// bound the figures to a window inside the recording.
func (c *Recording) Track(interval time.Duration) { c.sampler.Track(interval) }

// Stop ends the recording and emits its samples: over w when it is not nil (the snapshots
// inside it, see Sampler.StopWithin), else over the whole span since StartRecording.
func (c *Recording) Stop(emit func(results.Sample), w *probe.Window) error {
	// The engine's second readings first: they end docker_cpu_percent's span with the run.
	second, err := engineReadings(context.WithoutCancel(c.ctx), c.env, slices.Sorted(maps.Keys(c.first)))
	var cs []results.Sample
	var cerr error
	if w != nil {
		cs, cerr = c.sampler.StopWithin(*w)
	} else {
		cs, cerr = c.sampler.Stop()
	}
	for _, x := range cs {
		emit(x)
	}
	for _, name := range slices.Sorted(maps.Keys(second)) {
		pct, perr := cgroup.EnginePercent(c.first[name], second[name])
		if perr != nil {
			// n/a: no sample (the report shows n/a, not an invented 0 %); the cgroup
			// figures of the trial stand, so the trial does not fail for it.
			continue
		}
		emit(results.Sample{Probe: Name, Metric: "docker_cpu_percent", Value: pct, Unit: "%",
			Labels: map[string]string{"node": name}})
	}
	return errors.Join(cerr, err)
}

// cpuHosts lists the plan's emulated hosts with their cores (every online core for a host
// without cpus:, marked shared) and nodes, for the per-host CPU figures.
//
// A lab without emulated hosts gets the whole machine as one shared host named MachineHost,
// so every run has host-wide busy CPU (study A's firewall claim is decided on it: forwarding
// runs in softirq, which no node's cgroup is charged with).
func cpuHosts(p *plan.Plan) []Host {
	if len(p.AllHosts()) == 0 {
		cores, _ := cgroup.OnlineCPUs()
		return []Host{{Name: MachineHost, Cores: cores, Shared: true, Nodes: nodeNames(p)}}
	}
	var out []Host
	for _, h := range p.AllHosts() {
		ch := Host{Name: h.Name}
		if h.CPUs != "" {
			ch.Cores, _ = cgroup.ParseCPUs(h.CPUs)
		} else {
			ch.Cores, _ = cgroup.OnlineCPUs()
			ch.Shared = true
		}
		for _, n := range p.Nodes {
			if n.Host == h.Name {
				ch.Nodes = append(ch.Nodes, n.Name)
			}
		}
		out = append(out, ch)
	}
	return out
}

// MachineHost names the whole machine in the per-host samples of a lab without emulated hosts.
const MachineHost = "machine"

func nodeNames(p *plan.Plan) []string {
	out := make([]string, len(p.Nodes))
	for i, n := range p.Nodes {
		out[i] = n.Name
	}
	return out
}
