package steer

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/sfclab/sfclab/sfc"
)

// dualPorts are dual-stack ports: an IPv4 and an IPv6 address each (2001:2::/48, RFC 5180's
// benchmarking range).
var dualPorts = map[string]struct {
	ifindex uint32
	mac     net.HardwareAddr
	ip, ip6 netip.Addr
}{
	"s.eth0":  {201, net.HardwareAddr{2, 0, 0, 0, 6, 1}, netip.MustParseAddr("198.18.30.1"), netip.MustParseAddr("2001:2:0:1::1")},
	"d.eth0":  {202, net.HardwareAddr{2, 0, 0, 0, 6, 2}, netip.MustParseAddr("198.18.30.2"), netip.MustParseAddr("2001:2:0:1::2")},
	"f1.eth0": {203, net.HardwareAddr{2, 0, 0, 0, 6, 3}, netip.MustParseAddr("198.18.30.3"), netip.MustParseAddr("2001:2:0:1::3")},
	"f2.eth0": {204, net.HardwareAddr{2, 0, 0, 0, 6, 4}, netip.MustParseAddr("198.18.30.4"), netip.MustParseAddr("2001:2:0:1::4")},
}

// dualModel: from s to d, a symmetric chain c6 through f1 classifying IPv6 TCP to port 5201,
// and a chain c4 through f2 classifying IPv4 TCP to port 5201, both at s.
func dualModel() *sfc.Model {
	m := &sfc.Model{}
	for _, n := range []string{"s", "d", "f1", "f2"} {
		p := dualPorts[n+".eth0"]
		m.Ports = append(m.Ports, sfc.Port{Name: n + ".eth0", Node: n, Network: "net", IP: p.ip, IP6: p.ip6})
	}
	for _, f := range []string{"f1", "f2"} {
		m.PortPairs = append(m.PortPairs, sfc.PortPair{Name: "p-" + f, Ingress: f + ".eth0", Egress: f + ".eth0"})
		m.PortPairGroups = append(m.PortPairGroups, sfc.PortPairGroup{Name: "g-" + f, PortPairs: []string{"p-" + f}})
	}
	m.FlowClassifiers = []sfc.FlowClassifier{
		{Name: "tcp6", Ethertype: "IPv6", Protocol: "tcp", DestinationPortRangeMin: 5201, DestinationPortRangeMax: 5201,
			DestinationIPPrefix: netip.MustParsePrefix("2001:2:0:1::/64"),
			LogicalSourcePort:   "s.eth0", LogicalDestinationPort: "d.eth0"},
		{Name: "tcp4", Protocol: "tcp", DestinationPortRangeMin: 5201, DestinationPortRangeMax: 5201,
			LogicalSourcePort: "s.eth0", LogicalDestinationPort: "d.eth0"},
	}
	m.PortChains = []sfc.PortChain{
		{Name: "c6", FlowClassifiers: []string{"tcp6"}, PortPairGroups: []string{"g-f1"}, ChainParameters: sfc.ChainParameters{Symmetric: true}},
		{Name: "c4", FlowClassifiers: []string{"tcp4"}, PortPairGroups: []string{"g-f2"}},
	}
	return m
}

// dualLab loads the data plane for host 1 (maps pinned under lab, removed at cleanup) with
// dualModel applied; byMAC names the ports by MAC.
func dualLab(t testing.TB, lab string) (d *Dataplane, tab *sfc.Tables, byMAC map[string]string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED LOUDLY: loading eBPF needs root")
	}
	d, err := Load(lab, []uint32{1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Close()
		if err := Unpin(lab); err != nil {
			t.Error(err)
		}
	})
	bind := map[string]sfc.Binding{}
	byMAC = map[string]string{}
	for name, p := range dualPorts {
		bind[name] = sfc.Binding{Host: 1, Ifindex: p.ifindex, MAC: p.mac, IP: p.ip, IP6: p.ip6}
		byMAC[p.mac.String()] = name
	}
	tab, err = sfc.Compile(dualModel(), bind)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(tab); err != nil {
		t.Fatal(err)
	}
	return d, tab, byMAC
}

