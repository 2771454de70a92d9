package docker_test

import (
	"context"
	"errors"
	"os"
	"strings"
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

// BenchmarkDockerDeploy deploys and destroys a 6-function chain and a 64-node lab on docker,
// with containers created and wired 4 at once (the default) and one at a time, interleaved,
// and reports the times and the serial/concurrent ratio from the same run.
//
// Run: flock /tmp/sfclab-suite.lock go test -run '^$' -bench DockerDeploy -benchtime 1x ./runtime/docker/
func BenchmarkDockerDeploy(b *testing.B) {
	if skipReason != "" {
		b.Skip(skipReason)
	}
	labs := []struct{ name, yaml string }{
		{"chain6", labgen.Big("b-dk6", 1, 6, 0)},
		{"64nodes", labgen.Big("b-dk64", 2, 30, 0)},
	}
	for _, l := range labs {
		b.Run(l.name, func(b *testing.B) {
			p := dockerPlan(b, l.yaml)
			var t [2]time.Duration // deploy: concurrent, serial
			var destroy time.Duration
			for i := 0; i < b.N; i++ {
				for k, par := range []int{0, 1} {
					root := b.TempDir()
					os.Chmod(root, 0o755)
					d := &deploy.Deployer{Journal: journal.Journal{Root: root},
						Runtimes: map[string]runtime.Runtime{"netns": nsrt.Runtime{}, "docker": docker.Runtime{StateRoot: root, Parallel: par}}}
					t0 := time.Now()
					if _, err := d.Deploy(context.Background(), p, "bench"); err != nil {
						b.Fatal(err)
					}
					t[k] += time.Since(t0)
					t1 := time.Now()
					if err := d.Destroy(context.Background(), p.Lab); err != nil && !errors.Is(err, journal.ErrNotDeployed) {
						b.Fatal(err)
					}
					if k == 0 {
						destroy += time.Since(t1)
					}
				}
			}
			n := float64(b.N)
			b.ReportMetric(float64(len(p.Nodes)), "nodes")
			b.ReportMetric(t[0].Seconds()/n, "deploy-s")
			b.ReportMetric(destroy.Seconds()/n, "destroy-s")
			b.ReportMetric(t[1].Seconds()/t[0].Seconds(), "serial/concurrent")
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
