package cli

import (
	"bytes"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/lb"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/vnf"
)

var updateInspect = flag.Bool("update-inspect", false, "rewrite testdata/inspect-*.golden from this run")

// inspectLab is a lab as deploy.Inspect reads it: namespace endpoints (the host's kernel's
// counters), a VM firewall read in its guest (the guest's counters, its host side beside
// them, its rules), a VM balancer (sfclab lb's counters read in its guest) and a VM whose
// guest does not answer (its host side, down with the reason).
func inspectLab() *deploy.LabInfo {
	pfx := netip.MustParsePrefix
	stats := func(n uint64) netdev.LinkStats {
		return netdev.LinkStats{RxPackets: n, RxBytes: n * 98, TxPackets: n + 1, TxBytes: (n + 1) * 98}
	}
	hs := func(n uint64) *netdev.LinkStats { s := stats(n); return &s }
	const machine = "1 vCPU, 512 MiB, nic virtio on tap (spliced to a veth, QEMU's backend); emulated CPU (TCG): not comparable"
	return &deploy.LabInfo{Lab: "vminspect", Status: "deployed", File: "/tmp/lab.yaml",
		Nodes: []deploy.NodeInfo{
			{Name: "client", Role: "endpoint", Kind: "client", Interfaces: []deploy.InterfaceInfo{
				{Name: "eth0", Segment: "s0", Addrs: []netip.Prefix{pfx("198.18.0.2/24")}, Up: true, Stats: stats(12), SeenBy: deploy.SeenHost}}},
			{Name: "fw", Role: "function", Kind: "firewall", Machine: machine,
				Interfaces: []deploy.InterfaceInfo{
					{Name: "eth0", Segment: "s0", Addrs: []netip.Prefix{pfx("198.18.0.1/24")}, Up: true, Stats: stats(13), SeenBy: deploy.SeenGuest, HostSide: hs(14)},
					{Name: "eth1", Segment: "s1", Addrs: []netip.Prefix{pfx("198.18.1.1/24")}, Up: true, Stats: stats(15), SeenBy: deploy.SeenGuest, HostSide: hs(16)}},
				Rules: []vnf.Counter{{Rule: "established", Packets: 40, Bytes: 5200}, {Rule: "rule-1", Packets: 2, Bytes: 120}, {Rule: "policy", Packets: 3, Bytes: 180}}},
			{Name: "lb", Role: "function", Kind: "l4lb", Machine: machine,
				Interfaces: []deploy.InterfaceInfo{
					{Name: "eth0", Segment: "s1", Addrs: []netip.Prefix{pfx("198.18.1.2/24")}, Up: true, Stats: stats(17), SeenBy: deploy.SeenGuest, HostSide: hs(18)}},
				Balancer: &lb.Stats{Listen: "198.18.1.2:5201", Balance: "roundrobin", Total: 3, Accel: "splice",
					Backends: []lb.BackendStats{{Name: "server", Addr: "198.18.2.2:5201", Weight: 1, Up: true, Total: 3, BytesIn: 1 << 20, BytesOut: 640}}}},
			{Name: "stuck", Role: "function", Kind: "forwarder", Machine: machine,
				Down: "list the interfaces of VM node stuck in its guest: its guest agent did not answer within 10s (QEMU runs: the guest is hung, stopped or starved of CPU): context deadline exceeded",
				Interfaces: []deploy.InterfaceInfo{
					{Name: "eth0", Segment: "s1", Addrs: []netip.Prefix{pfx("198.18.1.3/24")}, Up: true, Stats: stats(19), SeenBy: deploy.SeenHostSide}}},
			{Name: "server", Role: "endpoint", Kind: "server", Interfaces: []deploy.InterfaceInfo{
				{Name: "eth0", Segment: "s2", Addrs: []netip.Prefix{pfx("198.18.2.2/24")}, Up: true, Stats: stats(20), SeenBy: deploy.SeenHost}}},
		},
		Chains: []deploy.ChainInfo{{Name: "web", Path: []string{"client", "fw", "lb", "server"}, Hops: []string{"fw(firewall)x1", "lb(l4lb)x1"}, Target: "198.18.1.2:5201"}},
	}
}

// TestWriteLabGolden pins inspect's table: the SEEN BY column says whose kernel counted each
// row (host, guest, host side), the legend says what each means when the lab has VMs, a VM's
// ports list their host-side counters, and the rule and balancer counters follow.
func TestWriteLabGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		info func() *deploy.LabInfo
	}{
		{"vm", inspectLab},
		{"netns", func() *deploy.LabInfo { // the same lab without VMs: no legend, no VM lines
			i := inspectLab()
			var nodes []deploy.NodeInfo
			for _, n := range i.Nodes {
				if n.Name == "stuck" {
					continue
				}
				n.Machine = ""
				for k := range n.Interfaces {
					n.Interfaces[k].SeenBy, n.Interfaces[k].HostSide = deploy.SeenHost, nil
				}
				nodes = append(nodes, n)
			}
			i.Nodes = nodes
			return i
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeLab(&b, tc.info()); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "inspect-"+tc.name+".golden")
			if *updateInspect {
				if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if b.String() != string(want) {
				t.Errorf("inspect's table differs from %s (run with -update-inspect if the change is intended):\n%s", golden, b.String())
			}
		})
	}
}
