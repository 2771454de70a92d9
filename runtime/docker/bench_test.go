package docker_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/internal/labgen"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/docker"
	nsrt "github.com/sfclab/sfclab/runtime/netns"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

func dockerPlan(tb testing.TB, yaml string) *plan.Plan {
	tb.Helper()
	lab, err := spec.Decode([]byte(yaml), "bench.yaml", kinds.Spec())
	if err != nil {
		tb.Fatal(err)
	}
	lab.Runtime = spec.RuntimeDocker
	p, err := plan.Build(lab)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// stepTimes collects Runtime.Trace reports: how many of each step and their summed time.
type stepTimes struct {
	mu  sync.Mutex
	n   map[string]int
	sum map[string]time.Duration
	// busy and total CPU ticks of the host during the deploys
	busy, total uint64
}

func newStepTimes() *stepTimes {
	return &stepTimes{n: map[string]int{}, sum: map[string]time.Duration{}}
}

func (s *stepTimes) add(step string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[step]++
	s.sum[step] += d
}

// report logs every step's count, mean and sum over `runs` deploys, and reports the stages'
// mean wall times as metrics.
func (s *stepTimes) report(b *testing.B, runs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.total > 0 {
		b.ReportMetric(float64(s.busy)/float64(s.total), "host-busy")
	}
	steps := slices.Sorted(maps.Keys(s.n))
	for _, st := range steps {
		mean := s.sum[st] / time.Duration(s.n[st])
		b.Logf("%-18s %5d calls  mean %8s  sum/deploy %8s", st, s.n[st]/runs, mean.Round(100*time.Microsecond), (s.sum[st] / time.Duration(runs)).Round(time.Millisecond))
		if strings.HasPrefix(st, "stage.") {
			b.ReportMetric(s.sum[st].Seconds()/float64(runs), strings.TrimPrefix(st, "stage.")+"-s")
		}
	}
}

// deployPhases sums deploy.Timing and the time before it starts (preflight, leftovers).
type deployPhases struct {
	pre, nodes, links, routing, functions, total time.Duration
}

func (d *deployPhases) add(wall time.Duration, t deploy.Timing) {
	d.pre += wall - t.Total
	d.nodes += t.Nodes
	d.links += t.Links
	d.routing += t.Routing
	d.functions += t.Functions
	d.total += wall
}

func (d *deployPhases) log(b *testing.B, runs int) {
	n := time.Duration(runs)
	b.Logf("deploy %s: preflight+leftovers %s, nodes %s, links %s, routing %s, functions %s",
		(d.total / n).Round(time.Millisecond), (d.pre / n).Round(time.Millisecond), (d.nodes / n).Round(time.Millisecond),
		(d.links / n).Round(time.Millisecond), (d.routing / n).Round(time.Millisecond), (d.functions / n).Round(time.Millisecond))
}

// benchLabs are the labs of issue 12's Docker targets: a 6-function chain (8 nodes, 7
// networks) and a 64-node lab (2 chains of 30 forwarders, 64 networks), each wired twice:
// with a Docker network per segment (the default), and on one emulated host (-host: every
// container starts with no network and sfclab wires its ports, as a CNI plugin does).
var benchLabs = []struct{ name, yaml string }{
	{"chain6", labgen.Big("b-dk6", 1, 6, 0)},
	{"chain6-host", oneHost(labgen.Big("b-dk6h", 1, 6, 0))},
	{"64nodes", labgen.Big("b-dk64", 2, 30, 0)},
	{"64nodes-host", oneHost(labgen.Big("b-dk64h", 2, 30, 0))},
}

// oneHost puts a generated lab on one emulated host.
func oneHost(yaml string) string { return "hosts: [h1]\n" + yaml }

// deployOnce deploys and destroys p on docker with the given bound, tracing into steps, and
// returns the deploy's wall time and phases and the destroy's wall time.
func deployOnce(b *testing.B, p *plan.Plan, parallel int, steps *stepTimes) (time.Duration, deploy.Timing, time.Duration) {
	root := b.TempDir()
	os.Chmod(root, 0o755)
	rt := docker.Runtime{StateRoot: root, Parallel: parallel}
	if steps != nil {
		rt.Trace = steps.add
	}
	d := &deploy.Deployer{Journal: journal.Journal{Root: root},
		Runtimes: map[string]runtime.Runtime{"netns": nsrt.Runtime{}, "docker": rt}}
	var m busyMeter
	m.start(b)
	t0 := time.Now()
	timing, err := d.Deploy(context.Background(), p, "bench")
	if err != nil {
		b.Fatal(err)
	}
	wall := time.Since(t0)
	if steps != nil {
		bu, to := m.stop(b)
		steps.busy, steps.total = steps.busy+bu, steps.total+to
	}
	t1 := time.Now()
	if err := d.Destroy(context.Background(), p.Lab); err != nil && !errors.Is(err, journal.ErrNotDeployed) {
		b.Fatal(err)
	}
	return wall, timing, time.Since(t1)
}

// BenchmarkDockerDeploy deploys and destroys a 6-function chain and a 64-node lab on docker
// with the default bound of concurrent engine requests, and logs where the time goes: the
// deploy's phases, each engine request's count and mean time, and the stages' wall times
// (networks: until the last network exists; containers: until every container runs).
// deploy-s is the wall time of Deploy, preflight included, as a user waits for it.
//
// Run: flock -o /tmp/sfclab-suite.lock go test -run '^$' -bench DockerDeploy -benchtime 3x ./runtime/docker/
func BenchmarkDockerDeploy(b *testing.B) {
	if skipReason != "" {
		b.Skip(skipReason)
	}
	for _, l := range benchLabs {
		b.Run(l.name, func(b *testing.B) {
			p := dockerPlan(b, l.yaml)
			steps := newStepTimes()
			var ph deployPhases
			var destroy time.Duration
			for i := 0; i < b.N; i++ {
				wall, timing, dt := deployOnce(b, p, 0, steps)
				ph.add(wall, timing)
				destroy += dt
			}
			ph.log(b, b.N)
			steps.report(b, b.N)
			n := float64(b.N)
			b.ReportMetric(float64(len(p.Nodes)), "nodes")
			b.ReportMetric(ph.total.Seconds()/n, "deploy-s")
			b.ReportMetric(destroy.Seconds()/n, "destroy-s")
		})
	}
}

// BenchmarkDockerBound deploys both labs with 1, 2, 4, 8 and 16 engine requests in flight
// (or the bounds in $SFCLAB_BENCH_BOUNDS, e.g. "4,16"), interleaved, to choose DefaultParallel
// on a machine: the figures of one run, read the ratios.
//
// Run: flock -o /tmp/sfclab-suite.lock go test -run '^$' -bench DockerBound -benchtime 2x ./runtime/docker/
func BenchmarkDockerBound(b *testing.B) {
	if skipReason != "" {
		b.Skip(skipReason)
	}
	bounds := []int{1, 2, 4, 8, 16}
	if env := os.Getenv("SFCLAB_BENCH_BOUNDS"); env != "" {
		bounds = nil
		for _, f := range strings.Split(env, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("SFCLAB_BENCH_BOUNDS=%q: want bounds like 4,16", env)
			}
			bounds = append(bounds, n)
		}
	}
	for _, l := range benchLabs {
		b.Run(l.name, func(b *testing.B) {
			p := dockerPlan(b, l.yaml)
			sum := make([]time.Duration, len(bounds))
			for i := 0; i < b.N; i++ {
				for k, par := range bounds {
					wall, _, _ := deployOnce(b, p, par, nil)
					sum[k] += wall
				}
			}
			for k, par := range bounds {
				b.ReportMetric(sum[k].Seconds()/float64(b.N), fmt.Sprintf("deploy-s-p%d", par))
			}
		})
	}
}

