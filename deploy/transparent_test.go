package deploy

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/plantest"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/steer"
	"github.com/sfclab/sfclab/vnf/custom"
	"github.com/sfclab/sfclab/vnf/firewall"
	"github.com/sfclab/sfclab/vnf/forwarder"
	"github.com/sfclab/sfclab/vnf/nat"
)

// TestTransparentDeploy deploys the transparent example (forwarder, tap, stateful firewall,
// symmetric), sends ICMP and TCP through it, reads the per-hop counters from the pinned maps,
// and checks destroy leaves no pinned map.
func TestTransparentDeploy(t *testing.T) {
	requireRoot(t)
	d := testDeployer(t)
	p := plantest.LoadAs(t, "../examples/transparent-fw.yaml", "steer-dfw")
	t.Cleanup(func() { // runs after deploy's cleanup has destroyed the lab
		if _, err := os.Stat(steer.PinDir(p.Lab)); err == nil {
			t.Errorf("destroy left pinned maps in %s", steer.PinDir(p.Lab))
		}
	})
	deploy(t, d, p)
	// The forwarder forwards both ways with the bump program; the firewall by the kernel,
	// with the offload program (not the bump) at its port.
	for _, c := range []struct {
		node, ifname string
		want         bool
	}{{"fwd", "in", true}, {"fwd", "out", true}, {"fw", "eth0", false}} {
		ns, err := netdev.OpenNS(p.Transparent.Node(c.node).Netns)
		if err != nil {
			t.Fatal(err)
		}
		got, err := steer.BumpAttached(ns, c.ifname)
		ns.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s.%s: bump attached %v, want %v", c.node, c.ifname, got, c.want)
		}
	}
	client, server := node(t, d, p, "client"), node(t, d, p, "server")
	srvAddr := p.Transparent.Node("server").Ports[0].Address.Addr().String()
	if out, err := client.Output(context.Background(), nil, "ping", "-c", "2", "-i", "0.2", "-W", "2", srvAddr); err != nil {
		t.Fatalf("ping through the firewall: %v\n%s", err, out)
	}
	if _, err := server.Daemon([]string{"iperf3", "-s", "-1", "-p", "5201"}, t.TempDir()+"/iperf3.log"); err != nil {
		t.Fatal(err)
	}
	var out []byte
	var err error
	for range 40 {
		out, err = client.Output(context.Background(), nil, "iperf3", "-c", srvAddr, "-t", "1")
		if err == nil || !strings.Contains(err.Error(), "refused") {
			break
		}
	}
	if err != nil {
		t.Fatalf("iperf3 through the symmetric chain: %v\n%s", err, out)
	}
	dp, err := steer.Open(p.Lab)
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	cs, err := dp.Counters()
	if err != nil {
		t.Fatal(err)
	}
	got := map[[2]uint32]uint64{}
	for _, c := range cs {
		got[[2]uint32{c.Path, c.Hop}] = c.Packets
	}
	web := p.Transparent.Tables.ChainPath("web")
	for hop := uint32(0); hop <= 3; hop++ {
		if got[[2]uint32{web, hop}] == 0 || got[[2]uint32{web | 1, hop}] == 0 {
			t.Errorf("web chain hop %d: forward %d, reverse %d packets", hop, got[[2]uint32{web, hop}], got[[2]uint32{web | 1, hop}])
		}
	}
}

