package steer_test

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/sfc"
	"github.com/sfclab/sfclab/steer"
)

// chainLab: S and D on one network; f1 a two-port forwarder, f2 a one-armed forwarder shared
// by three chains, t a tap.
func chainLab(t *testing.T, name string, hostOf map[string]string, hostNames []string) *lab {
	h := func(n string) string {
		if hostOf[n] != "" {
			return hostOf[n]
		}
		return hostNames[0]
	}
	l := buildLab(t, name, hostNames, []fnode{
		{name: "s", host: h("s"), ports: []string{"eth0"}},
		{name: "d", host: h("d"), ports: []string{"eth0"}},
		{name: "f1", host: h("f1"), ports: []string{"in", "out"}, pairs: [][2]string{{"in", "out"}}},
		{name: "f2", host: h("f2"), ports: []string{"eth0"}, pairs: [][2]string{{"eth0", "eth0"}}},
		{name: "t", host: h("t"), ports: []string{"eth0"}},
	})
	l.model.PortPairs = []sfc.PortPair{
		{Name: "pp-f1", Ingress: "f1.in", Egress: "f1.out"},
		{Name: "pp-f2", Ingress: "f2.eth0", Egress: "f2.eth0"},
		{Name: "pp-t", Ingress: "t.eth0", Egress: "t.eth0"},
	}
	l.model.PortPairGroups = []sfc.PortPairGroup{
		{Name: "g1", PortPairs: []string{"pp-f1"}},
		{Name: "g2", PortPairs: []string{"pp-f2"}},
		{Name: "gt", PortPairs: []string{"pp-t"}, TapEnabled: true},
	}
	l.model.FlowClassifiers = []sfc.FlowClassifier{
		{Name: "fc-tcp", Protocol: "tcp", DestinationPortRangeMin: 5201, DestinationPortRangeMax: 5201,
			LogicalSourcePort: "s.eth0", LogicalDestinationPort: "d.eth0",
			DestinationIPPrefix: netip.PrefixFrom(l.addr["d.eth0"], 32)},
		{Name: "fc-icmp", Protocol: "icmp", LogicalSourcePort: "s.eth0"},
		{Name: "fc-udp", Protocol: "udp", LogicalSourcePort: "s.eth0"},
	}
	l.model.PortChains = []sfc.PortChain{
		{Name: "tcp", FlowClassifiers: []string{"fc-tcp"}, PortPairGroups: []string{"g1", "gt", "g2"},
			ChainParameters: sfc.ChainParameters{Symmetric: true}},
		{Name: "icmp", FlowClassifiers: []string{"fc-icmp"}, PortPairGroups: []string{"g2"}},
		{Name: "udp", FlowClassifiers: []string{"fc-udp"}, PortPairGroups: []string{"g2", "g1"}},
	}
	return l
}

