package api

import (
	"os"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/journal"
)

// TestTransparentPorts lists the ports of a transparent lab on two emulated hosts: every port
// of every node, on the lab's networks, bound to the host its node sits on, so the OpenStack
// client resolves them by name.
func TestTransparentPorts(t *testing.T) {
	root := t.TempDir()
	j := journal.Journal{Root: root}
	data, err := os.ReadFile("../examples/transparent-hosts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := labtest.Plan(t, string(data))
	if p.Transparent == nil {
		t.Fatal("examples/transparent-hosts.yaml is not transparent")
	}
	if err := os.MkdirAll(j.NodeDir(p.Lab), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := j.WritePlan(p); err != nil {
		t.Fatal(err)
	}
	if err := j.WriteState(&journal.State{Lab: p.Lab, Status: journal.StatusReady, Started: time.Unix(1700000000, 0)}); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, root, Config{})
	want := 0
	hostOf := map[string]string{}
	for _, n := range p.Transparent.Nodes {
		want += len(n.Ports)
		hostOf[n.Name] = n.Host
	}
	code, m := h.do("GET", "/v2.0/ports", nil)
	if code != 200 || len(m["ports"].([]any)) != want || want == 0 {
		t.Fatalf("list ports: %d, %d ports, want %d: %v", code, len(m["ports"].([]any)), want, m)
	}
	n := p.Transparent.Nodes[len(p.Transparent.Nodes)-1]
	pt := n.Ports[0]
	code, m = h.do("GET", "/v2.0/ports?name="+PortName(n.Name, pt.Ifname), nil)
	got := m["ports"].([]any)
	if code != 200 || len(got) != 1 {
		t.Fatalf("?name=%s: %d %v", PortName(n.Name, pt.Ifname), code, m)
	}
	port := got[0].(map[string]any)
	if port["id"] != PortID(p.Lab, n.Name, pt.Ifname) || port["network_id"] != NetworkID(p.Lab, pt.Network) ||
		port["binding:host_id"] != hostOf[n.Name] || port["device_id"] != DeviceID(p.Lab, n.Name) {
		t.Errorf("port %s: %v (host %s)", PortName(n.Name, pt.Ifname), port, hostOf[n.Name])
	}
	// Dual-stack: an IPv4 and an IPv6 fixed IP, each on its subnet of the port's network.
	ips := port["fixed_ips"].([]any)
	if len(ips) != 2 || ips[0].(map[string]any)["ip_address"] != pt.Address.Addr().String() ||
		ips[1].(map[string]any)["ip_address"] != pt.Address6.Addr().String() ||
		ips[1].(map[string]any)["subnet_id"] != SubnetID6(p.Lab, pt.Network) {
		t.Errorf("fixed_ips = %v, want %s and %s", ips, pt.Address.Addr(), pt.Address6.Addr())
	}
	code, m = h.do("GET", "/v2.0/networks", nil)
	if code != 200 || len(m["networks"].([]any)) != len(p.Transparent.Networks) {
		t.Errorf("networks: %d %v, want %d", code, m, len(p.Transparent.Networks))
	}
	var subnet6 string
	for _, tn := range p.Transparent.Networks {
		if tn.Name == pt.Network {
			subnet6 = tn.Subnet6.String()
		}
	}
	code, m = h.do("GET", "/v2.0/subnets/"+SubnetID6(p.Lab, pt.Network), nil)
	if sn, _ := m["subnet"].(map[string]any); code != 200 || sn["ip_version"] != 6.0 || sn["cidr"] != subnet6 {
		t.Errorf("IPv6 subnet of %s: %d %v, want ip_version 6, cidr %s", pt.Network, code, m, subnet6)
	}
}
