package bench

import (
	"testing"

	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

func TestAddShaping(t *testing.T) {
	lab, err := spec.Load("../examples/shaped.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(lab)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	addShaping(env, &experiment.Experiment{Scenarios: []*experiment.Scenario{{Name: "shaped", Plan: p}, {Name: "none"}}})
	want := "web.0 rate 10gbit burst 1048576b; web.1 rate 1gbit burst 500000b"
	if len(env) != 1 || env["shaping shaped"] != want {
		t.Errorf("env = %v, want shaping shaped = %q", env, want)
	}
}