// TestTransparentInstances deploys the instances example (a stateful firewall with
// instances: 3, weights 1/2/3, one symmetric group), opens 17 TCP connections through it
// (iperf3 -P 16 and its control connection), and reads the group's picks from the pinned
// maps: every connection's replies crossed the instance its requests crossed, and the
// connections spread over more than one instance.
func TestTransparentInstances(t *testing.T) {
	requireRoot(t)
	d := testDeployer(t)
	p := plantest.LoadAs(t, "../examples/transparent-instances.yaml", "steer-dinst")
	for _, n := range []string{"fw-1", "fw-2", "fw-3"} {
		if p.Transparent.Node(n) == nil {
			t.Fatalf("the plan has no node %s", n)
		}
	}
	deploy(t, d, p)
	client, server := node(t, d, p, "client"), node(t, d, p, "server")
	srvAddr := p.Transparent.Node("server").Ports[0].Address.Addr().String()
	if out, err := client.Output(context.Background(), nil, "ping", "-c", "2", "-i", "0.2", "-W", "2", srvAddr); err != nil {
		t.Fatalf("ping through the firewall instances: %v\n%s", err, out)
	}
	if _, err := server.Daemon([]string{"iperf3", "-s", "-1", "-p", "5201"}, t.TempDir()+"/iperf3.log"); err != nil {
		t.Fatal(err)
	}
	var out []byte
	var err error
	for range 40 {
		out, err = client.Output(context.Background(), nil, "iperf3", "-c", srvAddr, "-t", "1", "-P", "16")
		if err == nil || !strings.Contains(err.Error(), "refused") {
			break
		}
	}
	if err != nil {
		t.Fatalf("iperf3 -P 16 through the symmetric chain of firewall instances: %v\n%s", err, out)
	}
	dp, err := steer.Open(p.Lab)
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	picks, err := dp.Picks()
	if err != nil {
		t.Fatal(err)
	}
	pairName := map[uint32]string{}
	for _, pp := range p.Transparent.Tables.Pairs {
		pairName[pp.ID] = pp.Name
	}
	type flowKey struct {
		group        uint32
		sport, dport uint16
		proto        uint8
	}
	picked := map[flowKey]string{}
	for _, pk := range picks {
		picked[flowKey{pk.Group, pk.Flow.Sport, pk.Flow.Dport, pk.Flow.Proto}] = pairName[pk.Pair]
	}
	perInstance := map[string]int{}
	flows := 0
	for k, inst := range picked {
		if k.proto != 6 || k.dport != 5201 {
			continue
		}
		flows++
		perInstance[inst]++
		if back := picked[flowKey{k.group, k.dport, k.sport, k.proto}]; back != inst {
			t.Errorf("connection from port %d: requests through %s, replies through %q", k.sport, inst, back)
		}
	}
	t.Logf("%d TCP connections per instance: %v", flows, perInstance)
	if flows < 17 || len(perInstance) < 2 {
		t.Errorf("%d connections picked, over %d instances (%v); want 17 over more than one", flows, len(perInstance), perInstance)
	}
	// Each instance's own port counted the connections it was picked for (/proc/net/dev is
	// the reading process's namespace's; /sys would be the mounter's).
	for i, n := range []string{"fw-1", "fw-2", "fw-3"} {
		dev, err := node(t, d, p, n).Output(context.Background(), nil, "cat", "/proc/net/dev")
		if err != nil {
			t.Fatal(err)
		}
		rx := -1
		for _, line := range strings.Split(string(dev), "\n") {
			if name, counters, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && name == "eth0" {
				if f := strings.Fields(counters); len(f) > 1 {
					rx, _ = strconv.Atoi(f[1])
				}
			}
		}
		conns := perInstance[fmt.Sprintf("pp-fw-%d", i+1)]
		t.Logf("%s: %d connections, eth0 received %d packets", n, conns, rx)
		if conns > 0 && rx < 100 {
			t.Errorf("%s was picked for %d connections but its eth0 received %d packets", n, conns, rx)
		}
	}
}

