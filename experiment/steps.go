package experiment

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/flows"
	httpprobe "github.com/sfclab/sfclab/probe/http"
	"github.com/sfclab/sfclab/probe/iperf3"
	"github.com/sfclab/sfclab/probe/ndr"
	"github.com/sfclab/sfclab/probe/ping"
	"github.com/sfclab/sfclab/probe/rtt"
	"github.com/sfclab/sfclab/probe/tcprtt"
	"github.com/sfclab/sfclab/results"
)

// A trial is compiled into steps as a lab is compiled into a plan: Steps returns, for one
// scenario, the probes a trial runs in order, each with the CPU window it carries. The runner
// (package bench) deploys the lab, runs the steps one after another and destroys the lab; it
// decides nothing about which probe runs or when CPU is sampled.

// CPUWindow says when a step samples CPU (every node's cgroup, the host's softirq, the
// engine's stats, per emulated host).
type CPUWindow int

const (
	// CPUNone: the step samples no CPU.
	CPUNone CPUWindow = iota
	// CPUMeasured: the window is the probe's measured part as the probe dates it (iperf3's
	// transfer, its -J report's start to end; see probe.Timed), sampled every
	// cpu.TrackInterval.
	CPUMeasured
	// CPUWhole: the window runs from before the step's first probe to after its last (the
	// HTTP grid with ab's runs, every rtt rate), so the figures are averages over the step.
	CPUWhole
)

// String names the window as the step table does.
func (w CPUWindow) String() string {
	return [...]string{"none", "measured", "whole"}[w]
}

// Step is one probe of a trial (or one probe at several settings, run in turn) with its CPU
// window.
type Step struct {
	// Name is the probe's name, as in results.Sample.Probe ("warm-up" for the warm-up).
	Name string
	// Probes run one after another.
	Probes []probe.Probe
	// CPU is when CPU is sampled during the step (at most one step of a trial samples it).
	CPU CPUWindow
	// Self, when not "", counts sfclab's own process as a node of that name in the CPU
	// figures (the HTTP load generator runs in it).
	Self string
	// Discard drops the step's samples (the warm-up).
	Discard bool
}

// HTTPClientNode is the node name the CPU samples of sfclab's own HTTP load generator carry:
// it runs in sfclab's process, not in the source node's cgroup.
const HTTPClientNode = "sfclab-http-client"

// cpuPreference is the order in which a trial's CPU window is chosen: CPU is sampled once
// per trial, during the first of these probes the trial runs (iperf3's transfer, else the
// whole HTTP grid, else every rtt rate, as study D's mpstat ran beside its pings). Other
// probes never sample CPU.
var cpuPreference = []struct {
	probe  string
	window CPUWindow
}{
	{iperf3.Name, CPUMeasured},
	{httpprobe.Name, CPUWhole},
	{rtt.Name, CPUWhole},
}

