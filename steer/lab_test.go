package steer_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/hosts"
	"github.com/sfclab/sfclab/internal/nettest"
	"github.com/sfclab/sfclab/sfc"
	"github.com/sfclab/sfclab/steer"
)

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED LOUDLY: steering tests build namespaces and load eBPF: they need root")
	}
}

// undoStack runs its steps in reverse at cleanup.
type undoStack struct{ steps []func() error }

func (u *undoStack) Push(what string, fn func() error) { u.steps = append(u.steps, fn) }
func (u *undoStack) run(t testing.TB) {
	for i := len(u.steps) - 1; i >= 0; i-- {
		if err := u.steps[i](); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
}

// fnode is a test node: an endpoint or a function instance with ports on one network.
type fnode struct {
	name  string
	host  string
	ports []string // ifnames; addresses assigned in order
	// pairs makes it a function: its (ingress, egress) ifnames
	pairs [][2]string
}

// lab is a built test lab with its data plane loaded.
type lab struct {
	name  string
	topo  *hosts.Topology
	dp    *steer.Dataplane
	model *sfc.Model
	bind  map[string]sfc.Binding
	addr  map[string]netip.Addr // "node.if" -> address
	addr6 map[string]netip.Addr // "node.if" -> IPv6 address (dual-stack labs)
}

func hostIf(node, ifname string) string {
	s := node + "-" + ifname
	if len(s) > 15 {
		s = s[:15]
	}
	return s
}

// buildLab creates the hosts, nodes and ports, makes functions bumps in the wire (symmetric
// ways too), loads the data plane and attaches it to every port.
func buildLab(t testing.TB, name string, hostNames []string, nodes []fnode) *lab {
	t.Helper()
	return buildDualLab(t, name, hostNames, nodes, false)
}

// buildDualLab is buildLab; with dual, every port has an IPv6 address too (2001:2:0:10::/64).
func buildDualLab(t testing.TB, name string, hostNames []string, nodes []fnode, dual bool) *lab {
	t.Helper()
	requireRoot(t)
	u := &undoStack{}
	t.Cleanup(func() { u.run(t) })
	u.Push("unpin", func() error { return steer.Unpin(name) })
	topo := &hosts.Topology{Lab: name, Networks: []hosts.Network{{Name: "net", Bridge: "br-net", VNI: 100}}}
	for i, h := range hostNames {
		topo.Hosts = append(topo.Hosts, hosts.Host{Name: h, ID: uint32(i + 1),
			Underlay: netip.MustParsePrefix(fmt.Sprintf("198.19.200.%d/24", i+1))})
	}
	l := &lab{name: name, topo: topo, model: &sfc.Model{}, bind: map[string]sfc.Binding{}, addr: map[string]netip.Addr{},
		addr6: map[string]netip.Addr{}}
	next := 1
	hostID := map[string]uint32{}
	for _, h := range topo.Hosts {
		hostID[h.Name] = h.ID
	}
	for _, n := range nodes {
		hn := hosts.Node{Name: n.name, Host: n.host}
		for _, ifn := range n.ports {
			a := netip.AddrFrom4([4]byte{198, 18, 10, byte(next)})
			var a6 netip.Addr
			var p6 netip.Prefix
			if dual {
				a6 = netip.AddrFrom16([16]byte{0x20, 0x01, 0, 2, 0, 0, 0, 0x10, 15: byte(next)})
				p6 = netip.PrefixFrom(a6, 64)
				l.addr6[n.name+"."+ifn] = a6
			}
			next++
			hn.Ports = append(hn.Ports, hosts.Port{Ifname: ifn, HostIf: hostIf(n.name, ifn), Network: "net",
				Addr: netip.PrefixFrom(a, 24), Addr6: p6})
			l.addr[n.name+"."+ifn] = a
			l.model.Ports = append(l.model.Ports, sfc.Port{Name: n.name + "." + ifn, Node: n.name, Network: "net", Host: n.host, IP: a, IP6: a6})
		}
		topo.Nodes = append(topo.Nodes, hn)
	}
	built, err := hosts.Build(topo, u)
	if built != nil {
		t.Cleanup(built.Close)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if len(n.pairs) == 0 {
			continue
		}
		var ps []hosts.Pair
		for _, p := range n.pairs {
			ps = append(ps, hosts.Pair{In: p[0], Out: p[1]})
		}
		if err := hosts.Forward(hosts.NetnsName(name, n.name), ps, true); err != nil {
			t.Fatal(err)
		}
	}
	var ids []uint32
	for _, h := range topo.Hosts {
		ids = append(ids, h.ID)
	}
	dp, err := steer.Load(name, ids)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	l.dp = dp
	for _, n := range nodes {
		hns := hosts.HostNetns(name, n.host)
		for _, ifn := range n.ports {
			hif := hostIf(n.name, ifn)
			idx, _, err := hosts.LinkOf(hns, hif)
			if err != nil {
				t.Fatal(err)
			}
			_, mac, err := hosts.LinkOf(hosts.NetnsName(name, n.name), ifn)
			if err != nil {
				t.Fatal(err)
			}
			l.bind[n.name+"."+ifn] = sfc.Binding{Host: hostID[n.host], Ifindex: uint32(idx), MAC: mac, IP: l.addr[n.name+"."+ifn],
				IP6: l.addr6[n.name+"."+ifn]}
			if err := dp.AttachPort(hns, hostID[n.host], hif); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(topo.Hosts) > 1 {
		for _, h := range topo.Hosts {
			hns := hosts.HostNetns(name, h.Name)
			idx, _, err := hosts.LinkOf(hns, hosts.SteerDev)
			if err != nil {
				t.Fatal(err)
			}
			if err := dp.SetTunnel(h.ID, h.Underlay.Addr(), uint32(idx)); err != nil {
				t.Fatal(err)
			}
			if err := dp.AttachTunnel(hns, h.ID, hosts.SteerDev); err != nil {
				t.Fatal(err)
			}
		}
	}
	return l
}

// apply compiles the model and writes the tables.
func (l *lab) apply(t testing.TB) *sfc.Tables {
	t.Helper()
	tab, err := sfc.Compile(l.model, l.bind)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.dp.Apply(tab); err != nil {
		t.Fatal(err)
	}
	return tab
}

func (l *lab) ns(node string) string { return hosts.NetnsName(l.name, node) }

// run runs a command in a node, bounded in time.
func (l *lab) run(t testing.TB, node string, argv ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", l.ns(node)}, argv...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// iperf runs a bounded iperf3 client from src to dst's address; extra are client flags.
func (l *lab) iperf(t testing.TB, src, dst string, port int, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := exec.CommandContext(ctx, "ip", "netns", "exec", l.ns(strings.Split(dst, ".")[0]),
		"iperf3", "-s", "-1", "-p", strconv.Itoa(port))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	var out string
	var err error
	for range 50 { // the server needs a moment to listen
		a := l.addr[dst]
		if slices.Contains(extra, "-6") {
			a = l.addr6[dst]
		}
		args := append([]string{"iperf3", "-c", a.String(), "-p", strconv.Itoa(port), "-t", "1"}, extra...)
		out, err = l.run(t, strings.Split(src, ".")[0], args...)
		if err == nil || !strings.Contains(out, "refused") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3 %s -> %s: %v\n%s", src, dst, err, out)
	}
	return out
}

// settledCounters is counters once they stop moving: read again every 200 ms until two reads
// agree, for at most 3 s (then the last read). A connection's last packets (its FIN and the
// ACKs after it) may still cross a chain when the program that made them has exited.
func (l *lab) settledCounters(t testing.TB) map[[2]uint32]uint64 {
	t.Helper()
	c := l.counters(t)
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		next := l.counters(t)
		if maps.Equal(c, next) {
			return next
		}
		c = next
	}
	return c
}

// rx is a node interface's received packet count.
func (l *lab) rx(t testing.TB, node, ifname string) uint64 {
	t.Helper()
	return nettest.LinkStats(t, l.ns(node), ifname).RxPackets
}

// counters maps "path/hop" to packets.
func (l *lab) counters(t testing.TB) map[[2]uint32]uint64 {
	t.Helper()
	cs, err := l.dp.Counters()
	if err != nil {
		t.Fatal(err)
	}
	out := map[[2]uint32]uint64{}
	for _, c := range cs {
		out[[2]uint32{c.Path, c.Hop}] = c.Packets
	}
	return out
}
