package runtimes

import (
	"slices"
	"testing"

	"github.com/sfclab/sfclab/spec"
)

// TestRegisterMatchesSpec pins that the runtimes a lab file may name (spec.RuntimeNames, with
// their traits) are exactly the registered ones, each under its own Name.
func TestRegisterMatchesSpec(t *testing.T) {
	all := All(Options{})
	var registered []string
	for name, rt := range all {
		registered = append(registered, name)
		if rt.Name() != name {
			t.Errorf("runtime registered as %q calls itself %q", name, rt.Name())
		}
		if _, ok := spec.TraitsOf(name); !ok {
			t.Errorf("runtime %q is registered but spec.TraitsOf does not know it", name)
		}
	}
	slices.Sort(registered)
	names := slices.Sorted(slices.Values(spec.RuntimeNames()))
	if !slices.Equal(registered, names) {
		t.Errorf("registered runtimes %v, spec's %v", registered, names)
	}
}
