package cpu

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/results"
)

// fakeNode is a node whose cgroup counter advances 10 ms per read.
type fakeNode struct {
	probe.Node
	used time.Duration
}

func (n *fakeNode) CPU() (cgroup.Usage, error) {
	n.used += 10 * time.Millisecond
	return cgroup.Usage{User: n.used}, nil
}

// engineNode also has the engine capability: each reading adds 1 s of container CPU over 4 s
// of host CPU on 2 CPUs, 50 %.
type engineNode struct {
	fakeNode
	reads int
}

func (n *engineNode) EngineCPU(context.Context) (cgroup.EngineStats, error) {
	n.reads++
	return cgroup.EngineStats{CPU: time.Duration(n.reads) * time.Second, System: time.Duration(n.reads) * 4 * time.Second, CPUs: 2}, nil
}

// TestRecordingEngine: a node with the engine capability gets docker_cpu_percent from the
// engine's two readings; a node without it gets none; both get their cgroup figures.
func TestRecordingEngine(t *testing.T) {
	nodes := map[string]probe.Node{"box": &engineNode{}, "ns": &fakeNode{}}
	p := &plan.Plan{Nodes: []*plan.Node{{Name: "box"}, {Name: "ns"}}}
	env := probe.Env{Plan: p, Node: func(name string) (probe.Node, error) { return nodes[name], nil }}
	r, err := StartRecording(context.Background(), env, "")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	var got []results.Sample
	if err := r.Stop(func(x results.Sample) { got = append(got, x) }, nil); err != nil {
		t.Fatal(err)
	}
	engine, user := map[string]float64{}, map[string]bool{}
	for _, x := range got {
		switch x.Metric {
		case "docker_cpu_percent":
			engine[x.Labels["node"]] = x.Value
		case "cpu_user":
			user[x.Labels["node"]] = true
		}
	}
	if len(engine) != 1 || math.Abs(engine["box"]-50) > 1e-9 {
		t.Errorf("engine figures %v, want box at 50 %% and none for ns", engine)
	}
	if !user["box"] || !user["ns"] {
		t.Errorf("cgroup figures for %v, want box and ns", user)
	}
}
