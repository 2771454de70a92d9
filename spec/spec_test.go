package spec_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/firewall"
	"github.com/sfclab/sfclab/vnf/kinds"
	"github.com/sfclab/sfclab/vnf/l4lb"
)

const good = `name: t1
endpoints:
  client: {kind: client}
  server: {kind: server, instances: 2, weights: [1, 3]}
functions:
  fw:
    kind: firewall
    params:
      masquerade: true
      rules:
        - {action: deny, protocol: tcp, port: 9999}
        - {action: allow, protocol: udp, port: "5000-5100", source: 198.18.0.0/24}
  lb: {kind: l4lb, params: {impl: nft, port: 80}}
chains:
  - from: client
    to: server
    classifier: {protocol: tcp, destination_port: 80}
    hops: [fw, lb]
`

func TestDecodeGood(t *testing.T) {
	lab, err := spec.Decode([]byte(good), "good.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	fw := lab.Functions["fw"].Params.(*firewall.FirewallParams)
	if fw.Backend != spec.BackendNftables || fw.Policy != "accept" || !fw.Masquerade || len(fw.Rules) != 2 {
		t.Errorf("firewall params = %+v", fw)
	}
	if r := fw.Rules[1].Port; r.From != 5000 || r.To != 5100 {
		t.Errorf("port range = %+v", r)
	}
	lb := lab.Functions["lb"].Params.(*l4lb.L4LBParams)
	if lb.Impl != l4lb.ImplNft || lb.Balance != "source" || lb.Seed == 0 || !lb.SpliceOn() {
		t.Errorf("l4lb defaults = %+v", lb)
	}
	c := lab.Chains[0]
	if c.Name != "chain0" || c.Hops[1].Name != "lb" || c.Hops[1].Pos.Line != 18 {
		t.Errorf("chain = %+v", c)
	}
	if lab.Runtime != spec.RuntimeNetns || lab.Addressing.Pool != "198.18.0.0/15" || lab.Addressing.Prefix != 24 || lab.MTU != 1500 {
		t.Errorf("lab defaults = %+v", lab)
	}
}

// badLab is one bad lab file of TestDecodeBad and the message parts its error must hold.
type badLab struct {
	name, yaml string
	want       []string
}

// badLabs are the bad lab files of TestDecodeBad; every one is also a seed of FuzzDecode
// (TestFuzzSeedsCoverBadLabs).
func badLabs(t testing.TB) []badLab {
	t.Helper()
	base := func(repl ...string) string {
		s := good
		for i := 0; i+1 < len(repl); i += 2 {
			if !strings.Contains(s, repl[i]) {
				t.Fatalf("test setup: %q not in the good lab", repl[i])
			}
			s = strings.Replace(s, repl[i], repl[i+1], 1)
		}
		return s
	}
	return []badLab{
		{"unknown top-level field", base("name: t1\n", "name: t1\nnodez: 3\n"), []string{"bad.yaml:2:1:", `unknown field "nodez" in lab`}},
		{"unknown param field", base("masquerade: true", "masquerad: true"), []string{"bad.yaml:9:7:", `unknown field "masquerad" in firewall params`, "masquerade"}},
		{"unknown rule field", base("{action: deny,", "{acton: deny,"), []string{"bad.yaml:11:12:", `unknown field "acton"`}},
		{"yaml syntax error", base("  fw:\n", "  fw:\n   - : [\n"), []string{"bad.yaml:"}},
		{"wrong type", base("instances: 2", "instances: two"), []string{"bad.yaml:4:37:", "endpoint server.instances must be a whole number, got `two`"}},
		{"endpoints as a list", base("endpoints:\n  client: {kind: client}\n  server: {kind: server, instances: 2, weights: [1, 3]}\n", "endpoints: [client, server]\n"), []string{"bad.yaml:2:12:", "endpoints must be a mapping of name to endpoint, got a list"}},
		{"rules not a list", base("      rules:\n        - {action: deny, protocol: tcp, port: 9999}\n        - {action: allow, protocol: udp, port: \"5000-5100\", source: 198.18.0.0/24}\n", "      rules: 3\n"), []string{"firewall params.rules must be a list of firewall rules, got `3`"}},
		{"bool not a bool", base("masquerade: true", "masquerade: maybe"), []string{"bad.yaml:9:19:", "masquerade must be true or false, got `maybe`"}},
		{"chains as a mapping", base("chains:\n  - from: client\n", "chains:\n  a:\n    from: client\n"), []string{"chains must be a list of chains, got a mapping"}},
		{"unknown kind", base("kind: firewall", "kind: firewal"), []string{"bad.yaml:7:5:", `unknown kind "firewal"`, "forwarder"}},
		{"http server unknown", base("server: {kind: server,", "server: {kind: http-server, http: {server: lighttpd},"), []string{"bad.yaml:4:", `endpoint "server": http server "lighttpd" is not one of apache, nginx`}},
		{"http object twice", base("server: {kind: server,", "server: {kind: http-server, http: {objects: [1k, 1k]},"), []string{`endpoint "server": object size "1k" listed twice`}},
		{"http object not a size", base("server: {kind: server,", "server: {kind: http-server, http: {objects: [huge]},"), []string{`endpoint "server": object size "huge" is not a size`}},
		{"http unknown field", base("server: {kind: server,", "server: {kind: http-server, http: {sever: nginx},"), []string{"bad.yaml:4:", `unknown field "sever"`, "objects, port, server"}},
		{"http on a plain server", base("server: {kind: server,", "server: {kind: server, http: {port: 81},"), []string{`endpoint "server": http: is for kind http-server`}},
		{"hop names unknown function", base("hops: [fw, lb]", "hops: [fw, lbb]"), []string{"bad.yaml:18:16:", `unknown function "lbb"`}},
		{"hop is an endpoint", base("hops: [fw, lb]", "hops: [fw, server]"), []string{`hop "server" is an endpoint`}},
		{"from unknown", base("from: client", "from: cliente"), []string{"bad.yaml:15:11:", `unknown endpoint "cliente"`}},
		{"duplicate name", base("  lb: {kind", "  server: {kind"), []string{"is already used by endpoint"}},
		{"duplicate key", base("  lb: {kind", "  fw: {kind"), []string{"bad.yaml:13:", "already defined"}},
		{"empty chains", base("chains:\n  - from: client\n    to: server\n    classifier: {protocol: tcp, destination_port: 80}\n    hops: [fw, lb]\n", "chains: []\n"), []string{"no chains"}},
		{"empty chain entry", base("chains:\n", "chains:\n  - {}\n"), []string{`chain "chain0" is empty or incomplete`}},
		{"bad cidr", base("source: 198.18.0.0/24", "source: 198.18.0.0/33"), []string{"not a CIDR prefix"}},
		{"host bits", base("source: 198.18.0.0/24", "source: 198.18.0.1/24"), []string{"host bits set", "198.18.0.0/24"}},
		{"IPv6 rule in a routed lab", base("source: 198.18.0.0/24", "source: 2001:2::/48"), []string{"bad.yaml:7:5:", "rule 2 has an IPv6 address", "use steering: transparent"}},
		{"bpf datapath in a routed lab", base("  lb: {kind: l4lb, params: {impl: nft, port: 80}}", "  lb: {kind: forwarder, params: {datapath: bpf}}"), []string{"bad.yaml:13:7:", "datapath bpf is transparent steering's"}},
		{"bpf offload in a routed lab", base("      masquerade: true", "      masquerade: true\n      offload: bpf"), []string{"bad.yaml:7:5:", "offload bpf is transparent steering's"}},
		{"unknown offload", base("      masquerade: true", "      masquerade: true\n      offload: flowtable"), []string{"bad.yaml:7:5:", `offload "flowtable" is not one of [bpf none]`}},
		{"unknown datapath", base("  lb: {kind: l4lb, params: {impl: nft, port: 80}}", "  lb: {kind: forwarder, params: {datapath: xdp}}"), []string{"bad.yaml:13:7:", `datapath "xdp" is not one of [bpf kernel]`}},
		{"IPv6 host bits", base("source: 198.18.0.0/24", "source: 2001:2::1/48"), []string{"host bits set", "2001:2::/48"}},
		{"bad port", base("port: 9999", "port: 70000"), []string{"bad.yaml:11:", "not a number from 1 to 65535"}},
		{"port range backwards", base(`"5000-5100"`, `"5100-5000"`), []string{"runs backwards"}},
		{"ports without protocol", base("{protocol: tcp, destination_port: 80}", "{destination_port: 80}"), []string{"ports but no protocol"}},
		{"name too long", base("  lb: {kind", "  loadbalancer-one: {kind", "fw, lb]", "fw, loadbalancer-one]"), []string{"too long for an interface name", "IFNAMSIZ"}},
		{"instance suffix too long", base("server: {kind: server, instances: 2", "servername-abcd: {kind: server, instances: 2", "to: server", "to: servername-abcd"), []string{`"servername-abcd-2" has 17 characters`}},
		{"weights count", base("weights: [1, 3]", "weights: [1]"), []string{"1 weights for 2 instances"}},
		{"overlapping subnets", base("hops: [fw, lb]\n", "hops: [fw, lb]\n    subnets: [198.18.0.0/24, 198.18.0.0/25, 198.18.2.0/24]\n"), []string{"overlaps 198.18.0.0/24"}},
		{"subnet count", base("hops: [fw, lb]\n", "hops: [fw, lb]\n    subnets: [198.18.0.0/24]\n"), []string{"1 subnets for 3 segments"}},
		{"unused function", base("hops: [fw, lb]", "hops: [fw]"), []string{`function "lb" is not a hop of any chain`}},
		{"function in two places", base("hops: [fw, lb]", "hops: [fw, lb, fw]"), []string{`function "fw" is already a hop`}},
		{"haproxy udp", base("{impl: nft, port: 80}", "{impl: haproxy, protocol: udp, port: 80}"), []string{"balances tcp only"}},
		{"loop unknown", base("{impl: nft, port: 80}", "{impl: sfclab, port: 80, loop: threads}"), []string{`loop "threads" is not one of [goroutines]`}},
		{"loop without sfclab", base("{impl: nft, port: 80}", "{impl: haproxy, port: 80, loop: epoll}"), []string{"loop is a parameter of impl sfclab"}},
		{"docker settings without docker", base("name: t1\n", "name: t1\ndocker: {attach: nat}\n"), []string{"docker: settings need runtime: docker"}},
		{"lab name", base("name: t1", "name: T1"), []string{`lab name "T1"`}},
		{"empty file", "", []string{"empty"}},
		{"chain to itself", base("to: server", "to: client"), []string{"to itself"}},
	}
}

// TestDecodeBad checks that each kind of bad input gets one clear message at the right place.
func TestDecodeBad(t *testing.T) {
	tests := badLabs(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := spec.Decode([]byte(tt.yaml), "bad.yaml", kinds.Spec())
			if err == nil {
				t.Fatalf("no error for:\n%s", tt.yaml)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := spec.Load(filepath.Join(t.TempDir(), "nope.yaml"), kinds.Spec())
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("err = %v", err)
	}
}

func TestExamplesValid(t *testing.T) {
	files, _ := filepath.Glob("../examples/*.yaml")
	if len(files) < 5 {
		t.Fatalf("found %d examples, want at least 5", len(files))
	}
	for _, f := range files {
		if _, err := spec.Load(f, kinds.Spec()); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestErrorsAreSpecErrors(t *testing.T) {
	_, err := spec.Decode([]byte("name: x\nendpoints: {}\nchains: []\n"), "x.yaml", kinds.Spec())
	var es spec.Errors
	if !errors.As(err, &es) || len(es) < 2 {
		t.Fatalf("want several spec errors, got %v", err)
	}
	if _, err := os.Stat("testdata"); err != nil {
		t.Skip("no testdata")
	}
}

func TestDriverValidation(t *testing.T) {
	lab := func(client string) string {
		return "name: d\nendpoints:\n  client: " + client + "\n  server: {}\nchains: [{from: client, to: server}]\n"
	}
	tests := []struct{ name, client, want string }{
		{"macvlan by name", "{driver: macvlan}", ""},
		{"host-device", "{driver: {type: host-device, device: eth5}}", ""},
		{"sriov", "{driver: {type: sriov, pf: ens1f0, vf: 2, vlan: 10, mac: \"02:00:00:00:00:01\"}}", ""},
		{"macvtap", "{driver: macvtap}", ""},
		{"unknown", "{driver: macvtab}", `driver "macvtab" is not one of [veth macvlan macvtap host-device sriov ebpf-redirect]`},
		{"host-device without device", "{driver: {type: host-device}}", "driver host-device needs device"},
		{"sriov without pf", "{driver: {type: sriov}}", "driver sriov needs pf"},
		{"vlan range", "{driver: {type: sriov, pf: p, vlan: 5000}}", "vlan 5000 is outside 0-4094"},
		{"multicast mac", "{driver: {type: sriov, pf: p, mac: \"01:00:5e:00:00:01\"}}", "not a unicast Ethernet address"},
		{"device on macvlan", "{driver: {type: macvlan, device: eth5}}", "driver macvlan has no device"},
		{"instances", "{instances: 2, driver: {type: host-device, device: eth5}}", "cannot serve 2 instances"},
		{"unknown field", "{driver: {type: sriov, pff: x}}", `unknown field "pff"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := spec.Decode([]byte(lab(tt.client)), "d.yaml", kinds.Spec())
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "d.yaml:3:") {
				t.Fatalf("err = %v; want %q at d.yaml:3", err, tt.want)
			}
		})
	}
}