// TestIPv6 runs the port program on IPv6 frames (BPF_PROG_TEST_RUN): an IPv6 classifier
// steers IPv6 flows only and an IPv4 one IPv4 flows only, replies of a symmetric IPv6 chain
// take the reverse path, extension headers are walked, a later fragment has no ports,
// neighbour discovery and multicast pass to the bridge unclassified, and IPv6 in no chain is
// delivered to the port owning its destination address.
func TestIPv6(t *testing.T) {
	d, tab, byMAC := dualLab(t, "steer-ipv6-test")
	c6 := tab.ChainPath("c6")
	// send runs the program on frame arriving at port from: the verdict and the port the
	// frame was redirected to ("" if none).
	send := func(frame []byte, from string) (uint32, string) {
		t.Helper()
		out := make([]byte, len(frame)+256)
		ret, err := d.ports[1].Run(&ebpf.RunOptions{Data: frame, DataOut: out, Context: skbCtx(dualPorts[from].ifindex)})
		if err != nil {
			t.Fatalf("run steer_port: %v", err)
		}
		if ret != tcActRedirect {
			return ret, ""
		}
		return ret, byMAC[net.HardwareAddr(out[:6]).String()]
	}
	s, dst := dualPorts["s.eth0"], dualPorts["d.eth0"]
	tcp6 := func(dport uint16) []byte {
		return tcpFrame(dst.mac, s.mac, s.ip6, dst.ip6, 40000, dport)
	}
	udp6 := func(sport, dport uint16) []byte {
		u := make([]byte, 8)
		binary.BigEndian.PutUint16(u[0:], sport)
		binary.BigEndian.PutUint16(u[2:], dport)
		return u
	}
	hopByHop := append([]byte{6, 0, 1, 4, 0, 0, 0, 0}, tcp6(5201)[14+40:]...)
	laterFragment := append([]byte{6, 0, 0x05, 0x00, 0, 0, 0, 1}, tcp6(5201)[14+40:]...) // offset 160
	neighbourSolicitation := append([]byte{135, 0, 0, 0, 0, 0, 0, 0}, dst.ip6.AsSlice()...)
	echo := []byte{128, 0, 0, 0, 0, 1, 0, 1}
	allNodes := netip.MustParseAddr("ff02::1")
	linkLocal := netip.MustParseAddr("fe80::2")

	for _, tc := range []struct {
		name    string
		frame   []byte
		from    string
		verdict uint32
		to      string
	}{
		{"IPv6 TCP to 5201 takes c6 (f1)", tcp6(5201), "s.eth0", tcActRedirect, "f1.eth0"},
		{"IPv4 TCP to 5201 takes c4 (f2)", tcpFrame(dst.mac, s.mac, s.ip, dst.ip, 40000, 5201), "s.eth0", tcActRedirect, "f2.eth0"},
		{"IPv6 TCP leaving f1 goes to d", tcpFrame(placeholderMAC, dualPorts["f1.eth0"].mac, s.ip6, dst.ip6, 40000, 5201), "f1.eth0", tcActRedirect, "d.eth0"},
		{"IPv6 reply at d takes the reverse path (f1)", tcpFrame(s.mac, dst.mac, dst.ip6, s.ip6, 5201, 40000), "d.eth0", tcActRedirect, "f1.eth0"},
		{"IPv6 TCP to 5202 is in no chain: delivered to d", tcp6(5202), "s.eth0", tcActRedirect, "d.eth0"},
		{"IPv6 TCP outside c6's prefix is in no chain: delivered by MAC", tcpFrame(dst.mac, s.mac, s.ip6, netip.MustParseAddr("2001:2:0:2::9"), 40000, 5201), "s.eth0", tcActRedirect, "d.eth0"},
		{"IPv6 UDP is in no chain: delivered to d", ip6Frame(dst.mac, s.mac, s.ip6, dst.ip6, 17, udp6(40000, 5201)), "s.eth0", tcActRedirect, "d.eth0"},
		{"IPv6 TCP behind a hop-by-hop header takes c6", ip6Frame(dst.mac, s.mac, s.ip6, dst.ip6, 0, hopByHop), "s.eth0", tcActRedirect, "f1.eth0"},
		{"a later IPv6 fragment has no ports: in no chain", ip6Frame(dst.mac, s.mac, s.ip6, dst.ip6, 44, laterFragment), "s.eth0", tcActRedirect, "d.eth0"},
		{"ICMPv6 echo is in no chain: delivered to d", ip6Frame(dst.mac, s.mac, s.ip6, dst.ip6, 58, echo), "s.eth0", tcActRedirect, "d.eth0"},
		{"neighbour solicitation: to the bridge", ip6Frame(dst.mac, s.mac, s.ip6, dst.ip6, 58, neighbourSolicitation), "s.eth0", tcActOK, ""},
		{"multicast: to the bridge", ip6Frame(net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}, s.mac, s.ip6, allNodes, 17, udp6(1, 2)), "s.eth0", tcActOK, ""},
		{"link-local: to the bridge", tcpFrame(dst.mac, s.mac, netip.MustParseAddr("fe80::1"), linkLocal, 40000, 5201), "s.eth0", tcActOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if ret, to := send(tc.frame, tc.from); ret != tc.verdict || to != tc.to {
				t.Errorf("verdict %d to %q, want %d to %q", ret, to, tc.verdict, tc.to)
			}
		})
	}

	cs, err := d.Counters()
	if err != nil {
		t.Fatal(err)
	}
	got := map[[2]uint32]uint64{}
	for _, c := range cs {
		got[[2]uint32{c.Path, c.Hop}] = c.Packets
	}
	if got[[2]uint32{c6, 0}] != 2 || got[[2]uint32{c6, 1}] != 1 || got[[2]uint32{c6 | 1, 0}] != 1 {
		t.Errorf("c6 counters %v: want 2 into f1 (one behind a hop-by-hop header), 1 delivered, 1 reply into f1", got)
	}
	picks, err := d.Picks()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[netip.Addr]bool{}
	for _, p := range picks {
		seen[p.Flow.Src] = true
	}
	if !seen[s.ip6] || !seen[dst.ip6] || !seen[s.ip] {
		t.Errorf("picks %+v: want flows from %s and %s (IPv6) and %s (IPv4, unmapped)", picks, s.ip6, dst.ip6, s.ip)
	}
}