// TestTransparentIPv6 deploys the dual-stack example: ping -6 and iperf3 -6 (four
// connections) cross a symmetric chain of two stateful firewalls with policy drop (a weighted
// group of two nftables instances, then an iptables one with its ip6tables half) both ways;
// the firewalls' icmp rules matched ICMPv6; the IPv6 classifiers steered nothing of the IPv4
// iperf3 to the same port, and the IPv4 classifier nothing of the IPv6 one.
func TestTransparentIPv6(t *testing.T) {
	requireRoot(t)
	d := testDeployer(t)
	p := plantest.LoadAs(t, "../examples/transparent-ipv6.yaml", "steer-dv6")
	deploy(t, d, p)
	ctx := context.Background()
	client, server := node(t, d, p, "client"), node(t, d, p, "server")
	srv := p.Transparent.Node("server").Ports[0]
	srv6, srv4 := srv.Address6.Addr().String(), srv.Address.Addr().String()
	if !srv.Address6.Addr().Is6() || !p.Transparent.Networks[0].Subnet6.Contains(srv.Address6.Addr()) {
		t.Fatalf("server's IPv6 address %s is not in its network's %s", srv.Address6, p.Transparent.Networks[0].Subnet6)
	}
	dp, err := steer.Open(p.Lab)
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	counters := func() map[[2]uint32]uint64 {
		t.Helper()
		cs, err := dp.Counters()
		if err != nil {
			t.Fatal(err)
		}
		got := map[[2]uint32]uint64{}
		for _, c := range cs {
			got[[2]uint32{c.Path, c.Hop}] = c.Packets
		}
		return got
	}
	sum := func(c map[[2]uint32]uint64, paths ...uint32) uint64 {
		var n uint64
		for k, v := range c {
			for _, p := range paths {
				if k[0] == p || k[0] == p|1 {
					n += v
				}
			}
		}
		return n
	}
	tab := p.Transparent.Tables
	web6, ping6, web4 := tab.ChainPath("web6"), tab.ChainPath("ping6"), tab.ChainPath("web4")

	if out, err := client.Output(ctx, nil, "ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", srv6); err != nil {
		t.Fatalf("ping -6 through the firewalls: %v\n%s", err, out)
	}
	c := counters()
	for hop := uint32(0); hop <= 2; hop++ {
		if c[[2]uint32{ping6, hop}] < 3 || c[[2]uint32{ping6 | 1, hop}] < 3 {
			t.Errorf("ping6 chain hop %d: forward %d, reverse %d packets; want >= 3 each", hop, c[[2]uint32{ping6, hop}], c[[2]uint32{ping6 | 1, hop}])
		}
	}

	iperf := func(addr string, extra ...string) {
		t.Helper()
		if _, err := server.Daemon([]string{"iperf3", "-s", "-1", "-p", "5201"}, t.TempDir()+"/iperf3.log"); err != nil {
			t.Fatal(err)
		}
		var out []byte
		var err error
		for range 40 {
			out, err = client.Output(ctx, nil, append([]string{"iperf3", "-c", addr, "-t", "1"}, extra...)...)
			if err == nil || !strings.Contains(err.Error(), "refused") {
				break
			}
		}
		if err != nil {
			t.Fatalf("iperf3 %v to %s through the symmetric chain: %v\n%s", extra, addr, err, out)
		}
	}
	iperf(srv6, "-6", "-P", "4")
	c = counters()
	for hop := uint32(0); hop <= 2; hop++ {
		if c[[2]uint32{web6, hop}] == 0 || c[[2]uint32{web6 | 1, hop}] == 0 {
			t.Errorf("web6 chain hop %d: forward %d, reverse %d packets", hop, c[[2]uint32{web6, hop}], c[[2]uint32{web6 | 1, hop}])
		}
	}
	if n := sum(c, web4); n != 0 {
		t.Errorf("IPv6 traffic was steered into the IPv4 chain web4: %d packets", n)
	}
	// The IPv6 transfer's last packets (its connections' teardown) can still be on their way
	// when the client returns: wait until the IPv6 chains' counters settle (at most 5 s).
	before6 := sum(c, web6, ping6)
	for range 25 {
		time.Sleep(200 * time.Millisecond)
		n := sum(counters(), web6, ping6)
		if n == before6 {
			break
		}
		before6 = n
	}
	iperf(srv4)
	c = counters()
	if c[[2]uint32{web4, 0}] == 0 || c[[2]uint32{web4 | 1, 0}] == 0 {
		t.Errorf("IPv4 iperf3 not steered through web4: %v", c)
	}
	if n := sum(c, web6, ping6); n != before6 {
		t.Errorf("IPv4 traffic was steered into an IPv6 chain: their counters moved from %d to %d", before6, n)
	}

	// The firewalls' icmp rule (rule-2) let the echo requests in: ICMPv6 matched it.
	icmp := uint64(0)
	for _, n := range []string{"fw-1", "fw-2"} {
		out, err := node(t, d, p, n).Output(ctx, nil, "nft", "list", "table", "inet", "sfclab_fw")
		if err != nil {
			t.Fatalf("%s: %v\n%s", n, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, `"rule-2"`) {
				f := strings.Fields(line[strings.Index(line, "counter packets"):])
				k, _ := strconv.ParseUint(f[2], 10, 64)
				icmp += k
			}
		}
	}
	out, err := node(t, d, p, "fwi").Output(ctx, nil, "ip6tables", "-w", "-L", "SFCLAB-FW", "-v", "-x", "-n")
	if err != nil {
		t.Fatalf("fwi: %v\n%s", err, out)
	}
	icmpi := uint64(0)
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "rule-2") {
			icmpi, _ = strconv.ParseUint(strings.Fields(line)[0], 10, 64)
		}
	}
	if icmp == 0 || icmpi == 0 {
		t.Errorf("icmp rules matched %d ICMPv6 packets in the nftables instances and %d in ip6tables; want > 0 each", icmp, icmpi)
	}
	// fwi's rules by address family: rule-1 (an IPv4 destination) is iptables' alone, rule-3
	// (an IPv6 destination) ip6tables' alone, and each carried its family's iperf3 (the
	// policy drops the rest).
	for _, tc := range []struct{ bin, has, hasNot string }{{"iptables", "rule-1", "rule-3"}, {"ip6tables", "rule-3", "rule-1"}} {
		out, err := node(t, d, p, "fwi").Output(ctx, nil, tc.bin, "-w", "-L", "SFCLAB-FW", "-v", "-x", "-n")
		if err != nil {
			t.Fatalf("fwi %s: %v\n%s", tc.bin, err, out)
		}
		var pkts uint64
		found := false
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, tc.hasNot) {
				t.Errorf("fwi %s has %s, whose address is the other family's: %s", tc.bin, tc.hasNot, line)
			}
			if strings.Contains(line, tc.has) {
				found = true
				pkts, _ = strconv.ParseUint(strings.Fields(line)[0], 10, 64)
			}
		}
		if !found || pkts == 0 {
			t.Errorf("fwi %s: %s found %v, %d packets; want it, with the iperf3 packets of its family", tc.bin, tc.has, found, pkts)
		}
	}
}

