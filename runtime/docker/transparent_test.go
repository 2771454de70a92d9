package docker_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	ebpflink "github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/hosts"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	iperf3probe "github.com/sfclab/sfclab/probe/iperf3"
	"github.com/sfclab/sfclab/runtime/docker"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/steer"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// TestTransparentOnDocker deploys examples/transparent-docker.yaml (a forwarder shared by two
// chains, a tap, a second forwarder and a stateful nft firewall, both chains symmetric):
// steering programs sit on the host-side ends of the containers' veths, on the Docker
// network's bridge. Ping crosses f1 and the firewall both ways (TTL 62 back), iperf3 crosses
// the web chain, every hop's counter rose in both directions, the tap got copies; destroy
// leaves no container, network, DOCKER-USER rule, pinned map, host-side veth or steering
// program.
func TestTransparentOnDocker(t *testing.T) {
	requireEngine(t)
	d := deployer(t)
	lab, err := spec.Load("../../examples/transparent-docker.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	lab.Name = "t-dk-tp"
	// Subnets around the engine's other networks, as sfclab deploy allocates them.
	p, release, err := d.Plan(context.Background(), lab)
	if err != nil {
		t.Fatal(err)
	}
	defer release() // also when deploy fails; a second release does nothing
	// Where the programs are, found while the lab is up; checked gone after destroy (which
	// deployLab's cleanup runs before this one).
	var hostIfs []string
	var progs []ebpf.ProgramID
	t.Cleanup(func() {
		// The kernel frees a program once its last attachment is gone (after an RCU grace
		// period): allow it a moment.
		left := func() []string {
			var out []string
			for _, name := range hostIfs {
				if _, err := netlink.LinkByName(name); err == nil {
					out = append(out, "host-side veth "+name)
				}
			}
			for _, id := range progs {
				if prog, err := ebpf.NewProgramFromID(id); err == nil {
					prog.Close()
					out = append(out, fmt.Sprintf("steering program %d", id))
				}
			}
			return out
		}
		for i := 0; i < 40 && len(left()) > 0; i++ {
			time.Sleep(50 * time.Millisecond)
		}
		if l := left(); len(l) > 0 {
			t.Errorf("destroy left %v", l)
		}
		if _, err := os.Stat(steer.PinDir(p.Lab)); err == nil {
			t.Errorf("destroy left pinned maps in %s", steer.PinDir(p.Lab))
		}
	})
	deployLab(t, d, p)
	release()

	for _, tn := range p.Transparent.Nodes {
		ns, err := node(t, d, p, tn.Name).OpenNS()
		if err != nil {
			t.Fatal(err)
		}
		for _, pt := range tn.Ports {
			idx, _, err := hosts.PeerOf(ns, pt.Ifname)
			if err != nil {
				ns.Close()
				t.Fatal(err)
			}
			l, err := netlink.LinkByIndex(idx)
			if err != nil {
				ns.Close()
				t.Fatalf("port %s: host side (ifindex %d): %v", pt.Name, idx, err)
			}
			hostIfs = append(hostIfs, l.Attrs().Name)
			if ok, err := steer.Attached("", l.Attrs().Name); err != nil || !ok {
				t.Errorf("port %s: host-side veth %s carries no steering program (err %v)", pt.Name, l.Attrs().Name, err)
			}
			if res, err := ebpflink.QueryPrograms(ebpflink.QueryOptions{Target: idx, Attach: ebpf.AttachTCXIngress}); err == nil {
				for _, pr := range res.Programs {
					progs = append(progs, pr.ID)
				}
			}
		}
		ns.Close()
	}

	client, server := node(t, d, p, "client"), node(t, d, p, "server")
	srv := p.Transparent.Node("server").Ports[0].Address.Addr().String()
	out, err := client.Output(context.Background(), nil, "ping", "-c", "3", "-i", "0.2", "-W", "2", srv)
	if err != nil {
		t.Fatalf("ping through the firewall: %v\n%s", err, out)
	}
	// The ping chain is symmetric: the reply crosses the firewall and f1 too (64 - 2).
	if !strings.Contains(string(out), "ttl=62") {
		t.Errorf("ping's replies did not cross two functions (want ttl=62):\n%s", out)
	}
	// IPv6 (the Docker network is IPv4; sfclab added the ports' IPv6 addresses): ping6 crosses
	// f1 and the firewall both ways too.
	srv6 := p.Transparent.Node("server").Ports[0].Address6.Addr().String()
	out, err = client.Output(context.Background(), nil, "ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", srv6)
	if err != nil {
		t.Fatalf("ping -6 through the firewall: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "ttl=62") {
		t.Errorf("ping -6's replies did not cross two functions (want ttl=62):\n%s", out)
	}
	monBefore := linkStats(t, node(t, d, p, "mon"), "eth0")

	bps := iperfAcross(t, d, p, client, server, srv)
	t.Logf("iperf3 through two forwarders, a tap and a firewall on docker: %.2f Gbit/s", bps/1e9)
	got := hopPackets(t, p.Lab)
	web := p.Transparent.Tables.ChainPath("web")
	for hop := uint32(0); hop <= 4; hop++ {
		fwd, rev := got[[2]uint32{web, hop}], got[[2]uint32{web | 1, hop}]
		t.Logf("web hop %d: forward %d, reverse %d packets", hop, fwd, rev)
		if fwd == 0 || rev == 0 {
			t.Errorf("web chain hop %d: forward %d, reverse %d packets", hop, fwd, rev)
		}
	}
	ping := p.Transparent.Tables.ChainPath("ping")
	for hop := uint32(0); hop <= 2; hop++ {
		if fwd, rev := got[[2]uint32{ping, hop}], got[[2]uint32{ping | 1, hop}]; fwd < 3 || rev < 3 {
			t.Errorf("ping chain hop %d: forward %d, reverse %d packets, want 3 each", hop, fwd, rev)
		}
	}
	if monAfter := linkStats(t, node(t, d, p, "mon"), "eth0"); monAfter.RxPackets <= monBefore.RxPackets+100 {
		t.Errorf("the tap received %d packets during iperf3, want its copies", monAfter.RxPackets-monBefore.RxPackets)
	}
}

// BenchmarkTransparentDocker measures examples/transparent-docker.yaml on docker and on netns,
// interleaved in one run: iperf3 (TCP, one stream, 3 s) through the web chain (port 5201: f1,
// the tap's copy, f2 and the firewall) and straight to the server (port 5202: no chain; the
// steering program still delivers it), and reports chain/direct per runtime and docker/netns
// for each. Read the ratios: absolutes move with the host's load.
//
//	flock -o /tmp/sfclab-suite.lock go test ./runtime/docker -run '^$' -bench TransparentDocker -benchtime 1x
func BenchmarkTransparentDocker(b *testing.B) {
	requireEngine(b)
	type lab struct {
		rt string
		d  *deploy.Deployer
		p  *plan.Plan
	}
	var labs []lab
	for _, rt := range []string{"netns", "docker"} {
		d := deployer(b)
		l, err := spec.Load("../../examples/transparent-docker.yaml", kinds.Spec())
		if err != nil {
			b.Fatal(err)
		}
		l.Name, l.Runtime = "m-tdk-"+rt[:2], rt
		p, release, err := d.Plan(context.Background(), l)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if err := d.Destroy(context.Background(), p.Lab); err != nil {
				b.Errorf("destroy %s: %v", p.Lab, err)
			}
		})
		_, err = d.Deploy(context.Background(), p, "measure")
		release()
		if err != nil {
			b.Fatalf("deploy on %s: %v", rt, err)
		}
		labs = append(labs, lab{rt, d, p})
	}
	sum := map[string]float64{}
	rounds := 3 * b.N
	for r := 0; r < rounds; r++ {
		for _, l := range labs {
			for _, port := range []int{5201, 5202} {
				bps := transparentIperf(b, l.d, l.p, port)
				what := l.rt + "/chain"
				if port == 5202 {
					what = l.rt + "/direct"
				}
				sum[what] += bps / 1e9
				b.Logf("round %d %-13s %.2f Gbit/s", r+1, what, bps/1e9)
			}
		}
	}
	for _, k := range []string{"netns/chain", "netns/direct", "docker/chain", "docker/direct"} {
		b.ReportMetric(sum[k]/float64(rounds), strings.ReplaceAll(k, "/", "_")+"_Gbit/s")
	}
	b.ReportMetric(sum["netns/chain"]/sum["netns/direct"], "netns_chain/direct")
	b.ReportMetric(sum["docker/chain"]/sum["docker/direct"], "docker_chain/direct")
	b.ReportMetric(sum["docker/chain"]/sum["netns/chain"], "chain_docker/netns")
	b.ReportMetric(sum["docker/direct"]/sum["netns/direct"], "direct_docker/netns")
}