func TestChainsOneHost(t *testing.T) {
	l := chainLab(t, "steer-t1", nil, []string{"h1"})
	tab := l.apply(t)
	tcp, icmp, udp := tab.ChainPath("tcp"), tab.ChainPath("icmp"), tab.ChainPath("udp")

	f2Before, tapBefore := l.rx(t, "f2", "eth0"), l.rx(t, "t", "eth0")
	if out, err := l.run(t, "s", "ping", "-c", "3", "-i", "0.2", "-W", "2", l.addr["d.eth0"].String()); err != nil {
		t.Fatalf("ping through the icmp chain: %v\n%s", err, out)
	}
	c := l.counters(t)
	// Echo requests: hop 0 (f2) and delivery; replies go straight back (icmp chain is not symmetric).
	if c[[2]uint32{icmp, 0}] < 3 || c[[2]uint32{icmp, 1}] < 3 {
		t.Errorf("icmp chain counters %v: want >= 3 packets into f2 and out to d", c)
	}
	if got := l.rx(t, "f2", "eth0") - f2Before; got < 3 {
		t.Errorf("f2 received %d packets during the ping, want >= 3", got)
	}
	if c[[2]uint32{tcp, 0}]+c[[2]uint32{udp, 0}] != 0 {
		t.Errorf("the ping was steered into the tcp or udp chain: %v", c)
	}

	out := l.iperf(t, "s.eth0", "d.eth0", 5201)
	if !strings.Contains(out, "receiver") {
		t.Fatalf("iperf3 TCP through the symmetric chain: no summary\n%s", out)
	}
	c = l.counters(t)
	for hop := uint32(0); hop <= 3; hop++ {
		if c[[2]uint32{tcp, hop}] == 0 || c[[2]uint32{tcp | 1, hop}] == 0 {
			t.Errorf("tcp chain hop %d: forward %d, reverse %d packets; want both > 0", hop, c[[2]uint32{tcp, hop}], c[[2]uint32{tcp | 1, hop}])
		}
	}
	if got := l.rx(t, "t", "eth0") - tapBefore; got < c[[2]uint32{tcp, 1}]/2 {
		t.Errorf("tap received %d packets, the tap hop counted %d", got, c[[2]uint32{tcp, 1}])
	}
	// The reverse direction crossed f1 backwards: it arrived on f1.out.
	if l.rx(t, "f1", "out") == 0 {
		t.Errorf("f1.out received nothing: replies did not come back through f1")
	}

	out = l.iperf(t, "s.eth0", "d.eth0", 5202, "-u", "-b", "20M", "-l", "1000")
	if !strings.Contains(out, "receiver") {
		t.Fatalf("iperf3 UDP: no summary\n%s", out)
	}
	c = l.counters(t)
	if c[[2]uint32{udp, 0}] < 1000 || c[[2]uint32{udp, 1}] < 1000 || c[[2]uint32{udp, 2}] < 1000 {
		t.Errorf("udp chain counters f2 %d, f1 %d, out %d: want >= 1000 each (1 s at 20 Mbit/s)",
			c[[2]uint32{udp, 0}], c[[2]uint32{udp, 1}], c[[2]uint32{udp, 2}])
	}
	if d := int64(c[[2]uint32{udp, 0}]) - int64(c[[2]uint32{udp, 2}]); d < 0 || d > 5 {
		t.Errorf("udp chain: %d into f2, %d delivered: packets lost or duplicated inside the chain", c[[2]uint32{udp, 0}], c[[2]uint32{udp, 2}])
	}

	// Whatever the tap sends is dropped.
	if out, err := l.run(t, "t", "ping", "-c", "2", "-i", "0.2", "-W", "1", l.addr["d.eth0"].String()); err == nil {
		t.Errorf("a tap's own traffic reached d:\n%s", out)
	}

	picks, err := l.dp.Picks()
	if err != nil {
		t.Fatal(err)
	}
	if len(picks) == 0 {
		t.Errorf("no group picks recorded")
	}
}

// TestChainChange removes a hop with one map update: the next packets skip it.
func TestChainChange(t *testing.T) {
	l := chainLab(t, "steer-t2", nil, []string{"h1"})
	tab := l.apply(t)
	icmp := tab.ChainPath("icmp")
	if out, err := l.run(t, "s", "ping", "-c", "2", "-i", "0.2", "-W", "2", l.addr["d.eth0"].String()); err != nil {
		t.Fatalf("ping: %v\n%s", err, out)
	}
	// icmp chain: f2 -> f1 now.
	l.model.PortChains[1].PortPairGroups = []string{"g2", "g1"}
	l.apply(t)
	f1 := l.rx(t, "f1", "in")
	if out, err := l.run(t, "s", "ping", "-c", "3", "-i", "0.2", "-W", "2", l.addr["d.eth0"].String()); err != nil {
		t.Fatalf("ping after adding f1: %v\n%s", err, out)
	}
	if got := l.rx(t, "f1", "in") - f1; got < 3 {
		t.Errorf("after adding f1 to the icmp chain, f1 got %d packets, want >= 3", got)
	}
	c := l.counters(t)
	if c[[2]uint32{icmp, 2}] < 3 {
		t.Errorf("icmp chain delivered %d packets after the change, want >= 3 (%v)", c[[2]uint32{icmp, 2}], c)
	}
}

// TestWeights: 1,000 UDP flows over a 3-instance group with weights 1/2/3 land within 10 %
// of the weights (as counted by the instances' own interfaces).
func TestWeights(t *testing.T) {
	got := spread(t, "steer-t3")
	total := got[0] + got[1] + got[2]
	for i, w := range []float64{1, 2, 3} {
		share, want := got[i]/total, w/6
		t.Logf("instance w%d (weight %.0f): %.0f packets, share %.3f (weight share %.3f)", i+1, w, got[i], share, want)
		if share < want*0.9 || share > want*1.1 {
			t.Errorf("instance w%d got %.3f of the flows, want %.3f +- 10 %% (counts %v)", i+1, share, want, got)
		}
	}
}