// Steps compiles the trial of scenario s: its probes in the order they run, each with its
// CPU window. The order is the file's documented order (warm-up, iperf3, ping, tcprtt, rtt,
// http, ndr, flows), then the registered probes in name order.
func (e *Experiment) Steps(s *Scenario) ([]Step, error) {
	pr := e.ProbesOf(s)
	var steps []Step
	add := func(name string, ps ...probe.Probe) { steps = append(steps, Step{Name: name, Probes: ps}) }
	if c := pr.Iperf3; c != nil {
		if e.Warmup.Duration > 0 {
			cfg := c.Config()
			cfg.Duration = max(e.Warmup.Duration, time.Second)
			steps = append(steps, Step{Name: "warm-up", Probes: []probe.Probe{iperf3.New(cfg)}, Discard: true})
		}
		add(iperf3.Name, iperf3.New(c.Config()))
	}
	if c := pr.Ping; c != nil {
		add(ping.Name, ping.New(ping.Config{Count: c.Count, Interval: c.Interval.Duration, Size: c.Size}))
	}
	if c := pr.TCPRTT; c != nil {
		add(tcprtt.Name, tcprtt.New(tcprtt.Config{Connects: c.Connects, Requests: c.Requests, Size: c.Size, Timeout: c.Timeout.Duration}))
	}
	if c := pr.RTT; c != nil {
		var ps []probe.Probe
		for _, rate := range c.Rate {
			ps = append(ps, rtt.New(c.Config(rate)))
		}
		add(rtt.Name, ps...)
	}
	if h := pr.HTTP; h != nil {
		var ps []probe.Probe
		for _, obj := range h.Objects {
			for _, conc := range h.Concurrency {
				cfg := httpprobe.Config{Requests: h.RequestsFor(obj), Concurrency: conc, Object: obj, KeepAlive: h.KeepAlive, Timeout: h.Timeout.Duration}
				ps = append(ps, httpprobe.New(cfg))
				if h.AB {
					ps = append(ps, httpprobe.NewAB(cfg))
				}
			}
		}
		self := HTTPClientNode
		if guestSource(s) { // the client runs in the guest, inside its QEMU's (the node's) cgroup
			self = ""
		}
		steps = append(steps, Step{Name: httpprobe.Name, Probes: ps, Self: self})
	}
	if n := pr.NDR; n != nil {
		cfg, err := n.Config() // validated when the experiment was loaded
		if err != nil {
			return nil, err
		}
		add(ndr.Name, ndr.New(cfg))
	}
	if f := pr.Flows; f != nil {
		add(flows.Name, flows.New(f.Config()))
	}
	for _, name := range slices.Sorted(maps.Keys(pr.extra)) {
		p, err := registeredProbe(name).Probe(pr.extra[name])
		if err != nil {
			return nil, fmt.Errorf("probe %s: %w", name, err)
		}
		add(name, p)
	}
	if pr.CPUOn() {
		pick(steps)
	}
	return steps, nil
}

// pick gives the trial's CPU window to the first step cpuPreference names.
func pick(steps []Step) {
	for _, c := range cpuPreference {
		for i := range steps {
			if steps[i].Name == c.probe && !steps[i].Discard {
				steps[i].CPU = c.window
				return
			}
		}
	}
}

// Config turns the file's settings into the probe's.
func (c *Iperf3) Config() iperf3.Config {
	return iperf3.Config{Duration: c.Duration.Duration, Protocol: c.Protocol, Streams: c.Streams,
		Reverse: c.Reverse, Bitrate: c.Bitrate, Congestion: c.Congestion, Omit: c.Omit}
}

// ProbeKind is a probe the experiment file can name under probes: beyond the built-in ones.
// Registered with WithProbe, it runs as a step of its own after the built-in probes, samples
// no CPU, and its samples land in results.db like any other.
type ProbeKind interface {
	// NewConfig returns a new configuration for the file's settings to decode into.
	NewConfig() any
	// Probe checks a decoded configuration and returns the probe it runs.
	Probe(config any) (probe.Probe, error)
}

var (
	probeKindsMu sync.RWMutex
	probeKinds   = map[string]ProbeKind{}
)

// WithProbe registers a probe kind under name (for the experiment file's probes: key) and
// returns a function that removes it again.
func WithProbe(name string, k ProbeKind) (undo func()) {
	probeKindsMu.Lock()
	defer probeKindsMu.Unlock()
	if _, dup := probeKinds[name]; dup {
		panic("experiment: probe kind " + name + " registered twice")
	}
	probeKinds[name] = k
	return func() {
		probeKindsMu.Lock()
		defer probeKindsMu.Unlock()
		delete(probeKinds, name)
	}
}

func registeredProbe(name string) ProbeKind {
	probeKindsMu.RLock()
	defer probeKindsMu.RUnlock()
	return probeKinds[name]
}

// emitter is what a step's probe run sees of the runner.
type emitter = func(results.Sample)

// RunProbes runs a step's probes one after another.
func (s Step) RunProbes(ctx context.Context, env probe.Env, emit emitter) error {
	for _, p := range s.Probes {
		if err := p.Run(ctx, env, emit); err != nil {
			return err
		}
	}
	return nil
}

// guestSource reports whether scenario s's chain starts at a VM endpoint.
func guestSource(s *Scenario) bool {
	if s == nil || s.Plan == nil {
		return false
	}
	c, err := s.Plan.ProbeChain(s.Chain)
	if err != nil || len(c.Path) == 0 {
		return false
	}
	n := s.Plan.Node(c.Path[0])
	return n != nil && n.VM != nil
}
