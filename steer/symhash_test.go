package steer

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/sfclab/sfclab/sfc"
)

// placeholderMAC is the destination MAC a transparent function's kernel writes on what it
// forwards (hosts.Forward's placeholder neighbour).
var placeholderMAC = net.HardwareAddr{0x02, 0x5f, 0xc1, 0xab, 0x00, 0xfe}

// symSources are the chain's source endpoints: with several, flows differ in their MACs too.
var symSources = []string{"s1", "s2", "s3", "s4", "s5", "s6"}

// symPorts: source endpoints s1..s6, destination d, and two groups of three one-armed
// instances, a1..a3 and b1..b3.
func symPorts() map[string]fakePort {
	ps := map[string]fakePort{
		"d.eth0": {300, net.HardwareAddr{2, 0, 0, 0, 3, 0}, netip.MustParseAddr("198.18.20.100")},
	}
	for i, n := range append(symSources, "a1", "a2", "a3", "b1", "b2", "b3") {
		ps[n+".eth0"] = fakePort{uint32(301 + i), net.HardwareAddr{2, 0, 0, 0, 3, byte(1 + i)}, netip.MustParseAddr(fmt.Sprintf("198.18.20.%d", 1+i))}
	}
	return ps
}

// symModel: a symmetric TCP chain from each source to d through gA and gB, both groups
// hashing lb.
func symModel(ps map[string]fakePort, lb []string) *sfc.Model {
	m := &sfc.Model{}
	for name, p := range ps {
		node := name[:len(name)-len(".eth0")]
		m.Ports = append(m.Ports, sfc.Port{Name: name, Node: node, Network: "net", IP: p.ip})
	}
	for _, g := range []string{"a", "b"} {
		grp := sfc.PortPairGroup{Name: "g" + g, LBFields: lb}
		for i := 1; i <= 3; i++ {
			n := fmt.Sprintf("%s%d", g, i)
			m.PortPairs = append(m.PortPairs, sfc.PortPair{Name: "p" + n, Ingress: n + ".eth0", Egress: n + ".eth0"})
			grp.PortPairs = append(grp.PortPairs, "p"+n)
		}
		m.PortPairGroups = append(m.PortPairGroups, grp)
	}
	c := sfc.PortChain{Name: "c", PortPairGroups: []string{"ga", "gb"}, ChainParameters: sfc.ChainParameters{Symmetric: true}}
	for _, src := range symSources {
		m.FlowClassifiers = append(m.FlowClassifiers, sfc.FlowClassifier{Name: "tcp-" + src, Protocol: "tcp",
			LogicalSourcePort: src + ".eth0", LogicalDestinationPort: "d.eth0"})
		c.FlowClassifiers = append(c.FlowClassifiers, "tcp-"+src)
	}
	m.PortChains = []sfc.PortChain{c}
	return m
}

// TestSymmetricLBFields: in a symmetric chain every lb_fields choice, eth_src and eth_dst
// included, sends a flow's replies back through the instances its requests crossed. Frames
// are built as the lab's kernel sends them: the source endpoint addresses the destination's
// MAC; a function (an L3 forwarder) sends from its own MAC to the placeholder neighbour.
func TestSymmetricLBFields(t *testing.T) {
	d, _ := cacheLab(t, "steer-symhash-test")
	ps := symPorts()
	bind := map[string]sfc.Binding{}
	for name, p := range ps {
		bind[name] = sfc.Binding{Host: 1, Ifindex: p.ifindex, MAC: p.mac, IP: p.ip}
	}
	byMAC := map[string]string{}
	for name, p := range ps {
		byMAC[p.mac.String()] = name
	}
	// hop sends frame in at port from and returns the port it was redirected to.
	hop := func(frame []byte, from string) string {
		t.Helper()
		out := make([]byte, len(frame)+256)
		ret, err := d.ports[1].Run(&ebpf.RunOptions{Data: frame, DataOut: out, Context: skbCtx(ps[from].ifindex)})
		if err != nil {
			t.Fatalf("run steer_port: %v", err)
		}
		if ret != tcActRedirect {
			t.Fatalf("at %s: verdict %d, want redirect", from, ret)
		}
		return byMAC[net.HardwareAddr(out[:6]).String()]
	}
	dst := ps["d.eth0"]
	for _, lb := range [][]string{nil, {"ip_src"}, {"eth_src"}, {"eth_dst"}, {"eth_src", "eth_dst"}, {"eth_src", "tcp_dst", "ip_dst"}} {
		t.Run(fmt.Sprint(lb), func(t *testing.T) {
			tab, err := sfc.Compile(symModel(ps, lb), bind)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Apply(tab); err != nil {
				t.Fatal(err)
			}
			spread := map[string]bool{}
			wrong := 0
			for _, src := range symSources {
				s, sp := ps[src+".eth0"], src+".eth0"
				for sport := uint16(41000); sport < 41008; sport++ {
					// Forward: s -> a? -> b? -> d.
					a := hop(tcpFrame(dst.mac, s.mac, s.ip, dst.ip, sport, 5201), sp)
					b := hop(tcpFrame(placeholderMAC, ps[a].mac, s.ip, dst.ip, sport, 5201), a)
					if end := hop(tcpFrame(placeholderMAC, ps[b].mac, s.ip, dst.ip, sport, 5201), b); end != "d.eth0" {
						t.Fatalf("flow %s:%d: forward ends at %s", src, sport, end)
					}
					// Reverse: d -> b? -> a? -> s.
					rb := hop(tcpFrame(s.mac, dst.mac, dst.ip, s.ip, 5201, sport), "d.eth0")
					ra := hop(tcpFrame(placeholderMAC, ps[rb].mac, dst.ip, s.ip, 5201, sport), rb)
					if end := hop(tcpFrame(placeholderMAC, ps[ra].mac, dst.ip, s.ip, 5201, sport), ra); end != sp {
						t.Fatalf("flow %s:%d: reverse ends at %s", src, sport, end)
					}
					if rb != b || ra != a {
						wrong++
						t.Errorf("flow %s:%d: requests crossed %s, %s; replies %s, %s", src, sport, a, b, rb, ra)
					}
					spread[a+" "+b] = true
				}
			}
			n := len(symSources) * 8
			t.Logf("lb_fields %v: %d flows took %d (a, b) combinations; %d replies took other instances", lb, n, len(spread), wrong)
			if len(spread) < 2 && (len(lb) == 0 || slices.Contains(lb, "eth_src")) {
				t.Errorf("lb_fields %v: every flow took the same instances; the test shows nothing", lb)
			}
		})
	}
}
