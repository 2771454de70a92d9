package deploy

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/internal/nettest"
	"github.com/sfclab/sfclab/internal/plantest"
	"github.com/sfclab/sfclab/netdev"
	iperf3probe "github.com/sfclab/sfclab/probe/iperf3"
	nsrt "github.com/sfclab/sfclab/runtime/netns"
)

// hostsLab is study D's two servers with their own cores and a shaped link; sender by veth,
// responder by macvlan, so both attachments cross hosts.
func hostsLab(name, cpuA, cpuB, rate string) string {
	return `name: ` + name + `
hosts:
  - {name: snd, cpus: "` + cpuA + `", link: {rate: ` + rate + `}}
  - {name: rsp, cpus: "` + cpuB + `", link: {rate: ` + rate + `}}
endpoints:
  sender: {kind: client, host: snd}
  responder: {kind: server, host: rsp, driver: macvlan}
chains:
  - {name: echo, from: sender, to: responder}
`
}

// TestRoutedHostsDeploy places a routed lab's endpoints on two emulated hosts: the echo crosses
// the host link, each node runs on its host's cores only, and the link is shaped (tbf on each
// host's underlay interface caps a TCP stream across it).
func TestRoutedHostsDeploy(t *testing.T) {
	requireRoot(t)
	if err := cgroup.CPUsAvailable(); err != nil {
		t.Skipf("SKIP: no cpuset controller on this kernel: %v", err)
	}
	cpuB := "1"
	if cgroup.CheckCPUs("1") != nil {
		cpuB = "0" // a one-core machine: both hosts share core 0
	}
	d := testDeployer(t)
	p := plantest.Decode(t, hostsLab("hosts-d", "0", cpuB, "100mbit"))
	if p.Fabric != "" || len(p.Hosts) != 2 || p.Underlay == "" || p.MTU != 1450 {
		t.Fatalf("plan: fabric %q, hosts %d, underlay %q, mtu %d; want no fabric, 2 hosts, an underlay, mtu 1450", p.Fabric, len(p.Hosts), p.Underlay, p.MTU)
	}
	deploy(t, d, p)
	snd, rsp := node(t, d, p, "sender"), node(t, d, p, "responder")
	target := p.Chain("echo").Target.String()
	if out, err := snd.Output(context.Background(), nil, "ping", "-c", "2", "-i", "0.2", "-W", "2", target); err != nil {
		t.Fatalf("ping across the hosts: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		node string
		want string
	}{{"sender", "0"}, {"responder", cpuB}} {
		out, err := node(t, d, p, tc.node).Output(context.Background(), nil, "grep", "Cpus_allowed_list", "/proc/self/status")
		if got := strings.Join(strings.Fields(string(out)), " "); err != nil || got != "Cpus_allowed_list: "+tc.want {
			t.Errorf("%s: a process in it runs on %q (%v), want cores %s", tc.node, got, err, tc.want)
		}
	}
	for i, h := range p.Hosts {
		rps, err := exec.Command("ip", "netns", "exec", h.Netns, "cat", "/sys/class/net/ul0/queues/rx-0/rps_cpus").Output()
		want := map[string]string{"0": "1", "1": "2"}[[]string{"0", cpuB}[i]]
		if got := strings.TrimLeft(strings.TrimSpace(string(rps)), "0,"); err != nil || got != want {
			t.Errorf("host %s: ul0 rps_cpus %q (%v), want mask %s: packets from the other host are processed on its own core", h.Name, rps, err, want)
		}
		ns, err := netdev.OpenNS(h.Netns)
		if err != nil {
			t.Fatal(err)
		}
		sh, err := ns.Shaping("ul0")
		ns.Close()
		if err != nil || !strings.Contains(sh, "tbf") {
			t.Errorf("host %s: ul0 shaping %q (%v), want tbf", h.Name, sh, err)
		}
	}
	if _, err := rsp.Daemon([]string{"iperf3", "-s", "-1"}, filepath.Join(t.TempDir(), "iperf3.log")); err != nil {
		t.Fatal(err)
	}
	var out []byte
	var err error
	for range 20 {
		out, err = snd.Output(context.Background(), nil, "iperf3", "-c", target, "-t", "2", "-J")
		if err == nil || !strings.Contains(err.Error(), "refused") {
			break
		}
	}
	if err != nil {
		t.Fatalf("iperf3 across the hosts: %v\n%s", err, out)
	}
	bps := receivedBps(t, out)
	t.Logf("TCP across a 100mbit host link: %.1f Mbit/s", bps/1e6)
	if bps > 110e6 || bps < 50e6 {
		t.Errorf("TCP across a 100mbit host link: %.1f Mbit/s, want 50-110", bps/1e6)
	}
}

// TestHostCoreRefused: a host naming a core this machine lacks is refused before anything
// is created, at the host's line in the file.
func TestHostCoreRefused(t *testing.T) {
	requireRoot(t)
	if err := cgroup.CPUsAvailable(); err != nil {
		t.Skipf("SKIP: no cpuset controller on this kernel: %v", err)
	}
	d := testDeployer(t)
	p := plantest.Decode(t, hostsLab("hosts-bad", "0", "4000", "10gbit"))
	_, err := d.Deploy(context.Background(), p, "test")
	if err == nil {
		_ = d.Destroy(context.Background(), p.Lab)
		t.Fatal("deploy with core 4000 succeeded")
	}
	if !errors.Is(err, cgroup.ErrNoCore) || !strings.Contains(err.Error(), "test.yaml:4:5: host rsp: cpus:") || !strings.Contains(err.Error(), "core 4000 does not exist") {
		t.Errorf("error = %v; want test.yaml:4:5 host rsp and core 4000 named", err)
	}
	if ns, _ := (nsrt.Runtime{}).Leftovers(context.Background(), p.Lab); len(ns) > 0 {
		t.Errorf("refused deploy created namespaces %v", ns)
	}
	if _, err := os.Stat(d.Journal.Dir(p.Lab)); err == nil {
		t.Errorf("refused deploy created its journal")
	}
}

// receivedBps decodes an iperf3 client's -J output and returns the receiver's bit rate.
func receivedBps(t testing.TB, out []byte) float64 {
	t.Helper()
	res, err := iperf3probe.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	return res.ReceivedBPS
}

// TestEBPFRedirectAcrossHosts: sender and responder attached by ebpf-redirect on two hosts;
// the echo's IPv4 crosses in the steering tunnel (bpf_redirect_peer at the far end), not
// through the bridges' per-segment VXLAN, which carries ARP only.
func TestEBPFRedirectAcrossHosts(t *testing.T) {
	requireRoot(t)
	d := testDeployer(t)
	p := plantest.Decode(t, `name: hosts-e
hosts: [snd, rsp]
endpoints:
  sender: {kind: client, host: snd, driver: ebpf-redirect}
  responder: {kind: server, host: rsp, driver: ebpf-redirect}
chains:
  - {name: echo, from: sender, to: responder}
`)
	deploy(t, d, p)
	snd := node(t, d, p, "sender")
	tx := func(dev string) uint64 {
		return nettest.LinkStats(t, p.Hosts[0].Netns, dev).TxPackets
	}
	steer0, seg0 := tx("vxsteer"), tx("vx0")
	if out, err := snd.Output(context.Background(), nil, "ping", "-c", "100", "-i", "0.005", "-W", "2", p.Chain("echo").Target.String()); err != nil {
		t.Fatalf("ping across the hosts by ebpf-redirect: %v\n%s", err, out)
	}
	steer1, seg1 := tx("vxsteer"), tx("vx0")
	t.Logf("sender's host: steering tunnel +%d packets, segment vxlan +%d", steer1-steer0, seg1-seg0)
	if steer1-steer0 < 100 {
		t.Errorf("steering tunnel carried %d packets of 100 echo requests", steer1-steer0)
	}
	// The segment's VXLAN carries ARP and the hosts' own IPv6 neighbour discovery, not echoes.
	if seg1-seg0 >= 20 {
		t.Errorf("segment vxlan carried %d packets: the echoes took the bridge", seg1-seg0)
	}
}

// TestMacvtapDriverOnHosts: an endpoint attached by driver macvtap on an emulated host gets a
// macvtap on its host's bridge (package hosts makes it as a macvlan), its stack receives on
// it (nobody opens the character device), and ping crosses the hosts to a veth endpoint.
func TestMacvtapDriverOnHosts(t *testing.T) {
	requireRoot(t)
	d := testDeployer(t)
	p := plantest.Decode(t, `name: hosts-mvt
hosts: [snd, rsp]
endpoints:
  sender: {kind: client, host: snd, driver: macvtap}
  responder: {kind: server, host: rsp}
chains:
  - {name: echo, from: sender, to: responder}
`)
	deploy(t, d, p)
	ns, err := netdev.OpenNS(p.Node("sender").Netns)
	if err != nil {
		t.Fatal(err)
	}
	links, err := ns.Links()
	ns.Close()
	if err != nil {
		t.Fatal(err)
	}
	kind := ""
	for _, l := range links {
		if l.Name == p.Node("sender").Interfaces[0].Name {
			kind = l.Kind
		}
	}
	if kind != "macvtap" {
		t.Fatalf("sender's interface is a %q, want a macvtap", kind)
	}
	target := p.Chain("echo").Target.String()
	if out, err := node(t, d, p, "sender").Output(context.Background(), nil, "ping", "-c", "3", "-i", "0.2", "-W", "2", target); err != nil {
		t.Fatalf("ping from a macvtap endpoint across the hosts: %v\n%s", err, out)
	}
}