// TestFastPath: a forwarder takes the bump unless its datapath is the kernel's, a firewall
// the offload program unless its offload is none, and kinds without a fast path none.
func TestFastPath(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params any
		want   string
	}{
		{"forwarder, default", &forwarder.ForwarderParams{}, spec.FastPathBump},
		{"forwarder, bpf", &forwarder.ForwarderParams{Datapath: forwarder.DatapathBPF}, spec.FastPathBump},
		{"forwarder, kernel", &forwarder.ForwarderParams{Datapath: forwarder.DatapathKernel}, ""},
		{"firewall, default", &firewall.FirewallParams{}, spec.FastPathOffload},
		{"firewall, bpf", &firewall.FirewallParams{Offload: firewall.OffloadBPF}, spec.FastPathOffload},
		{"firewall, none", &firewall.FirewallParams{Offload: firewall.OffloadNone}, ""},
		{"nat", &nat.NATParams{}, ""},
		{"custom", &custom.CustomParams{}, ""},
	} {
		got := ""
		if fp, ok := tc.params.(spec.FastPath); ok {
			got = fp.FastPath()
		}
		if got != tc.want {
			t.Errorf("%s: fast path %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestFirewallOffload deploys a transparent lab with one stateful firewall (policy drop, TCP
// 5201 allowed) that offloads by default: the offload program sits at its port, iperf3 to
// 5201 gets through and most of its packets are offloaded, a connection to 5202 (listened on,
// denied by the policy) never gets through, and destroy leaves nothing (deploy's cleanup).
func TestFirewallOffload(t *testing.T) {
	requireRoot(t)
	d := testDeployer(t)
	// The benchmark's firewall without its offload: none, so offload is the default's.
	p := plantest.Decode(t, strings.Replace(transparentLab("steer-dfwo", []string{"firewall"}), "offload: none, ", "", 1))
	deploy(t, d, p)
	ns, err := netdev.OpenNS(p.Transparent.Node("f1").Netns)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if bumped, err := steer.BumpAttached(ns, "eth0"); err != nil || bumped {
		t.Fatalf("firewall port carries the bump program (%v, %v): the firewall must decide itself", bumped, err)
	}
	before, progs, err := steer.FwOffloadCounters(ns, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	if progs != 1 || before.Offloaded != 0 {
		t.Fatalf("firewall port: %d offload programs, %d packets offloaded before any traffic; want 1, 0", progs, before.Offloaded)
	}
	client, server := node(t, d, p, "client"), node(t, d, p, "server")
	srvAddr := p.Transparent.Node("server").Ports[0].Address.Addr().String()
	if _, err := server.Daemon([]string{"iperf3", "-s", "-1", "-p", "5201"}, t.TempDir()+"/iperf3.log"); err != nil {
		t.Fatal(err)
	}
	var out []byte
	for range 40 {
		out, err = client.Output(context.Background(), nil, "iperf3", "-c", srvAddr, "-p", "5201", "-t", "1")
		if err == nil || !strings.Contains(err.Error(), "refused") {
			break
		}
	}
	if err != nil {
		t.Fatalf("iperf3 to an allowed port through the offloading firewall: %v\n%s", err, out)
	}
	// The transfer's last packets (the control connection's results and their ACKs, a
	// retransmission on a busy host) can still be on their way when the client returns, and
	// are offloaded while their flow's entry is ESTABLISHED: wait until the firewall's
	// conntrack has no established 5201 flow left, then read the counter.
	fw := node(t, d, p, "f1")
	for try := 0; ; try++ {
		ct, err := fw.Output(context.Background(), nil, "cat", "/proc/net/nf_conntrack")
		if err != nil {
			t.Fatal(err)
		}
		open := 0
		for _, line := range strings.Split(string(ct), "\n") {
			if strings.Contains(line, " ESTABLISHED ") && strings.Contains(line, "dport=5201 ") {
				open++
			}
		}
		if open == 0 {
			break
		}
		if try == 100 {
			t.Fatalf("%d established 5201 flows left in the firewall's conntrack 10 s after the client returned:\n%s", open, ct)
		}
		time.Sleep(100 * time.Millisecond)
	}
	after, _, err := steer.FwOffloadCounters(ns, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	// A 1 s transfer is tens of thousands of segments and ACKs; the handshake, FIN and RST
	// are the kernel's.
	if after.Offloaded < 1000 {
		t.Errorf("%d packets of an iperf3 transfer offloaded, want most of them (>= 1000)", after.Offloaded)
	}
	t.Logf("offloaded %d packets, %d conntrack timeout refreshes", after.Offloaded, after.Refreshed)
	// A port the policy drops: listened on (checked from the server itself), never reached.
	if _, err := server.Daemon([]string{"iperf3", "-s", "-p", "5202"}, t.TempDir()+"/iperf3-denied.log"); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		out, err = server.Output(context.Background(), nil, "timeout", "5", "iperf3", "-c", srvAddr, "-p", "5202", "-t", "1")
		if err == nil || !strings.Contains(err.Error(), "refused") {
			break
		}
	}
	if err != nil {
		t.Fatalf("iperf3 to 5202 on the server itself: %v\n%s", err, out)
	}
	// Three tries, at once: each waits its 3 s for a connection that must not come, and
	// their SYNs and retransmissions interleave, so later ones follow denied ones as in a row.
	type try struct {
		out []byte
		err error
	}
	tries := make(chan try, 3)
	for range 3 {
		go func() {
			out, err := client.Output(context.Background(), nil, "timeout", "3", "iperf3", "-c", srvAddr, "-p", "5202", "-t", "1")
			tries <- try{out, err}
		}()
	}
	for i := range 3 {
		if r := <-tries; r.err == nil {
			t.Errorf("try %d: a connection to a port the firewall denies got through:\n%s", i, r.out)
		}
	}
	final, _, err := steer.FwOffloadCounters(ns, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	if final.Offloaded != after.Offloaded {
		t.Errorf("denied connections: %d packets offloaded, want none", final.Offloaded-after.Offloaded)
	}
}
