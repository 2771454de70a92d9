package steer_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/sfc"
)

// TestDualStack: a dual-stack lab (every port has an IPv4 and an IPv6 address). IPv6
// classifiers steer IPv6 only and the IPv4 classifier IPv4 only, all at s:
//   - tcp6: IPv6 TCP to port 5201, symmetric, through f1 (two ports) then a group of two
//     one-armed forwarders weighted 1:2;
//   - icmp6: ICMPv6 through the weighted group;
//   - tcp4: IPv4 TCP to port 5201 through f1.
//
// ping -6 and iperf3 -6 go through their chains (TCP replies back through the same
// instances), IPv4 iperf3 through tcp4, and what no classifier matches (IPv6 UDP, IPv4 ping)
// is delivered unsteered.
func TestDualStack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hosts []string
		h2    string // where d and wb run
	}{
		{"one host", []string{"h1"}, "h1"},
		{"two hosts", []string{"h1", "h2"}, "h2"}, // IPv6 through the steering tunnel
	} {
		t.Run(tc.name, func(t *testing.T) { dualStack(t, "steer-t6-"+strings.Fields(tc.name)[0], tc.hosts, tc.h2) })
	}
}

func dualStack(t *testing.T, name string, hostNames []string, h2 string) {
	l := buildDualLab(t, name, hostNames, []fnode{
		{name: "s", host: "h1", ports: []string{"eth0"}},
		{name: "d", host: h2, ports: []string{"eth0"}},
		{name: "f1", host: "h1", ports: []string{"in", "out"}, pairs: [][2]string{{"in", "out"}}},
		{name: "wa", host: "h1", ports: []string{"eth0"}, pairs: [][2]string{{"eth0", "eth0"}}},
		{name: "wb", host: h2, ports: []string{"eth0"}, pairs: [][2]string{{"eth0", "eth0"}}},
	}, true)
	l.model.PortPairs = []sfc.PortPair{
		{Name: "pp-f1", Ingress: "f1.in", Egress: "f1.out"},
		{Name: "pp-wa", Ingress: "wa.eth0", Egress: "wa.eth0", Weight: 1},
		{Name: "pp-wb", Ingress: "wb.eth0", Egress: "wb.eth0", Weight: 2},
	}
	l.model.PortPairGroups = []sfc.PortPairGroup{
		{Name: "g1", PortPairs: []string{"pp-f1"}},
		{Name: "gw", PortPairs: []string{"pp-wa", "pp-wb"}},
	}
	d6 := l.addr6["d.eth0"]
	l.model.FlowClassifiers = []sfc.FlowClassifier{
		{Name: "fc-tcp6", Ethertype: "IPv6", Protocol: "tcp", DestinationPortRangeMin: 5201, DestinationPortRangeMax: 5201,
			DestinationIPPrefix: netip.PrefixFrom(d6, 128),
			LogicalSourcePort:   "s.eth0", LogicalDestinationPort: "d.eth0"},
		{Name: "fc-icmp6", Ethertype: "IPv6", Protocol: "icmpv6", LogicalSourcePort: "s.eth0"},
		{Name: "fc-tcp4", Protocol: "tcp", DestinationPortRangeMin: 5201, DestinationPortRangeMax: 5201,
			LogicalSourcePort: "s.eth0", LogicalDestinationPort: "d.eth0"},
	}
	l.model.PortChains = []sfc.PortChain{
		{Name: "tcp6", FlowClassifiers: []string{"fc-tcp6"}, PortPairGroups: []string{"g1", "gw"},
			ChainParameters: sfc.ChainParameters{Symmetric: true}},
		{Name: "icmp6", FlowClassifiers: []string{"fc-icmp6"}, PortPairGroups: []string{"gw"}},
		{Name: "tcp4", FlowClassifiers: []string{"fc-tcp4"}, PortPairGroups: []string{"g1"},
			ChainParameters: sfc.ChainParameters{Symmetric: true}},
	}
	tab := l.apply(t)
	tcp6, icmp6, tcp4 := tab.ChainPath("tcp6"), tab.ChainPath("icmp6"), tab.ChainPath("tcp4")
	// sum is what a path's hops counted in all.
	sum := func(c map[[2]uint32]uint64, path uint32) uint64 {
		var n uint64
		for k, v := range c {
			if k[0] == path {
				n += v
			}
		}
		return n
	}

	if out, err := l.run(t, "s", "ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", d6.String()); err != nil {
		t.Fatalf("ping -6 through the icmp6 chain: %v\n%s", err, out)
	}
	c := l.counters(t)
	if c[[2]uint32{icmp6, 0}] < 3 || c[[2]uint32{icmp6, 1}] < 3 {
		t.Errorf("icmp6 chain counters %v: want >= 3 echo requests into the group and out to d", c)
	}
	if sum(c, tcp6)+sum(c, tcp6|1)+sum(c, tcp4)+sum(c, tcp4|1) != 0 {
		t.Errorf("ping -6 was steered into a TCP chain: %v", c)
	}

	out := l.iperf(t, "s.eth0", "d.eth0", 5201, "-6")
	if !strings.Contains(out, "receiver") {
		t.Fatalf("iperf3 -6 through the symmetric chain: no summary\n%s", out)
	}
	t.Logf("iperf3 -6 through f1 and the weighted group (hosts %v):\n%s", hostNames, lastLines(out, 4))
	c = l.settledCounters(t) // the IPv6 chain's baseline for the IPv4 run below
	for hop := uint32(0); hop <= 2; hop++ {
		if c[[2]uint32{tcp6, hop}] == 0 || c[[2]uint32{tcp6 | 1, hop}] == 0 {
			t.Errorf("tcp6 chain hop %d: forward %d, reverse %d packets; want both > 0", hop, c[[2]uint32{tcp6, hop}], c[[2]uint32{tcp6 | 1, hop}])
		}
	}
	if sum(c, tcp4)+sum(c, tcp4|1) != 0 {
		t.Errorf("iperf3 -6 was steered into the IPv4 chain: %v", c)
	}
	if l.rx(t, "f1", "out") == 0 {
		t.Errorf("f1.out received nothing: IPv6 replies did not come back through f1")
	}
	// Requests and replies crossed the same instance of the weighted group.
	picks, err := l.dp.Picks()
	if err != nil {
		t.Fatal(err)
	}
	gw := uint32(2) // groups are numbered by position
	pair := map[string]uint32{}
	for _, p := range picks {
		if p.Group != gw || p.Flow.Proto != 6 || !p.Flow.Src.Is6() {
			continue
		}
		// The connection, as its requests see it (replies come from port 5201).
		k := fmt.Sprintf("[%s]:%d -> [%s]:%d", p.Flow.Src, p.Flow.Sport, p.Flow.Dst, p.Flow.Dport)
		if p.Flow.Sport == 5201 {
			k = fmt.Sprintf("[%s]:%d -> [%s]:%d", p.Flow.Dst, p.Flow.Dport, p.Flow.Src, p.Flow.Sport)
		}
		if prev, ok := pair[k]; ok && prev != p.Pair {
			t.Errorf("flow %s: instances %d and %d of the weighted group (requests and replies differ)", p.Flow, prev, p.Pair)
		}
		pair[k] = p.Pair
	}
	if len(pair) == 0 {
		t.Errorf("no IPv6 TCP picks of the weighted group in %+v", picks)
	}

	before6 := sum(c, tcp6) + sum(c, tcp6|1)
	out = l.iperf(t, "s.eth0", "d.eth0", 5201)
	if !strings.Contains(out, "receiver") {
		t.Fatalf("iperf3 (IPv4) through tcp4: no summary\n%s", out)
	}
	c = l.counters(t)
	if c[[2]uint32{tcp4, 0}] == 0 || c[[2]uint32{tcp4 | 1, 0}] == 0 {
		t.Errorf("IPv4 iperf3 not steered through tcp4: %v", c)
	}
	if got := sum(c, tcp6) + sum(c, tcp6|1); got != before6 {
		t.Errorf("IPv4 iperf3 was steered into the IPv6 chain: its counters moved from %d to %d", before6, got)
	}

	// Not classified: IPv6 UDP and IPv4 ping are delivered, no chain counts them. The baseline
	// is taken once the IPv4 iperf3's last packets have crossed tcp4 (CI saw 4 of them counted
	// after the client exited: 347979 -> 347983).
	c = l.settledCounters(t)
	before := sum(c, tcp6) + sum(c, tcp6|1) + sum(c, icmp6) + sum(c, tcp4) + sum(c, tcp4|1)
	out = l.iperf(t, "s.eth0", "d.eth0", 5202, "-6", "-u", "-b", "10M", "-l", "1000")
	if !strings.Contains(out, "receiver") {
		t.Fatalf("iperf3 -6 UDP (no chain): no summary\n%s", out)
	}
	if out, err := l.run(t, "s", "ping", "-c", "2", "-i", "0.2", "-W", "2", l.addr["d.eth0"].String()); err != nil {
		t.Fatalf("IPv4 ping (no chain): %v\n%s", err, out)
	}
	c = l.counters(t)
	if after := sum(c, tcp6) + sum(c, tcp6|1) + sum(c, icmp6) + sum(c, tcp4) + sum(c, tcp4|1); after != before {
		t.Errorf("unclassified traffic was counted by a chain: %d -> %d (%v)", before, after, c)
	}
}