// transparentIperf runs a one-off iperf3 server on the lab's server at port and a 3-second
// TCP test from the client, and returns what the server received.
func transparentIperf(b *testing.B, d *deploy.Deployer, p *plan.Plan, port int) float64 {
	b.Helper()
	server, err := d.Node(p, "server")
	if err != nil {
		b.Fatal(err)
	}
	client, err := d.Node(p, "client")
	if err != nil {
		b.Fatal(err)
	}
	log := d.Journal.NodeDir(p.Lab) + fmt.Sprintf("/server.iperf3-%d.log", port)
	if _, err := server.Daemon([]string{"iperf3", "-s", "-1", "-p", fmt.Sprint(port)}, log); err != nil {
		b.Fatal(err)
	}
	srv := p.Transparent.Node("server").Ports[0].Address.Addr().String()
	var out []byte
	for range 40 {
		out, err = client.Output(context.Background(), nil, "iperf3", "-c", srv, "-p", fmt.Sprint(port), "-t", "3", "-J")
		if err == nil || !strings.Contains(string(out)+err.Error(), "refused") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		b.Fatalf("iperf3 to port %d on %s: %v\n%s", port, p.Runtime, err, out)
	}
	res, err := iperf3probe.Parse(out)
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the one-off server exits
	return res.ReceivedBPS
}

