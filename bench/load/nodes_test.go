package load_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/bench/load"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

const pairLab = `
name: t-rtt-bg
endpoints:
  client: {kind: client}
  server: {kind: server}
chains:
  - {name: c, from: client, to: server}
`

func bgPlan(t testing.TB, count int) *plan.Plan {
	t.Helper()
	lab, err := spec.Decode([]byte(pairLab), "bg.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	if err := load.AddNodes(lab, count); err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(lab)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAddNodes(t *testing.T) {
	p := bgPlan(t, 8)
	if len(p.Nodes) != 10 || len(p.Chains) != 5 || p.Chain("bgc4") == nil || p.Node("bg8") == nil {
		t.Fatalf("plan: %d nodes, %d chains", len(p.Nodes), len(p.Chains))
	}
	if c := p.Chain("c"); c.Path[0] != "client" || len(p.Node("client").Interfaces) != 1 {
		t.Error("background nodes changed the measured chain")
	}
	for _, bad := range []struct {
		n    int
		want string
	}{{3, "must be even"}, {-2, "must be 0-256"}, {258, "must be 0-256"}} {
		lab, _ := spec.Decode([]byte(pairLab), "bg.yaml", kinds.Spec())
		if err := load.AddNodes(lab, bad.n); !errors.Is(err, load.ErrNodes) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("AddNodes(%d) = %v, want %q", bad.n, err, bad.want)
		}
	}
}

// TestNodesLoad: 4 background nodes burn CPU in their own cgroups, then push UDP between
// their pairs; Stop leaves nothing running.
func TestNodesLoad(t *testing.T) {
	yaml := pairLab + "  - {name: bgc1, from: bg1, to: bg2}\n  - {name: bgc2, from: bg3, to: bg4}\n"
	yaml = strings.Replace(yaml, "  server: {kind: server}\n", "  server: {kind: server}\n  bg1: {}\n  bg2: {}\n  bg3: {}\n  bg4: {}\n", 1)
	l := labtest.Deploy(t, yaml)
	labtest.Exclusive(t)
	env := l.ProbeEnv(t, "c")
	before, _ := l.Node(t, "bg3").CPU()
	ld, err := load.StartNodes(context.Background(), env, load.NodesConfig{Kind: load.KindCPU, Count: 4, Limit: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	after, _ := l.Node(t, "bg3").CPU()
	if err := ld.Stop(); err != nil {
		t.Fatal(err)
	}
	gone(t, ld)
	if used := after.Total() - before.Total(); used < 100*time.Millisecond {
		t.Errorf("bg3 used %s of CPU in 0.5 s of cpu load", used)
	}
	if len(ld.PIDs()) != 4 {
		t.Errorf("%d load processes, want 4", len(ld.PIDs()))
	}

	ld, err = load.StartNodes(context.Background(), env, load.NodesConfig{Kind: load.KindNetwork, Count: 4, Bitrate: "20M", Limit: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := ld.Stop(); err != nil {
		t.Fatal(err)
	}
	gone(t, ld)
	if len(ld.PIDs()) != 4 { // an iperf3 server and client per pair
		t.Errorf("%d load processes, want 4", len(ld.PIDs()))
	}
}

// BenchmarkDeploy64Background: a grid cell with 64 background nodes (the measured pair plus
// 32 background pairs, 66 namespaces) deployed and destroyed on netns. Reports deploy-ms and
// destroy-ms; the target is deploy under 2 s.
func BenchmarkDeploy64Background(b *testing.B) {
	labtest.RequireRoot(b)
	p := bgPlan(b, 64)
	d := &deploy.Deployer{Journal: journal.Journal{Root: b.TempDir()}}
	labtest.Exclusive(b)
	var dep, des time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := d.Deploy(context.Background(), p, "bench"); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := d.Destroy(context.Background(), p.Lab); err != nil {
			b.Fatal(err)
		}
		dep += t1.Sub(t0)
		des += time.Since(t1)
	}
	b.ReportMetric(float64(dep.Milliseconds())/float64(b.N), "deploy-ms")
	b.ReportMetric(float64(des.Milliseconds())/float64(b.N), "destroy-ms")
	b.ReportMetric(float64(len(p.Nodes)), "nodes")
}
