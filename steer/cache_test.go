package steer

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/sfclab/sfclab/sfc"
)

// Return codes of a tc program (linux/pkt_cls.h).
const (
	tcActOK       = 0
	tcActRedirect = 7
)

// fakePort is a port as the test binds it: no interface exists; the program only sees
// ifindexes and MACs.
type fakePort struct {
	ifindex uint32
	mac     net.HardwareAddr
	ip      netip.Addr
}

var cachePorts = map[string]fakePort{
	"s.eth0":  {101, net.HardwareAddr{2, 0, 0, 0, 0, 1}, netip.MustParseAddr("198.18.10.1")},
	"d.eth0":  {102, net.HardwareAddr{2, 0, 0, 0, 0, 2}, netip.MustParseAddr("198.18.10.2")},
	"f1.eth0": {103, net.HardwareAddr{2, 0, 0, 0, 0, 3}, netip.MustParseAddr("198.18.10.3")},
	"f2.eth0": {104, net.HardwareAddr{2, 0, 0, 0, 0, 4}, netip.MustParseAddr("198.18.10.4")},
}

// cacheModel: one symmetric TCP chain from s to d through the given one-armed forwarders.
func cacheModel(hops ...string) *sfc.Model {
	m := &sfc.Model{}
	for _, n := range []string{"s", "d", "f1", "f2"} {
		p := cachePorts[n+".eth0"]
		m.Ports = append(m.Ports, sfc.Port{Name: n + ".eth0", Node: n, Network: "net", IP: p.ip})
	}
	for _, f := range []string{"f1", "f2"} {
		m.PortPairs = append(m.PortPairs, sfc.PortPair{Name: "p-" + f, Ingress: f + ".eth0", Egress: f + ".eth0"})
		m.PortPairGroups = append(m.PortPairGroups, sfc.PortPairGroup{Name: "g-" + f, PortPairs: []string{"p-" + f}})
	}
	m.FlowClassifiers = []sfc.FlowClassifier{{Name: "tcp", Protocol: "tcp", LogicalSourcePort: "s.eth0", LogicalDestinationPort: "d.eth0"}}
	var groups []string
	for _, h := range hops {
		groups = append(groups, "g-"+h)
	}
	m.PortChains = []sfc.PortChain{{Name: "c", FlowClassifiers: []string{"tcp"}, PortPairGroups: groups,
		ChainParameters: sfc.ChainParameters{Symmetric: true}}}
	return m
}

// tcpFrame is an Ethernet frame with an IPv4 TCP header from src:sport to dst:dport (IPv6
// when the addresses are: ip6Frame).
func tcpFrame(dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr, sport, dport uint16) []byte {
	if src.Is6() {
		tcp := make([]byte, 20)
		binary.BigEndian.PutUint16(tcp[0:], sport)
		binary.BigEndian.PutUint16(tcp[2:], dport)
		tcp[12] = 5 << 4
		return ip6Frame(dstMAC, srcMAC, src, dst, 6, tcp)
	}
	var b bytes.Buffer
	b.Write(dstMAC)
	b.Write(srcMAC)
	b.Write([]byte{0x08, 0x00})
	ip := make([]byte, 20)
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], 40)
	ip[8] = 64
	ip[9] = 6
	s, d := src.As4(), dst.As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	b.Write(ip)
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint16(tcp[0:], sport)
	binary.BigEndian.PutUint16(tcp[2:], dport)
	tcp[12] = 5 << 4
	b.Write(tcp)
	return b.Bytes()
}

// ip6Frame is an Ethernet frame with an IPv6 header, next header nh, then payload (which may
// begin with extension headers).
func ip6Frame(dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr, nh byte, payload []byte) []byte {
	var b bytes.Buffer
	b.Write(dstMAC)
	b.Write(srcMAC)
	b.Write([]byte{0x86, 0xdd})
	ip := make([]byte, 40)
	ip[0] = 6 << 4
	binary.BigEndian.PutUint16(ip[4:], uint16(len(payload)))
	ip[6] = nh
	ip[7] = 64
	s, d := src.As16(), dst.As16()
	copy(ip[8:], s[:])
	copy(ip[24:], d[:])
	b.Write(ip)
	b.Write(payload)
	return b.Bytes()
}

// skbCtx is a struct __sk_buff with ingress_ifindex set (offset 36); the rest zero.
func skbCtx(ingress uint32) []byte {
	c := make([]byte, 192)
	binary.NativeEndian.PutUint32(c[36:], ingress)
	return c
}

