package plan_test

import (
	"strings"
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

// A routed VM with backend macvtap: its segments are bridges (the macvtaps' parent), its
// interfaces sit on the bridge itself (Peer fabric/brN: no port of their own), the endpoints'
// veths are bridge ports; the backend is kept in the plan.
func TestMacvtapSegments(t *testing.T) {
	lab, err := spec.Decode([]byte(`name: mv
endpoints: {client: {kind: client}, server: {kind: server}}
functions:
  fwd: {kind: forwarder, vm: {backend: macvtap}}
chains: [{from: client, to: server, hops: [fwd]}]
`), "mv.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(lab)
	if err != nil {
		t.Fatal(err)
	}
	fwd := p.Node("fwd")
	if !fwd.VM.Macvtap() || fwd.VM.Backend != spec.VMBackendMacvtap {
		t.Fatalf("fwd vm %+v, want backend macvtap", fwd.VM)
	}
	if len(p.Segments) != 2 {
		t.Fatalf("%d segments, want 2", len(p.Segments))
	}
	for _, s := range p.Segments {
		if s.Bridge == "" {
			t.Errorf("segment %s is a veth pair; a macvtap needs a bridge", s.Name)
		}
	}
	for _, i := range fwd.Interfaces {
		if seg := p.Segment(i.Segment); i.Peer != "fabric/"+seg.Bridge {
			t.Errorf("fwd/%s peer %q, want fabric/%s", i.Name, i.Peer, seg.Bridge)
		}
	}
	for _, name := range []string{"client", "server"} {
		if peer := p.Node(name).Interfaces[0].Peer; peer == "" || peer == "fabric/"+p.Segment(p.Node(name).Interfaces[0].Segment).Bridge {
			t.Errorf("%s peer %q, want a bridge port of its own", name, peer)
		}
	}
	// The default backend keeps the veth pairs.
	lab, _ = spec.Decode([]byte("name: mv\nendpoints: {client: {kind: client}, server: {kind: server}}\nfunctions:\n  fwd: {kind: forwarder, vm: {}}\nchains: [{from: client, to: server, hops: [fwd]}]\n"), "mv.yaml", kinds.Spec())
	if p, err = plan.Build(lab); err != nil {
		t.Fatal(err)
	}
	if p.Node("fwd").VM.Macvtap() || p.Segments[0].Bridge != "" {
		t.Errorf("backend tap: vm %+v, segment bridge %q; want tap on a veth pair", p.Node("fwd").VM, p.Segments[0].Bridge)
	}
}

// TestMacvtapOnHosts: on emulated hosts a macvtap VM's interfaces are on its host's bridges
// (no port of their own, as a macvlan's), its neighbours' are bridge ports.
func TestMacvtapOnHosts(t *testing.T) {
	lab, err := spec.Decode([]byte(`name: mv
hosts: [h1, h2]
endpoints: {client: {kind: client, host: h1}, server: {kind: server, host: h1}}
functions:
  fwd: {kind: forwarder, host: h2, vm: {backend: macvtap}}
chains: [{from: client, to: server, hops: [fwd]}]
`), "mv.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(lab)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range p.Node("fwd").Interfaces {
		if seg := p.Segment(i.Segment); seg.Bridge == "" || i.Peer != "host-h2/"+seg.Bridge {
			t.Errorf("fwd/%s peer %q, want host-h2/%s", i.Name, i.Peer, seg.Bridge)
		}
	}
	if peer := p.Node("client").Interfaces[0].Peer; !strings.HasPrefix(peer, "host-h1/s") {
		t.Errorf("client peer %q, want a port of its own on h1's bridge", peer)
	}
}