// TestTransparentOnDockerHosts deploys examples/transparent-docker-hosts.yaml: containers
// without a Docker network on three emulated hosts joined by VXLAN. Each container's
// namespace is named as a netns node's and holds only the ports sfclab gave it; ping and
// iperf3 cross v1 (h1), the stateful firewall (h2) and one of the group v3 (h2 or h3) both
// ways, every hop's counter rose in both directions, and destroy leaves no container, named
// namespace (nodes', hosts', underlay) or pinned map.
func TestTransparentOnDockerHosts(t *testing.T) {
	requireEngine(t)
	d := deployer(t)
	p := loadLab(t, "../../examples/transparent-docker-hosts.yaml", "t-dk-th", nil)
	if !p.HostPorts() {
		t.Fatal("plan of a docker lab on three hosts: HostPorts() = false, want ports from package hosts")
	}
	t.Cleanup(func() { // runs after deployLab's destroy
		if left, err := netdev.ListNetns(plan.NetnsPrefix + p.Lab + "."); err != nil || len(left) > 0 {
			t.Errorf("destroy left namespaces %v (%v)", left, err)
		}
		if _, err := os.Stat(steer.PinDir(p.Lab)); err == nil {
			t.Errorf("destroy left pinned maps in %s", steer.PinDir(p.Lab))
		}
	})
	deployLab(t, d, p)

	for _, tn := range p.Transparent.Nodes {
		// The name opens the container's own namespace: the same ports, nothing else but lo.
		named, err := netdev.OpenNS(tn.Netns)
		if err != nil {
			t.Fatalf("node %s: %v", tn.Name, err)
		}
		links, err := named.Links()
		named.Close()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, l := range links {
			names = append(names, l.Name)
		}
		want := []string{"lo"}
		for _, pt := range tn.Ports {
			want = append(want, pt.Ifname)
		}
		slices.Sort(names)
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Errorf("node %s: links of netns %s = %v, want %v", tn.Name, tn.Netns, names, want)
		}
		out, err := node(t, d, p, tn.Name).Output(context.Background(), nil, "ip", "-o", "-4", "addr", "show")
		if err != nil {
			t.Fatal(err)
		}
		for _, pt := range tn.Ports {
			if !strings.Contains(string(out), pt.Address.String()) {
				t.Errorf("node %s: inside the container, port %s lacks %s:\n%s", tn.Name, pt.Ifname, pt.Address, out)
			}
		}
	}

	s, dst := node(t, d, p, "s"), p.Transparent.Node("d").Ports[0].Address.Addr().String()
	out, err := s.Output(context.Background(), nil, "ping", "-c", "5", "-i", "0.2", "-W", "2", dst)
	if err != nil {
		t.Fatalf("ping across three hosts: %v\n%s", err, out)
	}
	// One echo of five may be lost: seen once in a loaded full run (stop 29, 2026-11-27), an
	// echo counted at hops 0-1 and not at hops 2-3, not reproduced alone (docs/docker.md).
	// Every echo that came back must have been counted at every hop both ways (below).
	replies := pingReplies(t, string(out))
	if replies < 4 {
		t.Errorf("ping across three hosts: %d of 5 replies, want at least 4:\n%s", replies, out)
	} else if replies < 5 {
		t.Logf("ping across three hosts: one echo of five lost:\n%s", out)
	}
	// Symmetric: the reply crosses v3, the firewall and v1 too (64 - 3).
	if !strings.Contains(string(out), "ttl=61") {
		t.Errorf("ping's replies did not cross three functions (want ttl=61):\n%s", out)
	}
	bps := iperfAcross(t, d, p, s, node(t, d, p, "d"), dst)
	t.Logf("iperf3 across three hosts through v1, the firewall and v3 on docker: %.2f Gbit/s", bps/1e9)
	got := hopPackets(t, p.Lab)
	for _, chain := range []string{"c-web", "c-icmp"} {
		path := p.Transparent.Tables.ChainPath(chain)
		for hop := uint32(0); hop <= 3; hop++ {
			fwd, rev := got[[2]uint32{path, hop}], got[[2]uint32{path | 1, hop}]
			t.Logf("%s hop %d: forward %d, reverse %d packets", chain, hop, fwd, rev)
			if fwd < uint64(replies) || rev < uint64(replies) {
				t.Errorf("%s hop %d: forward %d, reverse %d packets, want %d (the echoes that came back) or more each", chain, hop, fwd, rev, replies)
			}
		}
	}
}