// cacheLab loads the data plane for host 1 (maps pinned under lab, removed at cleanup) and
// returns it with a function that applies a chain through the given hops.
func cacheLab(t testing.TB, lab string) (*Dataplane, func(hops ...string) *sfc.Tables) {
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
	for name, p := range cachePorts {
		bind[name] = sfc.Binding{Host: 1, Ifindex: p.ifindex, MAC: p.mac, IP: p.ip}
	}
	return d, func(hops ...string) *sfc.Tables {
		t.Helper()
		tab, err := sfc.Compile(cacheModel(hops...), bind)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Apply(tab); err != nil {
			t.Fatal(err)
		}
		return tab
	}
}

// TestFlowCache runs the port program on frames (BPF_PROG_TEST_RUN, no namespaces): the first
// packet of a flow at a port walks the tables and caches the decision in the flow's expect
// entry; later packets take it from there; a chain change (Apply) invalidates it, so the very
// next packet follows the new chain; counters count on both paths.
func TestFlowCache(t *testing.T) {
	d, apply := cacheLab(t, "steer-cache-test")
	s, dst := cachePorts["s.eth0"], cachePorts["d.eth0"]
	fwd := tcpFrame(dst.mac, s.mac, s.ip, dst.ip, 40000, 5201)
	// send runs the program on frame arriving at port from and returns the verdict and the
	// destination MAC it left with.
	send := func(frame []byte, from string) (uint32, net.HardwareAddr) {
		t.Helper()
		out := make([]byte, len(frame)+256)
		ret, err := d.ports[1].Run(&ebpf.RunOptions{Data: frame, DataOut: out, Context: skbCtx(cachePorts[from].ifindex)})
		if err != nil {
			t.Fatalf("run steer_port: %v", err)
		}
		return ret, net.HardwareAddr(out[:6])
	}
	cached := func(from string) bool {
		t.Helper()
		var k steerExpectKey
		var v steerFlow
		now, err := d.Epoch()
		if err != nil {
			t.Fatal(err)
		}
		it := d.maps.Expect.Iterate()
		for it.Next(&k, &v) {
			if k.Ifindex == cachePorts[from].ifindex && k.T.Sport == 40000 {
				return v.Epoch == now
			}
		}
		return false
	}
	counter := func(path, hop uint32) uint64 {
		t.Helper()
		cs, err := d.Counters()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.Path == path && c.Hop == hop {
				return c.Packets
			}
		}
		return 0
	}

	tab := apply("f1")
	path := tab.ChainPath("c")
	for i := 1; i <= 3; i++ {
		ret, mac := send(fwd, "s.eth0")
		if ret != tcActRedirect || mac.String() != cachePorts["f1.eth0"].mac.String() {
			t.Fatalf("packet %d at s: verdict %d to %s, want redirect to f1 (%s)", i, ret, mac, cachePorts["f1.eth0"].mac)
		}
		if !cached("s.eth0") {
			t.Fatalf("packet %d at s: no decision cached", i)
		}
		if got := counter(path, 0); got != uint64(i) {
			t.Fatalf("packet %d: hop 0 counted %d", i, got)
		}
	}
	// Out of f1: to d, on cache hits too; the reverse direction is set up at d.
	for i := 1; i <= 2; i++ {
		ret, mac := send(fwd, "f1.eth0")
		if ret != tcActRedirect || mac.String() != dst.mac.String() {
			t.Fatalf("packet %d at f1: verdict %d to %s, want redirect to d", i, ret, mac)
		}
		if got := counter(path, 1); got != uint64(i) {
			t.Fatalf("packet %d: end of path counted %d", i, got)
		}
	}
	rev := tcpFrame(s.mac, dst.mac, dst.ip, s.ip, 5201, 40000)
	if ret, mac := send(rev, "d.eth0"); ret != tcActRedirect || mac.String() != cachePorts["f1.eth0"].mac.String() {
		t.Fatalf("reply at d: verdict %d to %s, want redirect to f1", ret, mac)
	}

	// A chain change: f2 instead of f1. The cached decision at s is stale at once.
	epoch, err := d.Epoch()
	if err != nil {
		t.Fatal(err)
	}
	apply("f2")
	if now, _ := d.Epoch(); now != epoch+1 {
		t.Fatalf("Apply moved the epoch from %d to %d, want %d", epoch, now, epoch+1)
	}
	if cached("s.eth0") {
		t.Fatal("decision at s still valid after Apply")
	}
	if ret, mac := send(fwd, "s.eth0"); ret != tcActRedirect || mac.String() != cachePorts["f2.eth0"].mac.String() {
		t.Fatalf("after the change: verdict %d to %s, want redirect to f2 (%s)", ret, mac, cachePorts["f2.eth0"].mac)
	}
	// f1 left the chain: what it still sends is plain L2 (not steered on).
	if ret, _ := send(fwd, "f1.eth0"); ret != tcActOK {
		t.Fatalf("packet from f1 after it left the chain: verdict %d, want %d (to the bridge)", ret, tcActOK)
	}
	// Flow state the LRU map evicted. Two hops, f1 then f2; every decision cached.
	apply("f1", "f2")
	for _, at := range []string{"s.eth0", "f1.eth0", "s.eth0", "f1.eth0"} {
		send(fwd, at)
	}
	f2 := cachePorts["f2.eth0"].mac.String()
	if ret, mac := send(fwd, "f1.eth0"); ret != tcActRedirect || mac.String() != f2 || !cached("f1.eth0") {
		t.Fatalf("out of f1: verdict %d to %s (cached %v), want redirect to f2 from the cache", ret, mac, cached("f1.eth0"))
	}
	// The entry at f1's port goes: s's cached decision would never write it again, so the
	// packet finding it missing invalidates every cached decision...
	evict(t, d, cachePorts["f1.eth0"].ifindex, 40000)
	epoch, _ = d.Epoch()
	send(fwd, "f1.eth0")
	if now, _ := d.Epoch(); now != epoch+1 {
		t.Fatalf("a packet with its flow state evicted left the epoch at %d, want %d", now, epoch+1)
	}
	// ...and the next packet at s writes it again: the flow goes on through f2.
	send(fwd, "s.eth0")
	if ret, mac := send(fwd, "f1.eth0"); ret != tcActRedirect || mac.String() != f2 {
		t.Fatalf("out of f1 after the eviction: verdict %d to %s, want redirect to f2", ret, mac)
	}
	// The reverse entry at d goes (the cached decision at the last hop does not look at it):
	// the chain's reverse classifier at its logical destination port still puts replies on
	// the reverse path.
	send(fwd, "f2.eth0")
	send(fwd, "f2.eth0")
	evict(t, d, dst.ifindex, 5201)
	send(fwd, "f2.eth0")
	if ret, mac := send(rev, "d.eth0"); ret != tcActRedirect || mac.String() != f2 {
		t.Fatalf("reply at d after its flow state was evicted: verdict %d to %s, want redirect to f2 (%s)", ret, mac, f2)
	}

	// Not in a chain (UDP): delivered to the owner of the destination address, cached too.
	udp := tcpFrame(cachePorts["f2.eth0"].mac, s.mac, s.ip, dst.ip, 40000, 53)
	udp[14+9] = 17
	for i := 0; i < 2; i++ {
		if ret, mac := send(udp, "s.eth0"); ret != tcActRedirect || mac.String() != dst.mac.String() {
			t.Fatalf("UDP packet %d: verdict %d to %s, want redirect to d", i, ret, mac)
		}
	}
}