// TestPrefixOf: the rule's address and mask as the data plane compares them word by word.
func TestPrefixOf(t *testing.T) {
	w := func(a, b, c, d uint32) steerAddr {
		var v steerAddr
		for i, x := range []uint32{a, b, c, d} {
			var be [4]byte
			binary.BigEndian.PutUint32(be[:], x)
			v.W[i] = binary.NativeEndian.Uint32(be[:])
		}
		return v
	}
	for _, tc := range []struct {
		prefix     string
		addr, mask steerAddr
	}{
		{"198.18.10.7/24", w(0, 0, 0, 0xc6120a00), w(0, 0, 0, 0xffffff00)},
		{"198.18.10.7/32", w(0, 0, 0, 0xc6120a07), w(0, 0, 0, 0xffffffff)},
		{"0.0.0.0/0", w(0, 0, 0, 0), w(0, 0, 0, 0)},
		{"2001:2:0:1::5/64", w(0x20010002, 0x00000001, 0, 0), w(0xffffffff, 0xffffffff, 0, 0)},
		{"2001:2:0:1::5/52", w(0x20010002, 0, 0, 0), w(0xffffffff, 0xfffff000, 0, 0)},
		{"2001:2:0:1::5/128", w(0x20010002, 0x00000001, 0, 5), w(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff)},
	} {
		a, m := prefixOf(netip.MustParsePrefix(tc.prefix))
		if a != tc.addr || m != tc.mask {
			t.Errorf("prefixOf(%s) = %x/%x, want %x/%x", tc.prefix, a.W, m.W, tc.addr.W, tc.mask.W)
		}
	}
}

// BenchmarkPortProgramFamilies measures the port program per packet (BPF_PROG_TEST_RUN) on an
// IPv4 and an IPv6 TCP packet of the same chain shape (one forwarder, classified at s), the
// walk (cache kept off by epoch 0) and the flow cache's hit: IPv6's cost beside IPv4's in one
// run.
func BenchmarkPortProgramFamilies(b *testing.B) {
	d, _, _ := dualLab(b, "steer-ipv6-bench")
	s, dst := dualPorts["s.eth0"], dualPorts["d.eth0"]
	frames := map[string][]byte{
		"ipv4": tcpFrame(dst.mac, s.mac, s.ip, dst.ip, 40000, 5201),
		"ipv6": tcpFrame(dst.mac, s.mac, s.ip6, dst.ip6, 40000, 5201),
	}
	for _, fam := range []string{"ipv4", "ipv6"} {
		for _, mode := range []string{"walk", "cached"} {
			b.Run(fam+"/"+mode, func(b *testing.B) {
				epoch := uint32(0)
				if mode == "cached" {
					epoch = 7
				}
				if err := d.maps.Epoch.Put(uint32(0), epoch); err != nil {
					b.Fatal(err)
				}
				frame := frames[fam]
				out := make([]byte, len(frame)+256)
				opts := &ebpf.RunOptions{Data: frame, DataOut: out, Context: skbCtx(s.ifindex)}
				if ret, err := d.ports[1].Run(opts); err != nil || ret != tcActRedirect {
					b.Fatalf("run steer_port: verdict %d, %v", ret, err)
				}
				opts.Repeat = uint32(b.N)
				b.ResetTimer()
				if _, err := d.ports[1].Run(opts); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
