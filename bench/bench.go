// Package bench runs experiments: for every repetition, every scenario's lab is deployed, the
// trial's steps (experiment.Experiment.Steps: each a probe and its CPU window) run one after
// another, and the lab is destroyed again; scenarios interleave, in an order rotated per
// repetition (experiment.Order), so drift on the machine hits all of them alike. Raw
// samples go to SQLite as they are taken; statistics and reports are computed from them.
package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/cpu"
	"github.com/sfclab/sfclab/probe/load"
	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/results"
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
	r.describeRuntimes(ctx, e, run.Env)
	if e.Reduced != "" {
		run.Env["reduced"] = e.Reduced
	}
	if e.Placement != "" {
		run.Env["placement"] = e.Placement
	}
	addVMEnv(run.Env, e)
	var names []string
	for _, s := range e.Scenarios {
		names = append(names, s.Name)
	}
	run.Env["scenarios"] = strings.Join(names, ",")
	run.Env["order"] = e.Order
	var orders [][]string
	for rep := 1; rep <= e.Repetitions; rep++ {
		var row []string
		for _, s := range e.ScenarioOrder(rep) {
			row = append(row, s.Name)
		}
		orders = append(orders, row)
	}
	run.Env[results.EnvScenarioOrder] = results.FormatScenarioOrder(orders)
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
		for _, s := range e.ScenarioOrder(trial) {
			if ctx.Err() != nil {
				interrupted = true
				break trials
			}
			if r.Progress != nil {
				r.Progress(done, total, fmt.Sprintf("trial %d/%d %s", trial, e.Repetitions, s.Name))
			}
			t := results.Trial{Experiment: e.Name, Scenario: s.Name, Trial: trial, Started: time.Now().UTC()}
			samples, err := r.trial(ctx, e, s, trial, filepath.Join(dir, FailedDir, fmt.Sprintf("%s-%d", s.Name, trial)))
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

// describer is a runtime that names what its labs run on (the kubernetes runtime: the
// cluster's version, server and nodes).
type describer interface {
	Describe(ctx context.Context) (string, error)
}

// describeRuntimes records, under the runtime's name, what each runtime the scenarios use
// that can describe itself runs on ("unavailable: ERROR" when it cannot answer).
func (r *Runner) describeRuntimes(ctx context.Context, e *experiment.Experiment, env map[string]string) {
	for _, s := range e.Scenarios {
		name := s.Plan.Runtime
		if _, done := env[name]; done || name == "" {
			continue
		}
		rt, err := r.Deployer.Runtime(name)
		if err != nil {
			continue
		}
		if d, ok := rt.(describer); ok {
			v, err := d.Describe(ctx)
			if err != nil {
				v = "unavailable: " + err.Error()
			}
			env[name] = v
		}
	}
}

// FailedDir is the directory of a run's output where a failed trial keeps its logs
// (FailedDir/SCENARIO-TRIAL): its probes' (servers' logs) and its machines' (a VM's guest
// console and QEMU log), which would otherwise go with the trial's lab.
const FailedDir = "failed"

// trial deploys a scenario's lab, runs the probes and destroys the lab, whatever happens.
// When the trial fails, its logs are kept in keep (created then) and its error says where.
func (r *Runner) trial(ctx context.Context, e *experiment.Experiment, s *experiment.Scenario, trial int, keep string) (samples []results.Sample, err error) {
	emit := func(x results.Sample) {
		if x.Time.IsZero() {
			x.Time = time.Now().UTC()
		}
		samples = append(samples, x)
	}
	p := s.Plan
	steps, err := e.Steps(s)
	if err != nil {
		return samples, err
	}
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
	logDir, err := os.MkdirTemp("", "sfclab-probe-")
	if err != nil {
		return samples, err
	}
	// Runs after the checks below (they may fail the trial too) and before the destroy.
	defer func() {
		if err != nil && keep != "" {
			err = keepLogs(context.WithoutCancel(ctx), err, logDir, keep, r.Deployer, p)
		}
		os.RemoveAll(logDir)
	}()
	// The probes run with probeCtx, which a machine (VM) of the lab going down cancels at once
	// (watchMachines): the trial fails then, with that reason, not at the end of a probe's
	// own bound.
	probeCtx, stopProbes := context.WithCancelCause(ctx)
	// A function that died (a balancer's process killed, say) fails the trial with that
	// reason, not only with what the probe saw (runs before the destroy above).
	defer func() {
		if cerr := r.Deployer.Check(context.WithoutCancel(ctx), p); cerr != nil {
			switch {
			case errors.Is(context.Cause(probeCtx), errMachineDown):
				cerr = fmt.Errorf("%w (the probes were stopped when it went down)", cerr)
			case err != nil:
				cerr = fmt.Errorf("%w (probe: %v)", cerr, err)
			}
			err = cerr
		}
	}()
	watched := make(chan struct{})
	go func() { defer close(watched); watchMachines(probeCtx, r.Deployer, p, stopProbes) }()
	defer func() { stopProbes(nil); <-watched }()
	deployLabels := map[string]string{"nodes": strconv.Itoa(len(p.Nodes)), "runtime": runtimeLabel(p)}
	if p.Transparent != nil {
		deployLabels["steering"], deployLabels["hosts"] = "transparent", strconv.Itoa(len(p.Transparent.Hosts))
	}
	emit(results.Sample{Probe: "deploy", Metric: "deploy_time", Value: timing.Total.Seconds(), Unit: "s", Labels: deployLabels})
	env := probe.Env{Plan: p, Chain: chain, LogDir: logDir,
		Node: func(name string) (probe.Node, error) { return r.Deployer.Node(p, name) }}
	if c := s.Background; c != nil {
		bgl := map[string]string{"kind": c.Kind, "side": c.Side}
		if c.Count > 0 && c.Kind == load.KindNetwork {
			bgl["bitrate"] = c.Bitrate // which ran: a cap per pair, or "max" (unthrottled)
		}
		if c.Count > 0 && c.Driver != "" {
			bgl["driver"] = c.Driver
		}
		emit(results.Sample{Probe: "load", Metric: "background_nodes", Value: float64(c.Count), Unit: "count", Labels: bgl})
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
	for _, st := range steps {
		out := emit
		if st.Discard {
			out = func(results.Sample) {}
		}
		if err := runStep(probeCtx, env, st, out); err != nil {
			if st.Discard {
				return samples, fmt.Errorf("%s: %w", st.Name, err)
			}
			return samples, err
		}
	}
	return samples, ctx.Err()
}

// runStep runs one step of a trial with CPU sampled over its window (experiment.CPUWindow):
// per node (cgroup), for the host's softirq, per emulated host and, for containers, as the
// engine's stats.
//
// For CPUMeasured the counters are read every cpu.TrackInterval during the probe's run and
// the snapshots inside its measured part (iperf3's transfer as its -J report dates it, not
// the server's start, the wait for it to listen, the client's start and connect, the omitted
// seconds or the results exchange, which would dilute short runs) give the figures
// (cpu.Sampler.StopWithin); a run the probe could not date falls back to its whole run. For
// CPUWhole the window runs from before the step's first probe to after its last.
func runStep(ctx context.Context, env probe.Env, st experiment.Step, emit func(results.Sample)) (err error) {
	switch st.CPU {
	case experiment.CPUMeasured:
		if len(st.Probes) != 1 {
			return fmt.Errorf("step %s: a measured CPU window needs one probe, not %d", st.Name, len(st.Probes))
		}
		tp, ok := st.Probes[0].(probe.Timed)
		if !ok {
			return fmt.Errorf("step %s: probe %s cannot date its measured part for the CPU window", st.Name, st.Probes[0].Name())
		}
		return tp.WithAround(func(measure func() (probe.Window, bool)) error {
			c, err := cpu.StartRecording(ctx, env, st.Self)
			if err != nil {
				return err
			}
			c.Track(cpu.TrackInterval)
			if w, ok := measure(); ok {
				return c.Stop(emit, &w)
			}
			return c.Stop(emit, nil)
		}).Run(ctx, env, emit)
	case experiment.CPUWhole:
		c, serr := cpu.StartRecording(ctx, env, st.Self)
		if serr != nil {
			return serr
		}
		defer func() { err = errors.Join(err, c.Stop(emit, nil)) }()
	}
	return st.RunProbes(ctx, env, emit)
}

// keepLogs copies a failed trial's probe logs (logDir's files) and its lab's machine logs
// into keep and returns the trial's error, saying where they are when there were any.
func keepLogs(ctx context.Context, err error, logDir, keep string, d *deploy.Deployer, p *plan.Plan) error {
	kept := 0
	ents, _ := os.ReadDir(logDir)
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		data, rerr := os.ReadFile(filepath.Join(logDir, e.Name()))
		if rerr != nil {
			continue
		}
		if os.MkdirAll(keep, 0o755) != nil || os.WriteFile(filepath.Join(keep, e.Name()), data, 0o644) != nil {
			continue
		}
		kept++
	}
	n, merr := d.KeepMachineLogs(ctx, p, keep)
	kept += n
	switch {
	case merr != nil:
		return fmt.Errorf("%w (%v)", err, merr)
	case kept == 0:
		return err
	}
	return fmt.Errorf("%w (its logs are kept in %s)", err, keep)
}

// storeFailed is the error of a run that cannot store a trial (the disk is full, say): the run
// stops there (the trial's lab is already destroyed), and what was stored before stays.
func storeFailed(err error, t results.Trial, dir string) error {
	return fmt.Errorf("store trial %d of %s: %w; the run stops here: the trials stored before are in %s (results.db; sfclab report %s)",
		t.Trial, t.Scenario, err, dir, dir)
}