// evict deletes the flow state of the flow with source port sport at port ifindex, as the LRU
// map does when it is full.
func evict(t *testing.T, d *Dataplane, ifindex uint32, sport uint16) {
	t.Helper()
	var k steerExpectKey
	var v steerFlow
	var gone []steerExpectKey
	it := d.maps.Expect.Iterate()
	for it.Next(&k, &v) {
		if k.Ifindex == ifindex && k.T.Sport == sport {
			gone = append(gone, k)
		}
	}
	if len(gone) == 0 {
		t.Fatalf("no flow state at ifindex %d for source port %d", ifindex, sport)
	}
	for _, k := range gone {
		if err := d.maps.Expect.Delete(k); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkPortProgram measures the port program per packet (BPF_PROG_TEST_RUN, repeated in
// the kernel) where a chain sends a TCP packet into its one forwarder and where it leaves the
// forwarder for its destination: "walk" is the full table walk every packet took before the
// flow cache (the cache is kept off by epoch 0), "cached" the flow cache's hit.
func BenchmarkPortProgram(b *testing.B) {
	d, apply := cacheLab(b, "steer-cache-bench")
	apply("f1")
	s, dst := cachePorts["s.eth0"], cachePorts["d.eth0"]
	fwd := tcpFrame(dst.mac, s.mac, s.ip, dst.ip, 40000, 5201)
	for _, at := range []string{"s.eth0", "f1.eth0"} {
		for _, mode := range []string{"walk", "cached"} {
			b.Run(at+"/"+mode, func(b *testing.B) {
				epoch := uint32(0)
				if mode == "cached" {
					epoch = 7
				}
				if err := d.maps.Epoch.Put(uint32(0), epoch); err != nil {
					b.Fatal(err)
				}
				out := make([]byte, len(fwd)+256)
				opts := &ebpf.RunOptions{Data: fwd, DataOut: out, Context: skbCtx(cachePorts[at].ifindex)}
				if ret, err := d.ports[1].Run(opts); err != nil || ret != tcActRedirect {
					b.Fatalf("run steer_port at %s: verdict %d, %v", at, ret, err)
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
