package plan_test

import (
	"testing"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// A transparent lab's vm: settings make its node a VM and the plan's runtime vm; the other
// nodes stay namespaces; runtime: vm makes every function one.
func TestTransparentVM(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		vms       map[string]bool
	}{
		{"vm on a function", `name: tv
steering: transparent
networks: [net]
endpoints: {client: {kind: client}, server: {kind: server}}
functions:
  fwd: {kind: forwarder, vm: {cpus: 1}}
  fw: {kind: firewall}
`, map[string]bool{"fwd": true, "fw": false, "client": false, "server": false}},
		{"runtime vm", `name: tv
runtime: vm
steering: transparent
networks: [net]
endpoints: {client: {kind: client}, server: {kind: server}}
functions:
  fwd: {kind: forwarder}
  fw: {kind: firewall}
`, map[string]bool{"fwd": true, "fw": true, "client": false, "server": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lab, err := spec.Decode([]byte(tc.src), "tv.yaml", kinds.Spec())
			if err != nil {
				t.Fatal(err)
			}
			p, err := plan.Build(lab)
			if err != nil {
				t.Fatal(err)
			}
			if p.Runtime != spec.RuntimeVM || p.Transparent == nil {
				t.Fatalf("runtime %q, transparent %v; want a transparent plan on runtime vm", p.Runtime, p.Transparent != nil)
			}
			for name, want := range tc.vms {
				n := p.Node(name)
				if n == nil {
					t.Fatalf("no node %s", name)
				}
				if (n.VM != nil) != want {
					t.Errorf("node %s: vm %+v, want a VM %v", name, n.VM, want)
				}
				if n.VM != nil && (n.VM.Memory != spec.DefaultVMMemory || n.VM.Where == "") {
					t.Errorf("node %s: vm %+v, want %d MiB and the place in the lab file", name, n.VM, spec.DefaultVMMemory)
				}
			}
		})
	}
}
