// Package bench runs experiments: for every repetition, every scenario's lab is deployed, the
// probes run one after another (CPU sampled during the throughput probe), and the lab is
// destroyed again; scenarios interleave so drift on the machine hits all of them alike. Raw
// samples go to SQLite as they are taken; statistics and reports are computed from them.
package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sfclab/sfclab/bench/load"
	"github.com/sfclab/sfclab/bench/probe"
	"github.com/sfclab/sfclab/bench/probe/cpu"
	"github.com/sfclab/sfclab/bench/probe/flows"
	httpprobe "github.com/sfclab/sfclab/bench/probe/http"
	"github.com/sfclab/sfclab/bench/probe/iperf3"
	"github.com/sfclab/sfclab/bench/probe/ndr"
	"github.com/sfclab/sfclab/bench/probe/ping"
	"github.com/sfclab/sfclab/bench/probe/rtt"
	"github.com/sfclab/sfclab/bench/probe/tcprtt"
	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/runtime/docker"
)

// ErrInterrupted is returned when a run was stopped before its last trial (e.g. Ctrl-C); the
// samples gathered so far are kept and the run is marked incomplete.
var ErrInterrupted = errors.New("bench interrupted")

// Runner runs experiments.
type Runner struct {
	Deployer *deploy.Deployer
	// Version is sfclab's version, recorded with the environment.
	Version string
	// Progress is told about every step (done of total); nil means silent.
	Progress func(done, total int, label string)
	// Log receives notable events (failed trials); nil means silent.
	Log func(format string, args ...any)
}

func (r *Runner) logf(format string, args ...any) {
	if r.Log != nil {
		r.Log(format, args...)
	}
}

// Outcome is what a run left in its directory.
type Outcome struct {
	Dir      string
	Trials   int
	Failed   int
	Complete bool
}

// Files are inputs copied into the output directory (the experiment file, the lab files) so a
// run can be understood, and repeated, from its directory alone.
type Files map[string][]byte

