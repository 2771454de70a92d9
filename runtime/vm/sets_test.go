package vm_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/probe/iperf3"
	"github.com/sfclab/sfclab/probe/ping"
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

// TestProbeProgramsInImage: the programs the probes run in a guest (iperf3's server and
// client, ping) are in every guest image, whatever the lab's kinds need.
func TestProbeProgramsInImage(t *testing.T) {
	for _, tt := range []struct {
		probe string
		argv  []string
	}{
		{"iperf3 server", iperf3.ServerArgs(5201)},
		{"iperf3 client", iperf3.Config{}.ClientArgs("198.18.0.1", 5201)},
		{"ping", ping.Config{}.Args("198.18.0.1")},
	} {
		if !slices.Contains(vm.BasePrograms, tt.argv[0]) {
			t.Errorf("%s runs %s, which is not in the guest images' BasePrograms %v", tt.probe, tt.argv[0], vm.BasePrograms)
		}
	}
}

// TestGuestAgentDeps: sfclab-guest, which every guest's kernel unpacks at boot, does not link
// the probes' and results' packages (SQLite among them: 4 MB more when runtime/vm imported
// package probe); runtime/vm uses the dependency-free tcprtt/exchange for tcprtt in a guest.
func TestGuestAgentDeps(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("SKIPPED LOUDLY: no go toolchain to list sfclab-guest's packages: %v", err)
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/sfclab/sfclab/cmd/sfclab-guest").Output()
	if err != nil {
		t.Fatal(err)
	}
	deps := strings.Fields(string(out))
	for _, bad := range []string{"github.com/sfclab/sfclab/probe", "github.com/sfclab/sfclab/results", "modernc.org/sqlite"} {
		if slices.Contains(deps, bad) {
			t.Errorf("sfclab-guest links %s", bad)
		}
	}
}
