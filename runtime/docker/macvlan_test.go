package docker_test

import (
	"context"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/runtime/docker"
)

// TestMacvlanDriver: two endpoints with driver macvlan on docker get a macvlan network (bridge
// mode on the engine's dummy parent): each container's interface is a macvlan device with its
// plan address, they reach each other, nothing of the network reaches the host (no bridge, no
// address of the segment on the host), and destroy leaves no network, container or dummy
// parent behind.
func TestMacvlanDriver(t *testing.T) {
	requireEngine(t)
	p := decodeLab(t, "name: t-dmv\nruntime: docker\nendpoints:\n  client: {driver: macvlan}\n  server: {driver: macvlan}\nchains: [{from: client, to: server}]\n")
	seg := p.Segments[0]
	netName := docker.NetworkName(p.Lab, seg.Name)
	var parent string
	t.Cleanup(func() {
		if parent == "" {
			return
		}
		if _, err := net.InterfaceByName(parent); err == nil {
			t.Errorf("the network's parent %s is still on the host after destroy", parent)
		}
	})
	d := deployer(t)
	deployLab(t, d, p)

	out, err := exec.Command("docker", "network", "inspect", "-f", "{{.Driver}} {{.Internal}} {{index .Options \"macvlan_mode\"}} {{.Id}} {{index .Options \"parent\"}}", netName).Output()
	if err != nil {
		t.Fatalf("docker network inspect %s: %v", netName, err)
	}
	f := strings.Fields(string(out))
	if len(f) < 4 || f[0] != "macvlan" || f[1] != "true" || f[2] != "bridge" {
		t.Fatalf("network %s: %q, want a macvlan network, internal, bridge mode", netName, out)
	}
	parent = "dm-" + f[3][:12] // the engine's dummy parent of an internal macvlan network
	if len(f) == 5 {
		parent = f[4]
	}
	if _, err := net.InterfaceByName(parent); err != nil {
		t.Errorf("the network's parent %s is not on the host: %v", parent, err)
	}
	for _, name := range []string{"client", "server"} {
		n := p.Node(name)
		ns, err := node(t, d, p, name).OpenNS()
		if err != nil {
			t.Fatal(err)
		}
		dev, err := ns.Inspect(n.Interfaces[0].Name)
		ns.Close()
		if err != nil || !dev.Exists || dev.Kind != "macvlan" || !dev.HasAddress {
			t.Errorf("%s %s: %+v, %v; want a macvlan device with its address", name, n.Interfaces[0].Name, dev, err)
		}
	}
	host, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range host {
		if ipn, ok := a.(*net.IPNet); ok && seg.Subnet.Contains(addrOf(ipn)) {
			t.Errorf("the host has %s, an address of the macvlan segment %s", ipn, seg.Subnet)
		}
	}
	c := p.Chains[0]
	if out, err := node(t, d, p, c.From).Output(context.Background(), nil, "ping", "-c", "3", "-i", "0.2", "-W", "2", c.Target.String()); err != nil {
		t.Fatalf("ping %s over the macvlan network: %v\n%s", c.Target, err, out)
	}
}

// addrOf is an interface address as a netip.Addr (IPv4 unmapped).
func addrOf(ipn *net.IPNet) netip.Addr {
	a, _ := netip.AddrFromSlice(ipn.IP)
	return a.Unmap()
}