// Run runs an experiment and stores everything under dir (created; it must not hold a run).
func (r *Runner) Run(ctx context.Context, e *experiment.Experiment, dir string, inputs Files) (*Outcome, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	dbPath := filepath.Join(dir, "results.db")
	if _, err := os.Stat(dbPath); err == nil {
		return nil, fmt.Errorf("create output: %s already holds a run; choose another --out", dir)
	}
	for name, data := range inputs {
		p := filepath.Join(dir, "inputs", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, fmt.Errorf("copy inputs: %w", err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return nil, fmt.Errorf("copy inputs: %w", err)
		}
	}
	store, err := results.Create(dbPath)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	run := results.Run{Experiment: e.Name, Study: e.Study, Started: time.Now().UTC(), Env: Environment(ctx, r.Version)}
	run.Env["experiment_file"] = e.File
	run.Env["baseline"] = e.Baseline
	addShaping(run.Env, e)
	if e.Reduced != "" {
		run.Env["reduced"] = e.Reduced
	}
	var names []string
	for _, s := range e.Scenarios {
		names = append(names, s.Name)
	}
	run.Env["scenarios"] = strings.Join(names, ",")
	if lbs := balancers(e); lbs != "" {
		run.Env[report.EnvBalancers] = lbs
	}
	if err := store.PutRun(run); err != nil {
		return nil, err
	}
	out := &Outcome{Dir: dir}
	total := e.Repetitions * len(e.Scenarios)
	done := 0
	interrupted := false
trials:
	for trial := 1; trial <= e.Repetitions; trial++ {
		for _, s := range e.Scenarios {
			if ctx.Err() != nil {
				interrupted = true
				break trials
			}
			if r.Progress != nil {
				r.Progress(done, total, fmt.Sprintf("trial %d/%d %s", trial, e.Repetitions, s.Name))
			}
			t := results.Trial{Experiment: e.Name, Scenario: s.Name, Trial: trial, Started: time.Now().UTC()}
			samples, err := r.trial(ctx, e, s, trial)
			for i := range samples {
				samples[i].Experiment, samples[i].Scenario, samples[i].Trial = e.Name, s.Name, trial
			}
			t.Ended, t.Status = time.Now().UTC(), results.TrialOK
			if err != nil {
				t.Status, t.Error = results.TrialFailed, err.Error()
				out.Failed++
				r.logf("trial %d of %s failed: %v", trial, s.Name, err)
			}
			if perr := store.PutSamples(samples); perr != nil {
				return out, storeFailed(perr, t, dir)
			}
			if perr := store.PutTrial(t); perr != nil {
				return out, storeFailed(perr, t, dir)
			}
			out.Trials++
			done++
			if ctx.Err() != nil {
				interrupted = true
				break trials
			}
		}
	}
	if r.Progress != nil {
		r.Progress(done, total, "done")
	}
	run.Ended, run.Complete = time.Now().UTC(), !interrupted
	out.Complete = run.Complete
	if err := store.PutRun(run); err != nil {
		return out, err
	}
	if interrupted {
		return out, fmt.Errorf("run %s: %w after %d of %d trials; samples so far are in %s", e.Name, ErrInterrupted, done, total, dir)
	}
	return out, nil
}

// trial deploys a scenario's lab, runs the probes and destroys the lab, whatever happens.
func (r *Runner) trial(ctx context.Context, e *experiment.Experiment, s *experiment.Scenario, trial int) (samples []results.Sample, err error) {
	emit := func(x results.Sample) {
		if x.Time.IsZero() {
			x.Time = time.Now().UTC()
		}
		samples = append(samples, x)
	}
	p, pr := s.Plan, e.ProbesOf(s)
	chain, err := p.ProbeChain(s.Chain)
	if err != nil {
		return samples, err
	}
	timing, err := r.Deployer.Deploy(ctx, p, s.LabPath)
	if err != nil {
		return samples, fmt.Errorf("deploy: %w", err)
	}
	defer func() {
		if derr := r.Deployer.Destroy(context.WithoutCancel(ctx), p.Lab); derr != nil {
			err = errors.Join(err, fmt.Errorf("destroy: %w", derr))
		}
	}()
	// A function that died (a balancer's process killed, say) fails the trial with that
	// reason, not only with what the probe saw (runs before the destroy above).
	defer func() {
		if cerr := r.Deployer.Check(context.WithoutCancel(ctx), p); cerr != nil {
			if err != nil {
				cerr = fmt.Errorf("%w (probe: %v)", cerr, err)
			}
			err = cerr
		}
	}()
	deployLabels := map[string]string{"nodes": strconv.Itoa(len(p.Nodes)), "runtime": p.Runtime}
	if p.Transparent != nil {
		deployLabels["steering"], deployLabels["hosts"] = "transparent", strconv.Itoa(len(p.Transparent.Hosts))
	}
	emit(results.Sample{Probe: "deploy", Metric: "deploy_time", Value: timing.Total.Seconds(), Unit: "s", Labels: deployLabels})
	logDir, err := os.MkdirTemp("", "sfclab-probe-")
	if err != nil {
		return samples, err
	}
	defer os.RemoveAll(logDir)
	env := probe.Env{Plan: p, Chain: chain, LogDir: logDir,
		Node: func(name string) (probe.Node, error) { return r.Deployer.Node(p, name) }}
	if c := s.Background; c != nil {
		emit(results.Sample{Probe: "load", Metric: "background_nodes", Value: float64(c.Count), Unit: "count",
			Labels: map[string]string{"kind": c.Kind, "side": c.Side}})
		if c.Count > 0 {
			bg, lerr := load.StartNodes(ctx, env, load.NodesConfig{Kind: c.Kind, Count: c.Count, Bitrate: c.Bitrate})
			if lerr != nil {
				return samples, fmt.Errorf("start background nodes: %w", lerr)
			}
			defer func() { err = errors.Join(err, bg.Stop()) }()
		}
	}
	if b := e.Background; b != nil {
		node := experiment.BackgroundNode(p, b.Node)
		host := b.Placement == "host"
		bg, lerr := load.Start(ctx, env, load.Config{Kind: b.Kind, Count: b.Count, Node: node, Host: host})
		if lerr != nil {
			return samples, fmt.Errorf("start background load: %w", lerr)
		}
		defer func() { err = errors.Join(err, bg.Stop()) }()
		emit(results.Sample{Probe: "load", Metric: "count", Value: float64(b.Count), Unit: "count",
			Labels: map[string]string{"kind": b.Kind, "node": map[bool]string{false: node, true: "the host, beside " + node}[host]}})
	}
	if c := pr.Iperf3; c != nil {
		if e.Warmup.Duration > 0 {
			cfg := iperf3Config(c)
			cfg.Duration = max(e.Warmup.Duration, time.Second)
			if err := iperf3.New(cfg).Run(ctx, env, func(results.Sample) {}); err != nil {
				return samples, fmt.Errorf("warm-up: %w", err)
			}
		}
		if err := runIperf3(ctx, env, iperf3Config(c), pr.CPUOn(), emit); err != nil {
			return samples, err
		}
	}
	if c := pr.Ping; c != nil {
		cfg := ping.Config{Count: c.Count, Interval: c.Interval.Duration, Size: c.Size}
		if err := ping.New(cfg).Run(ctx, env, emit); err != nil {
			return samples, err
		}
	}
	if c := pr.TCPRTT; c != nil {
		cfg := tcprtt.Config{Connects: c.Connects, Requests: c.Requests, Size: c.Size, Timeout: c.Timeout.Duration}
		if err := tcprtt.New(cfg).Run(ctx, env, emit); err != nil {
			return samples, err
		}
	}
	if c := pr.RTT; c != nil {
		if err := r.rtt(ctx, pr, env, c, emit); err != nil {
			return samples, err
		}
	}
	if h := pr.HTTP; h != nil {
		if err := r.http(ctx, pr, env, h, emit); err != nil {
			return samples, err
		}
	}
	if n := pr.NDR; n != nil {
		cfg, err := n.Config() // validated when the experiment was loaded
		if err != nil {
			return samples, err
		}
		if err := ndr.New(cfg).Run(ctx, env, emit); err != nil {
			return samples, err
		}
	}
	if f := pr.Flows; f != nil {
		if err := flows.New(f.Config()).Run(ctx, env, emit); err != nil {
			return samples, err
		}
	}
	return samples, ctx.Err()
}

// rtt runs the rtt probe at every rate, with CPU sampled over all of them (as study D's
// mpstat ran beside its pings) when the experiment has no iperf3 or HTTP probe to sample
// during: one window per trial, per node and per emulated host.
func (r *Runner) rtt(ctx context.Context, pr *experiment.Probes, env probe.Env, c *experiment.RTT, emit func(results.Sample)) (err error) {
	if pr.CPUOn() && pr.Iperf3 == nil && pr.HTTP == nil {
		cr, serr := startCPU(ctx, env, "")
		if serr != nil {
			return serr
		}
		defer func() { err = errors.Join(err, cr.stop(emit, nil)) }()
	}
	for _, rate := range c.Rate {
		if err := rtt.New(c.Config(rate)).Run(ctx, env, emit); err != nil {
			return err
		}
	}
	return nil
}

// runIperf3 runs one iperf3 test and, when cpuOn, samples every node's CPU during its
// measured transfer, as the test's -J report dates it (iperf3.Result.Transfer): not the
// server's start, the wait for it to listen, the client's start and connect, the omitted
// seconds or the results exchange, which would dilute short runs. The counters are read
// every cpu.TrackInterval during the client's run and the snapshots inside the transfer give
// the figures (cpu.Sampler.StopWithin); a run without a report falls back to the client's
// whole run.
func runIperf3(ctx context.Context, env probe.Env, cfg iperf3.Config, cpuOn bool, emit func(results.Sample)) error {
	if cpuOn {
		cfg.Around = func(client func() (probe.Window, bool)) error {
			c, err := startCPU(ctx, env, "")
			if err != nil {
				return err
			}
			c.sampler.Track(cpu.TrackInterval)
			if w, ok := client(); ok {
				return c.stop(emit, &w)
			}
			return c.stop(emit, nil)
		}
	}
	return iperf3.New(cfg).Run(ctx, env, emit)
}

// HTTPClientNode is the node name the CPU samples of sfclab's own HTTP load generator carry:
// it runs in sfclab's process, not in the source node's cgroup.
const HTTPClientNode = "sfclab-http-client"

// http runs the HTTP grid (every object at every concurrency), with CPU sampled over the
// whole grid when the experiment has no iperf3 probe to sample during: the window runs from
// before the first run to after the last (ab's runs included), so the figures are averages
// over the grid. sfclab's own process (the load generator) is sampled too, as the node
// HTTPClientNode.
func (r *Runner) http(ctx context.Context, pr *experiment.Probes, env probe.Env, h *experiment.HTTP, emit func(results.Sample)) (err error) {
	if pr.CPUOn() && pr.Iperf3 == nil {
		c, serr := startCPU(ctx, env, HTTPClientNode)
		if serr != nil {
			return serr
		}
		defer func() { err = errors.Join(err, c.stop(emit, nil)) }()
	}
	for _, obj := range h.Objects {
		for _, conc := range h.Concurrency {
			cfg := httpprobe.Config{Requests: h.RequestsFor(obj), Concurrency: conc, Object: obj, KeepAlive: h.KeepAlive, Timeout: h.Timeout.Duration}
			if err := httpprobe.New(cfg).Run(ctx, env, emit); err != nil {
				return err
			}
			if h.AB {
				abSamples, err := httpprobe.RunAB(ctx, env, cfg)
				for _, x := range abSamples {
					emit(x)
				}
				if err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// dockerStatser is a container node that reports `docker stats` samples.
type dockerStatser interface {
	Stats(ctx context.Context) (docker.Stats, error)
}

// cpuRun is CPU sampling under way: the cgroup and softirq sampler and, for containers, the
// engine's first stats reading.
type cpuRun struct {
	ctx     context.Context
	env     probe.Env
	sampler *cpu.Sampler
	first   map[string]docker.Stats
}

// startCPU starts sampling every node's cgroup and the host's softirq and, for containers,
// the engine's stats; stop ends it and emits the samples: cpu_user, cpu_system (cores) per
// node, softirq (cores) for the host, docker_cpu_percent (as `docker stats` computes it)
// per container, and the span the cgroup figures cover (cpu.WindowMetric). docker_cpu_percent
// covers the span between the engine's two one-shot readings, right before the iperf3
// client's run (or the HTTP grid) and right after it: the stats API is too slow to be read
// every tracking interval.
//
// self, when not "", also counts sfclab's own process as a node of that name (the HTTP load
// generator runs in it).
func startCPU(ctx context.Context, env probe.Env, self string) (*cpuRun, error) {
	names := nodeNames(env.Plan)
	sampler, err := cpu.Start(env, names)
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
	c := &cpuRun{ctx: ctx, env: env, sampler: sampler, first: map[string]docker.Stats{}}
	for _, name := range names {
		if n, err := env.Node(name); err == nil {
			if ds, ok := n.(dockerStatser); ok {
				if st, err := ds.Stats(ctx); err == nil {
					c.first[name] = st
				}
			}
		}
	}
	return c, nil
}

// stop ends the sampling and emits its samples: over w when it is not nil (the snapshots
// inside it, see cpu.Sampler.StopWithin), else over the whole span since startCPU.
func (c *cpuRun) stop(emit func(results.Sample), w *probe.Window) error {
	var err error
	// The engine's second readings first: they end docker_cpu_percent's span with the run.
	second := map[string]docker.Stats{}
	for _, name := range slices.Sorted(maps.Keys(c.first)) {
		n, nerr := c.env.Node(name)
		if nerr != nil {
			continue
		}
		cur, serr := n.(dockerStatser).Stats(context.WithoutCancel(c.ctx))
		if serr != nil {
			err = errors.Join(err, serr)
			continue
		}
		second[name] = cur
	}
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
		pct, perr := docker.CPUPercent(c.first[name], second[name])
		if perr != nil {
			// n/a: no sample (the report shows n/a, not an invented 0 %); the cgroup
			// figures of the trial stand, so the trial does not fail for it.
			continue
		}
		emit(results.Sample{Probe: "cpu", Metric: "docker_cpu_percent", Value: pct, Unit: "%",
			Labels: map[string]string{"node": name}})
	}
	return errors.Join(cerr, err)
}

func iperf3Config(c *experiment.Iperf3) iperf3.Config {
	return iperf3.Config{Duration: c.Duration.Duration, Protocol: c.Protocol, Streams: c.Streams,
		Reverse: c.Reverse, Bitrate: c.Bitrate, Congestion: c.Congestion, Omit: c.Omit}
}

// cpuHosts lists the plan's emulated hosts with their cores (every online core for a host
// without cpus:, marked shared) and nodes, for the per-host CPU figures.
func cpuHosts(p *plan.Plan) []cpu.Host {
	var out []cpu.Host
	for _, h := range p.AllHosts() {
		ch := cpu.Host{Name: h.Name}
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

func nodeNames(p *plan.Plan) []string {
	out := make([]string, len(p.Nodes))
	for i, n := range p.Nodes {
		out[i] = n.Name
	}
	return out
}

// storeFailed is the error of a run that cannot store a trial (the disk is full, say): the run
// stops there (the trial's lab is already destroyed), and what was stored before stays.
func storeFailed(err error, t results.Trial, dir string) error {
	return fmt.Errorf("store trial %d of %s: %w; the run stops here: the trials stored before are in %s (results.db; sfclab report %s)",
		t.Trial, t.Scenario, err, dir, dir)
}
