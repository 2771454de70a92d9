package deploy

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/steer"
)

// TestTransparentDeploy deploys the transparent example (forwarder, tap, stateful firewall,
// symmetric), sends ICMP and TCP through it, reads the per-hop counters from the pinned maps,
// and checks destroy leaves no pinned map.
func TestTransparentDeploy(t *testing.T) {
	requireRoot(t)
	d := testDeployer(t)
	p := loadPlan(t, "../examples/transparent-fw.yaml", "steer-dfw")
	t.Cleanup(func() { // runs after deploy's cleanup has destroyed the lab
		if _, err := os.Stat(steer.PinDir(p.Lab)); err == nil {
			t.Errorf("destroy left pinned maps in %s", steer.PinDir(p.Lab))
		}
	})
	deploy(t, d, p)
	// The forwarder forwards both ways with the bump program; the firewall by the kernel.
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
	p := loadPlan(t, "../examples/transparent-instances.yaml", "steer-dinst")
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
