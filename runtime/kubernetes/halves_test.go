package kubernetes

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/hosts"
)

// TestNodeHalves: a topology on two Kubernetes nodes splits into one half per node, each
// building only its own host, every host's underlay its node's InternalIP, VXLAN devices in
// the node's namespace on the device the agent finds, the slot's VNIs and port kept; bad
// placements are refused.
func TestNodeHalves(t *testing.T) {
	topo := &hosts.Topology{Lab: "x", NodesExist: true, SteerPort: 4791,
		Hosts:    []hosts.Host{{Name: "h1", ID: 1}, {Name: "h2", ID: 2}},
		Networks: []hosts.Network{{Name: "net", Bridge: "br-net", VNI: 4096 + 100}},
		Nodes:    []hosts.Node{{Name: "client", Host: "h1"}, {Name: "server", Host: "h2"}}}
	addrs := map[string]netip.Addr{"k1": netip.MustParseAddr("198.18.20.1"), "k2": netip.MustParseAddr("198.18.20.2")}
	halves, err := nodeHalves(topo, map[string]string{"h1": "k1", "h2": "k2"}, addrs)
	if err != nil {
		t.Fatal(err)
	}
	for kn, want := range map[string]string{"k1": "h1", "k2": "h2"} {
		h := halves[kn]
		if h == nil || h.Local != want || h.UnderlayNS != "" || h.UnderlayIf != "" || h.SteerPort != 4791 || h.Networks[0].VNI != 4096+100 {
			t.Fatalf("half of %s: %+v", kn, h)
		}
		for i, hh := range h.Hosts {
			kn2 := []string{"k1", "k2"}[i]
			if hh.Underlay != netip.PrefixFrom(addrs[kn2], 32) {
				t.Errorf("half of %s: host %s underlay %s, want %s/32", kn, hh.Name, hh.Underlay, addrs[kn2])
			}
		}
	}
	if topo.Local != "" || topo.Hosts[0].Underlay.IsValid() {
		t.Errorf("nodeHalves changed the topology: %+v", topo)
	}
	for _, tc := range []struct {
		name     string
		hostNode map[string]string
		addrs    map[string]netip.Addr
		want     string
	}{
		{"host on no node", map[string]string{"h1": "k1"}, addrs, "host h2 is on no Kubernetes node"},
		{"two hosts on one node", map[string]string{"h1": "k1", "h2": "k1"}, addrs, "both on Kubernetes node k1"},
		{"node without address", map[string]string{"h1": "k1", "h2": "k3"}, addrs, "k3 has no InternalIP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := nodeHalves(topo, tc.hostNode, tc.addrs); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestLocalUnderlay: the agent finds the device of its node that holds the Local host's
// address (here the loopback's), and refuses an address no device holds.
func TestLocalUnderlay(t *testing.T) {
	half := func(addr string) *hosts.Topology {
		return &hosts.Topology{Lab: "x", Local: "h1",
			Hosts: []hosts.Host{{Name: "h1", Underlay: netip.PrefixFrom(netip.MustParseAddr(addr), 32)}}}
	}
	h := half("127.0.0.1")
	if err := localUnderlay(h); err != nil || h.UnderlayIf != "lo" {
		t.Errorf("127.0.0.1: device %q, %v; want lo", h.UnderlayIf, err)
	}
	if err := localUnderlay(half("198.18.255.254")); err == nil || !strings.Contains(err.Error(), "none holds it") {
		t.Errorf("an address no device holds: %v", err)
	}
}

// TestKubeNodeUnderlay: a node's InternalIP is its underlay (none without one), and a node
// whose boot ID is this machine's runs on this kernel (another's does not).
func TestKubeNodeUnderlay(t *testing.T) {
	here, err := bootID()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, json string
		ip         string // "" = none
		same       bool
	}{
		{"this kernel", `{"status":{"addresses":[{"type":"Hostname","address":"kn2"},{"type":"InternalIP","address":"198.19.253.2"}],"nodeInfo":{"bootID":"` + here + `"}}}`, "198.19.253.2", true},
		{"another machine", `{"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.7"}],"nodeInfo":{"bootID":"0b5e3c1e-0000-4000-8000-000000000000"}}}`, "10.0.0.7", false},
		{"no address, no boot ID", `{"status":{"addresses":[{"type":"Hostname","address":"x"}]}}`, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n kubeNode
			if err := json.Unmarshal([]byte(tc.json), &n); err != nil {
				t.Fatal(err)
			}
			ip, ok := n.internalIP()
			if got := map[bool]string{true: ip.String(), false: ""}[ok]; got != tc.ip {
				t.Errorf("internalIP %q, want %q", got, tc.ip)
			}
			if got := n.sameKernel(); got != tc.same {
				t.Errorf("sameKernel %v, want %v", got, tc.same)
			}
		})
	}
}