// A setup failing midway on docker unwinds every container and network created before it.
func TestFailureMidwayLeavesNothing(t *testing.T) {
	requireEngine(t)
	d := deployer(t)
	yaml := strings.Replace(labgen.Big("t-dk-fail", 1, 5, 0), "functions:\n",
		"functions:\n  bad: {kind: custom, params: {setup: [\"echo going down >&2; false\"]}}\n", 1)
	yaml = strings.Replace(yaml, "hops: [", "hops: [bad, ", 1)
	p := dockerPlan(t, yaml)
	_, err := d.Deploy(context.Background(), p, "test")
	if err == nil {
		d.Destroy(context.Background(), p.Lab)
		t.Fatal("deploy with a failing setup succeeded")
	}
	if !strings.Contains(err.Error(), "going down") {
		t.Errorf("error does not carry the command's stderr: %v", err)
	}
	assertClean(t, p.Lab)
}

// Cancelling a deploy (Ctrl-C) while its containers are being created, connected and started
// concurrently unwinds everything: containers created or not yet started, networks and
// DOCKER-USER rules. The cancel comes from the runtime's trace at a given step, so it lands
// at the same point every run.
func TestCancelDuringCreate(t *testing.T) {
	requireEngine(t)
	for _, tc := range []struct {
		name, step string
		nth        int
	}{
		{"after the 5th container created", docker.StepCreate, 5},
		{"after the 3rd container started", docker.StepStart, 3},
		{"once the networks exist", docker.StageNetworks, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := dockerPlan(t, labgen.Big("t-dk-cc", 1, 14, 0))
			root := t.TempDir()
			os.Chmod(root, 0o755)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var mu sync.Mutex
			seen := 0
			rt := docker.Runtime{StateRoot: root, Trace: func(step string, _ time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				if step == tc.step {
					if seen++; seen == tc.nth {
						cancel()
					}
				}
			}}
			d := &deploy.Deployer{Journal: journal.Journal{Root: root}, Log: t.Logf,
				Runtimes: map[string]runtime.Runtime{"netns": nsrt.Runtime{}, "docker": rt}}
			_, err := d.Deploy(ctx, p, "test")
			if err == nil {
				d.Destroy(context.Background(), p.Lab)
				t.Fatal("cancelled deploy succeeded")
			}
			if !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), context.Canceled.Error()) {
				t.Errorf("error does not say it was cancelled: %v", err)
			}
			assertClean(t, p.Lab) // containers, networks and DOCKER-USER rules
		})
	}
}
