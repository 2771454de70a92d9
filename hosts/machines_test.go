package hosts

import (
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"testing"

	"github.com/sfclab/sfclab/netdev"
)

// testUndo collects undo steps for a test.
type testUndo struct{ steps []func() error }

func (u *testUndo) Push(_ string, fn func() error) { u.steps = append(u.steps, fn) }

func (u *testUndo) unwind() error {
	var errs []error
	for i := len(u.steps) - 1; i >= 0; i-- {
		errs = append(errs, u.steps[i]())
	}
	u.steps = nil
	return errors.Join(errs...)
}

// TestLocalHostsAcrossMachines builds a two-host topology as two machines would, each its
// own part (Local): the machines are two network namespaces joined by a veth (their own
// network, addresses 198.18.9.1 and .2), each builds its host with the VXLAN devices created
// in its namespace and moved into the host's. A ping between the nodes crosses the VXLAN
// (the tunnel device counts it), nothing of the VXLAN devices stays in the machines'
// namespaces, and a second topology with the same VNI on one machine is refused by the
// kernel without leaving a device behind.
func TestLocalHostsAcrossMachines(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	const lab = "i26w-mx"
	var undo testUndo
	t.Cleanup(func() {
		undo.unwind()
		names, _ := netdev.ListNetns(NetnsName(lab, ""))
		for _, n := range names {
			netdev.DeleteNetns(n)
		}
	})
	open := func(name string) *netdev.NS {
		t.Helper()
		if err := netdev.CreateNetns(name); err != nil {
			t.Fatal(err)
		}
		ns, err := netdev.OpenNS(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Close() })
		return ns
	}
	pfx := netip.MustParsePrefix
	ma, mb := open(NetnsName(lab, "ma")), open(NetnsName(lab, "mb"))
	open(NetnsName(lab, "a"))
	open(NetnsName(lab, "b"))
	if err := ma.AddVeth("ul0", mb, "ul0", 1500); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		ns   *netdev.NS
		addr string
	}{{ma, "198.18.9.1/24"}, {mb, "198.18.9.2/24"}} {
		if err := m.ns.AddAddrsUp("ul0", pfx(m.addr)); err != nil {
			t.Fatal(err)
		}
	}
	topo := func(local, machine string) *Topology {
		return &Topology{Lab: lab, NodesExist: true, Local: local, UnderlayNS: NetnsName(lab, machine), UnderlayIf: "ul0",
			Hosts:    []Host{{Name: "A", ID: 1, Underlay: pfx("198.18.9.1/24")}, {Name: "B", ID: 2, Underlay: pfx("198.18.9.2/24")}},
			Networks: []Network{{Name: "n0", Bridge: "br0", VNI: 4242}},
			Nodes: []Node{
				{Name: "a", Host: "A", Ports: []Port{{Ifname: "eth1", HostIf: "pa", Network: "n0", Addr: pfx("198.18.10.1/24")}}},
				{Name: "b", Host: "B", Ports: []Port{{Ifname: "eth1", HostIf: "pb", Network: "n0", Addr: pfx("198.18.10.2/24")}}},
			}}
	}
	for _, m := range [][2]string{{"A", "ma"}, {"B", "mb"}} {
		built, err := Build(topo(m[0], m[1]), &undo)
		if built != nil {
			built.Close()
		}
		if err != nil {
			t.Fatalf("build host %s on machine %s: %v", m[0], m[1], err)
		}
	}
	if out, err := exec.Command("ip", "netns", "exec", NetnsName(lab, "a"), "ping", "-c", "2", "-W", "2", "198.18.10.2").CombinedOutput(); err != nil {
		t.Fatalf("ping from host A's node to host B's: %v: %s", err, out)
	}
	ha, err := netdev.OpenNS(HostNetns(lab, "A"))
	if err != nil {
		t.Fatal(err)
	}
	defer ha.Close()
	st, err := ha.LinkStats("vx0")
	if err != nil || st.TxPackets == 0 || st.RxPackets == 0 {
		t.Errorf("host A's vx0: %+v %v, want packets both ways", st, err)
	}
	if _, err := ha.LinkStats(SteerDev); err != nil {
		t.Errorf("host A's steering device: %v", err)
	}
	for _, m := range []*netdev.NS{ma, mb} {
		links, err := m.Links()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			if l.Name != "lo" && l.Name != "ul0" {
				t.Errorf("machine %s kept %s (the VXLAN devices belong in the host's namespace)", m.Name(), l.Name)
			}
		}
	}
	// Machine A already carries VNI 4242 on port 4789 (in host A's device, whose socket is
	// in A's namespace): the same VNI for another host there is refused, and the host's
	// namespace and the half-made device go with the undo.
	second := topo("A", "ma")
	second.Lab = lab + "2"
	second.Nodes = nil
	var undo2 testUndo
	built, err := Build(second, &undo2)
	if built != nil {
		built.Close()
	}
	if err == nil {
		t.Error("a second host with the same VNI on one machine was built")
	}
	if err := undo2.unwind(); err != nil {
		t.Errorf("undo of the refused build: %v", err)
	}
	if left, _ := netdev.ListNetns(NetnsName(lab+"2", "")); len(left) > 0 {
		t.Errorf("the refused build left %v", left)
	}
	links, _ := ma.Links()
	if len(links) != 2 {
		t.Errorf("machine A after the refused build: %v, want lo and ul0", links)
	}
}