// iperfAcross runs a 2 s iperf3 TCP test from one node to a server it starts on another (port
// 5201, retried while the server is not yet listening) and returns what arrived, in bit/s; it
// fails the test when nothing did.
func iperfAcross(t *testing.T, d *deploy.Deployer, p *plan.Plan, from, to *docker.Node, dst string) float64 {
	t.Helper()
	log := d.Journal.NodeDir(p.Lab) + "/" + to.Name + ".iperf3.log"
	if _, err := to.Daemon([]string{"iperf3", "-s", "-1", "-p", "5201"}, log); err != nil {
		t.Fatal(err)
	}
	var out []byte
	var err error
	for range 40 {
		out, err = from.Output(context.Background(), nil, "iperf3", "-c", dst, "-t", "2", "-J")
		if err == nil || !strings.Contains(string(out)+err.Error(), "refused") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3 from %s to %s: %v\n%s", from.Name, to.Name, err, out)
	}
	res, err := iperf3probe.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if res.ReceivedBPS <= 0 {
		t.Errorf("iperf3 from %s to %s: nothing received", from.Name, to.Name)
	}
	return res.ReceivedBPS
}

// hopPackets reads a lab's steering counters: packets by {path, hop}.
func hopPackets(t *testing.T, lab string) map[[2]uint32]uint64 {
	t.Helper()
	dp, err := steer.Open(lab)
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
	return got
}

// pingReplies reads "N received" from ping's summary.
func pingReplies(t *testing.T, out string) int {
	t.Helper()
	m := regexp.MustCompile(`(\d+) received`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("ping printed no summary:\n%s", out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