// BenchmarkWeights reports each instance's share of 1,000 flows over weights 1/2/3, divided
// by its weight's share (1.0 = exact).
func BenchmarkWeights(b *testing.B) {
	for i := 0; i < b.N; i++ {
		got := spread(b, fmt.Sprintf("steer-bw%d", i))
		total := got[0] + got[1] + got[2]
		for k, w := range []float64{1, 2, 3} {
			b.ReportMetric(got[k]/total/(w/6), fmt.Sprintf("w%d-share/weight", k+1))
		}
	}
}

// spread sends 1,000 UDP flows through a group of three one-armed instances with weights
// 1, 2, 3 and returns the packets each instance received.
func spread(t testing.TB, name string) [3]float64 {
	l := buildLab(t, name, []string{"h1"}, []fnode{
		{name: "s", host: "h1", ports: []string{"eth0"}},
		{name: "d", host: "h1", ports: []string{"eth0"}},
		{name: "w1", host: "h1", ports: []string{"eth0"}, pairs: [][2]string{{"eth0", "eth0"}}},
		{name: "w2", host: "h1", ports: []string{"eth0"}, pairs: [][2]string{{"eth0", "eth0"}}},
		{name: "w3", host: "h1", ports: []string{"eth0"}, pairs: [][2]string{{"eth0", "eth0"}}},
	})
	l.model.PortPairs = []sfc.PortPair{
		{Name: "p1", Ingress: "w1.eth0", Egress: "w1.eth0", Weight: 1},
		{Name: "p2", Ingress: "w2.eth0", Egress: "w2.eth0", Weight: 2},
		{Name: "p3", Ingress: "w3.eth0", Egress: "w3.eth0", Weight: 3},
	}
	l.model.PortPairGroups = []sfc.PortPairGroup{{Name: "g", PortPairs: []string{"p1", "p2", "p3"}, LBFields: []string{"ip_src", "ip_dst", "udp_src", "udp_dst"}}}
	l.model.FlowClassifiers = []sfc.FlowClassifier{{Name: "fc", Protocol: "udp", LogicalSourcePort: "s.eth0"}}
	l.model.PortChains = []sfc.PortChain{{Name: "c", FlowClassifiers: []string{"fc"}, PortPairGroups: []string{"g"}}}
	l.apply(t)
	before := []uint64{l.rx(t, "w1", "eth0"), l.rx(t, "w2", "eth0"), l.rx(t, "w3", "eth0")}
	// 1,000 flows: one datagram from each of 1,000 source ports, sent inside s.
	sendFlows(t, l.ns("s"), l.addr["d.eth0"], 20000, 1000)
	var got [3]float64
	total := 0.0
	for i, n := range []string{"w1", "w2", "w3"} {
		got[i] = float64(l.rx(t, n, "eth0") - before[i])
		total += got[i]
	}
	if total < 1000 {
		t.Fatalf("instances received %v packets in all, want >= 1000", got)
	}
	picks, err := l.dp.Picks()
	if err != nil {
		t.Fatal(err)
	}
	if len(picks) < 1000 {
		t.Errorf("%d picks recorded, want >= 1000", len(picks))
	}
	return got
}

// sendFlows sends one UDP datagram from each of n source ports starting at first, inside ns.
func sendFlows(t testing.TB, nsName string, dst netip.Addr, first, n int) {
	t.Helper()
	ns, err := netdev.OpenNS(nsName)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	err = ns.Do(func() error {
		for p := first; p < first+n; p++ {
			c, err := net.DialUDP("udp4", &net.UDPAddr{Port: p}, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9)))
			if err != nil {
				return err
			}
			_, err = c.Write(make([]byte, 64))
			c.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("send %d flows: %v", n, err)
	}
}

var _ = steer.PinRoot

