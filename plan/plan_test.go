package plan_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

var update = flag.Bool("update", false, "rewrite golden files")

func build(t *testing.T, path string) *plan.Plan {
	t.Helper()
	lab, err := spec.Load(path, kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(lab)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGolden pins the plan of every example: a change to resolution shows up as a diff.
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("../examples/*.yaml")
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			p := build(t, f)
			var buf bytes.Buffer
			if err := p.WriteText(&buf); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name+".plan.txt")
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./plan -update)", err)
			}
			if buf.String() != string(want) {
				t.Errorf("plan of %s differs from %s:\n%s", f, golden, buf.String())
			}
			// Same input, same plan.
			var again bytes.Buffer
			build(t, f).WriteText(&again)
			if again.String() != buf.String() {
				t.Error("plan is not deterministic")
			}
		})
	}
}

// TestJSONRoundTrip checks a stored plan decodes to the same plan, params typed by kind, for
// every example and study lab (every kind and endpoint service among them, transparent too).
func TestJSONRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("../examples/*.yaml")
	labs, _ := filepath.Glob("../experiments/labs/*.yaml")
	files = append(append(files, labs...), "../spec/testdata/all-kinds.yaml")
	seen := map[string]bool{}
	for _, f := range files {
		p := build(t, f)
		data, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		back, err := plan.Unmarshal(data, kinds.Spec())
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		again, err := json.Marshal(back)
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(data) {
			t.Errorf("%s: round trip differs:\n%s\n%s", f, data, again)
		}
		nodes := slices.Clone(p.Nodes)
		backNodes := slices.Clone(back.Nodes)
		if p.Transparent != nil {
			for i, n := range p.Transparent.Nodes {
				nodes = append(nodes, &plan.Node{Name: n.Name, Function: n.Function})
				backNodes = append(backNodes, &plan.Node{Name: back.Transparent.Nodes[i].Name, Function: back.Transparent.Nodes[i].Function})
			}
		}
		for i, n := range nodes {
			if n.Function == nil {
				continue
			}
			seen[n.Function.Kind] = true
			if want, got := reflect.TypeOf(n.Function.Params), reflect.TypeOf(backNodes[i].Function.Params); got != want {
				t.Errorf("%s: node %s (%s) params decoded as %v, want %v", f, n.Name, n.Function.Kind, got, want)
			}
		}
	}
	for _, k := range append(kinds.Names(), spec.EndpointHTTPServer) {
		if !seen[k] {
			t.Errorf("no example plans a %s; add one so its stored plan is checked", k)
		}
	}
	if _, err := plan.Unmarshal([]byte(`{"nodes":[{"name":"x","function":{"kind":"nope"}}]}`), kinds.Spec()); err == nil || !strings.Contains(err.Error(), `unknown kind "nope"`) {
		t.Errorf("unknown kind in a stored plan: %v", err)
	}
}

func TestRoutesAndTargets(t *testing.T) {
	tests := []struct {
		file, chain, target string
		port                uint16
		node                string
		routes              int
	}{
		{"../examples/baseline.yaml", "direct", "198.18.0.2", 0, "client", 0},
		{"../examples/fw.yaml", "web", "198.18.1.2", 0, "client", 1},
		{"../examples/fw-lb.yaml", "web", "198.18.1.2", 5201, "server", 1},
		{"../examples/chain-6.yaml", "long", "198.18.6.2", 0, "f3", 3},
		{"../examples/lb-3.yaml", "spread", "198.18.0.2", 5201, "web-2", 1},
	}
	for _, tt := range tests {
		p := build(t, tt.file)
		c := p.Chain(tt.chain)
		if c.Target.String() != tt.target || c.Port != tt.port {
			t.Errorf("%s: target %s:%d, want %s:%d", tt.file, c.Target, c.Port, tt.target, tt.port)
		}
		if n := len(p.Node(tt.node).Routes); n != tt.routes {
			t.Errorf("%s: node %s has %d routes, want %d", tt.file, tt.node, n, tt.routes)
		}
	}
}

