package plantest

import (
	"strings"
	"testing"

	"github.com/sfclab/sfclab/spec"
)

// TestLoadAs: the plan is the file's lab under the given name, with the edits applied in
// order, and otherwise the file's.
func TestLoadAs(t *testing.T) {
	orig := Load(t, "../../examples/fw.yaml")
	var order []string
	p := LoadAs(t, "../../examples/fw.yaml", "t-plantest",
		func(l *spec.Lab) { order = append(order, "first"); l.Runtime = spec.RuntimeDocker },
		func(l *spec.Lab) { order = append(order, "second:"+l.Runtime) })
	if p.Lab != "t-plantest" || orig.Lab == p.Lab {
		t.Errorf("lab %q (file's %q), want t-plantest", p.Lab, orig.Lab)
	}
	if p.Runtime != spec.RuntimeDocker || strings.Join(order, ",") != "first,second:"+spec.RuntimeDocker {
		t.Errorf("runtime %q, edits ran %v: want docker, first then second seeing it", p.Runtime, order)
	}
	if len(p.Nodes) != len(orig.Nodes) || len(p.Chains) != len(orig.Chains) {
		t.Errorf("%d nodes and %d chains, the file's plan has %d and %d", len(p.Nodes), len(p.Chains), len(orig.Nodes), len(orig.Chains))
	}
}