// TestChainsTwoHosts: the same chains with s and f1 on h1, d, f2 and the tap on h2: hops cross
// hosts over the steering VXLAN (VNI = path << 8 | hop), the tap works on the far host.
func TestChainsTwoHosts(t *testing.T) {
	l := chainLab(t, "steer-t4", map[string]string{"d": "h2", "f2": "h2", "t": "h2"}, []string{"h1", "h2"})
	tab := l.apply(t)
	tcp, icmp, udp := tab.ChainPath("tcp"), tab.ChainPath("icmp"), tab.ChainPath("udp")
	if out, err := l.run(t, "s", "ping", "-c", "3", "-i", "0.2", "-W", "2", l.addr["d.eth0"].String()); err != nil {
		t.Fatalf("ping across hosts through f2: %v\n%s", err, out)
	}
	tapBefore := l.rx(t, "t", "eth0")
	out := l.iperf(t, "s.eth0", "d.eth0", 5201)
	if !strings.Contains(out, "receiver") {
		t.Fatalf("iperf3 TCP across hosts: no summary\n%s", out)
	}
	t.Logf("TCP across two hosts, chain f1(h1) -> tap(h2) -> f2(h2):\n%s", lastLines(out, 4))
	out = l.iperf(t, "s.eth0", "d.eth0", 5202, "-u", "-b", "20M", "-l", "1000")
	if !strings.Contains(out, "receiver") {
		t.Fatalf("iperf3 UDP across hosts: no summary\n%s", out)
	}
	c := l.counters(t)
	for _, k := range [][2]uint32{{icmp, 0}, {icmp, 1}, {tcp, 0}, {tcp, 1}, {tcp, 2}, {tcp, 3}, {tcp | 1, 0}, {tcp | 1, 3}, {udp, 0}, {udp, 2}} {
		if c[k] == 0 {
			t.Errorf("path %d hop %d counted nothing (%v)", k[0], k[1], c)
		}
	}
	// Hops crossing hosts are counted once (by the sending host).
	if d := int64(c[[2]uint32{udp, 0}]) - int64(c[[2]uint32{udp, 2}]); d < 0 || d > 5 {
		t.Errorf("udp chain across hosts: %d into f2, %d delivered", c[[2]uint32{udp, 0}], c[[2]uint32{udp, 2}])
	}
	if got := l.rx(t, "t", "eth0") - tapBefore; got < c[[2]uint32{tcp, 1}]/2 {
		t.Errorf("tap on h2 received %d packets, the tap hop counted %d", got, c[[2]uint32{tcp, 1}])
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestServiceGraph: chain a (UDP 5300-5399 through f2) continues into chain b (UDP 5300,
// through f1) by the graph; UDP 5301 leaves after a.
func TestServiceGraph(t *testing.T) {
	l := chainLab(t, "steer-t5", nil, []string{"h1"})
	l.model.FlowClassifiers = []sfc.FlowClassifier{
		{Name: "fa", Protocol: "udp", DestinationPortRangeMin: 5300, DestinationPortRangeMax: 5399, LogicalSourcePort: "s.eth0"},
		{Name: "fb", Protocol: "udp", DestinationPortRangeMin: 5300, DestinationPortRangeMax: 5300, LogicalSourcePort: "d.eth0"},
	}
	l.model.PortChains = []sfc.PortChain{
		{Name: "a", FlowClassifiers: []string{"fa"}, PortPairGroups: []string{"g2"}},
		{Name: "b", FlowClassifiers: []string{"fb"}, PortPairGroups: []string{"g1"}},
	}
	l.model.ServiceGraphs = []sfc.ServiceGraph{{Name: "sg", PortChains: map[string][]string{"a": {"b"}}}}
	tab := l.apply(t)
	a, b := tab.ChainPath("a"), tab.ChainPath("b")
	send := func(port int, n int) {
		ns, err := netdev.OpenNS(l.ns("s"))
		if err != nil {
			t.Fatal(err)
		}
		defer ns.Close()
		err = ns.Do(func() error {
			// Unconnected: d's port unreachable replies do not fail the next write.
			c, err := net.ListenUDP("udp4", nil)
			if err != nil {
				return err
			}
			defer c.Close()
			to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(l.addr["d.eth0"], uint16(port)))
			for range n {
				if _, err := c.WriteToUDP(make([]byte, 100), to); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	f1 := l.rx(t, "f1", "in")
	send(5300, 20)
	c := l.counters(t)
	if c[[2]uint32{a, 0}] < 20 || c[[2]uint32{b, 0}] < 20 || c[[2]uint32{b, 1}] < 20 {
		t.Errorf("UDP 5300: chain a hop 0 %d, chain b hop 0 %d, b out %d; want >= 20 each", c[[2]uint32{a, 0}], c[[2]uint32{b, 0}], c[[2]uint32{b, 1}])
	}
	if got := l.rx(t, "f1", "in") - f1; got < 20 {
		t.Errorf("f1 (chain b) received %d packets, want >= 20", got)
	}
	send(5301, 20)
	c2 := l.counters(t)
	if c2[[2]uint32{a, 0}]-c[[2]uint32{a, 0}] < 20 || c2[[2]uint32{b, 0}] != c[[2]uint32{b, 0}] {
		t.Errorf("UDP 5301 must cross chain a only: a %d -> %d, b %d -> %d", c[[2]uint32{a, 0}], c2[[2]uint32{a, 0}], c[[2]uint32{b, 0}], c2[[2]uint32{b, 0}])
	}
}