func TestGroupMultipath(t *testing.T) {
	lab, err := spec.Decode([]byte(`name: mp
endpoints:
  client: {}
  server: {}
functions:
  a: {kind: forwarder}
  b: {kind: forwarder, instances: 2, weights: [1, 3]}
chains:
  - {from: client, to: server, hops: [a, b]}
`), "mp.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(lab)
	if err != nil {
		t.Fatal(err)
	}
	a := p.Node("a")
	if len(a.Routes) != 1 || len(a.Routes[0].NextHops) != 2 || a.Routes[0].NextHops[1].Weight != 3 {
		t.Fatalf("a's routes = %+v", a.Routes)
	}
	found := false
	for _, s := range a.Sysctls {
		found = found || s.Key == "net.ipv4.fib_multipath_hash_policy"
	}
	if !found {
		t.Error("multipath node lacks L4 hashing")
	}
	if p.Segment("chain0.1").Bridge == "" || p.Segment("chain0.2").Bridge == "" {
		t.Error("segments with three members must be bridges")
	}
}

func TestPlanErrors(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"lb without port", `name: e1
endpoints: {client: {}, server: {}}
functions: {lb: {kind: l4lb}}
chains: [{from: client, to: server, hops: [lb]}]
`, "l4lb needs a port"},
		{"pool too small", `name: e2
addressing: {pool: 198.18.0.0/24, prefix: 25}
endpoints: {client: {}, server: {}}
functions: {a: {kind: forwarder}, b: {kind: forwarder}}
chains: [{from: client, to: server, hops: [a, b]}]
`, "no free /25"},
		{"unused endpoint", `name: e3
endpoints: {client: {}, server: {}, other: {}}
chains: [{from: client, to: server}]
`, `endpoint "other" is in no chain`},
		{"dnat to nowhere", `name: e4
endpoints: {client: {}, server: {}}
functions: {n: {kind: nat, params: {dnat: [{protocol: tcp, port: 80, to: elsewhere}]}}}
chains: [{from: client, to: server, hops: [n]}]
`, "neither chain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lab, err := spec.Decode([]byte(tt.yaml), "e.yaml", kinds.Spec())
			if err != nil {
				t.Fatal(err)
			}
			_, err = plan.Build(lab)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestDriverPlanChecks(t *testing.T) {
	for _, tt := range []struct{ yaml, want string }{
		{"name: d\nruntime: docker\nendpoints:\n  client: {driver: macvlan}\n  server: {}\nchains: [{from: client, to: server}]\n", "driver macvlan on runtime docker needs emulated hosts"},
		{"name: d\nendpoints:\n  client: {driver: {type: host-device, device: eth9}}\n  a: {}\n  b: {}\nchains: [{from: client, to: a}, {from: client, to: b}]\n", "on 2 networks"},
	} {
		lab, err := spec.Decode([]byte(tt.yaml), "d.yaml", kinds.Spec())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := plan.Build(lab); err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "d.yaml:") {
			t.Errorf("Build: %v, want %q with file:line", err, tt.want)
		}
	}
}

// TestTransparentDocker: on docker a transparent plan has a segment per network (the Docker
// network, with the last address as its gateway, allocated around the engine's taken subnets)
// and an interface per port on every node; its one host is the machine's own namespace.
func TestTransparentDocker(t *testing.T) {
	lab, err := spec.Load("../examples/transparent-fw.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	lab.Runtime = spec.RuntimeDocker
	taken := netip.MustParsePrefix(spec.DefaultPool.Addr().String() + "/24")
	p, err := plan.BuildAvoiding(lab, []netip.Prefix{taken})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Segments) != 1 || p.Segments[0].Name != "net" {
		t.Fatalf("segments %+v, want one: net", p.Segments)
	}
	s := p.Segments[0]
	if s.Subnet.Overlaps(taken) || s.Subnet != p.Transparent.Networks[0].Subnet {
		t.Errorf("segment subnet %s: overlaps %s or differs from the network's %s", s.Subnet, taken, p.Transparent.Networks[0].Subnet)
	}
	if want := s.Subnet.Addr().As4(); s.Gateway.As4()[3] != 254 || s.Gateway.As4()[2] != want[2] {
		t.Errorf("gateway %s, want the subnet's last usable address", s.Gateway)
	}
	if h := p.Transparent.Hosts[0]; h.Netns != "" {
		t.Errorf("host netns %q, want the machine's own", h.Netns)
	}
	ports := 0
	for _, tn := range p.Transparent.Nodes {
		n := p.Node(tn.Name)
		if len(n.Interfaces) != len(tn.Ports) {
			t.Fatalf("node %s: %d interfaces for %d ports", tn.Name, len(n.Interfaces), len(tn.Ports))
		}
		for i, pt := range tn.Ports {
			ifc := n.Interfaces[i]
			if ifc.Name != pt.Ifname || ifc.Segment != pt.Network || ifc.Address != pt.Address || ifc.Address.Addr() == s.Gateway {
				t.Errorf("node %s: interface %+v for port %+v", tn.Name, ifc, pt)
			}
			ports++
		}
	}
	if len(s.Members) != ports {
		t.Errorf("segment members %v, want %d ports", s.Members, ports)
	}
	lab.Runtime = spec.RuntimeNetns
	if p, err := plan.Build(lab); err != nil || len(p.Segments) != 0 || p.Transparent.Hosts[0].Netns == "" {
		t.Errorf("netns plan changed: err %v, %d segments", err, len(p.Segments))
	}
}

// TestWriteTextLabImage: a kubernetes lab's own image (docker.image) is the plan's, and in
// its text; one without names none.
func TestWriteTextLabImage(t *testing.T) {
	for _, image := range []string{"", "example.org/node:1"} {
		var buf bytes.Buffer
		src := "name: img\nruntime: kubernetes\nendpoints:\n  client: {kind: client}\n  server: {kind: server}\nfunctions:\n  fw: {kind: forwarder}\nchains:\n  - {from: client, to: server, hops: [fw]}\n"
		if image != "" {
			src = strings.Replace(src, "runtime: kubernetes\n", "runtime: kubernetes\ndocker: {image: "+image+"}\n", 1)
		}
		lab, err := spec.Decode([]byte(src), "i.yaml", kinds.Spec())
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Build(lab)
		if err != nil {
			t.Fatal(err)
		}
		if p.Image != image {
			t.Errorf("plan image %q, want %q", p.Image, image)
		}
		if err := p.WriteText(&buf); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(buf.String(), "image example.org/node:1\n"); got != (image != "") {
			t.Errorf("image %q: plan text\n%s", image, buf.String())
		}
	}
}
