package vm_test

import (
	"slices"
	"testing"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/runtime/vm"
)

// TestProgramSets: each VM node's image holds what its own kind needs: the forwarders share
// an image without Squid, the proxy's image has it, namespace nodes have none.
func TestProgramSets(t *testing.T) {
	p := labtest.Plan(t, `
name: t-vmsets
endpoints:
  client: {kind: client}
  web: {kind: http-server, http: {objects: [1k]}}
functions:
  f1: {kind: forwarder, vm: {}}
  proxy: {kind: http-proxy, vm: {}, params: {port: 3128}}
  f2: {kind: forwarder, vm: {}}
chains:
  - {name: web, from: client, to: web, hops: [f1, proxy, f2]}
`)
	sets, err := vm.ProgramSets(p)
	if err != nil {
		t.Fatal(err)
	}
	byNode := map[string][]string{}
	for _, s := range sets {
		for _, n := range s.Nodes {
			byNode[n] = s.Programs
		}
	}
	if len(sets) != 2 || len(byNode) != 3 {
		t.Fatalf("sets = %+v; want 2 sets for the 3 VM nodes", sets)
	}
	if !slices.Contains(byNode["proxy"], "squid") {
		t.Errorf("proxy's image programs %v lack squid", byNode["proxy"])
	}
	for _, f := range []string{"f1", "f2"} {
		if slices.Contains(byNode[f], "squid") {
			t.Errorf("forwarder %s's image programs %v hold squid", f, byNode[f])
		}
	}
	if !slices.Equal(byNode["f1"], byNode["f2"]) {
		t.Errorf("the forwarders' programs differ: %v, %v", byNode["f1"], byNode["f2"])
	}
}
