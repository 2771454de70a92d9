package vm_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/vm"
	"github.com/sfclab/sfclab/steer"
)

// transparentLab has two forwarder VMs as the hops of a symmetric chain between two namespace
// endpoints on one network (without steering the endpoints would reach each other directly):
// fwd on taps, mvt on macvtaps (passthru on its ports' veths, whose host ends carry the
// steering program).
const transparentLab = `
name: t-vmtr
steering: transparent
networks: [net]
endpoints:
  client: {kind: client}
  server: {kind: server}
functions:
  fwd: {kind: forwarder, vm: {}, ports: {in: net, out: net}}
  mvt: {kind: forwarder, vm: {backend: macvtap}, ports: {in: net, out: net}}
port_pairs:
  pp-fwd: {ingress: fwd.in, egress: fwd.out}
  pp-mvt: {ingress: mvt.in, egress: mvt.out}
port_pair_groups:
  g-fwd: {port_pairs: [pp-fwd]}
  g-mvt: {port_pairs: [pp-mvt]}
flow_classifiers:
  ping: {protocol: icmp, logical_source_port: client.eth0, logical_destination_port: server.eth0}
  web:
    protocol: tcp
    destination_port_range_min: 5201
    destination_port_range_max: 5201
    logical_source_port: client.eth0
    logical_destination_port: server.eth0
port_chains:
  c: {flow_classifiers: [ping, web], port_pair_groups: [g-fwd, g-mvt], chain_parameters: {symmetric: true}}
`

var ttlRE = regexp.MustCompile(`ttl=(\d+)`)

// pingTTLs pings dst from node from count times, 0.2 s apart, waiting up to wait seconds for
// each reply, and returns the replies' TTLs and ping's output. A failed ping, or one whose
// output shows no TTL, fails the test; through says what the packets cross.
func pingTTLs(t *testing.T, ctx context.Context, from runtime.Node, dst, count, wait, through string) ([]string, []byte) {
	t.Helper()
	out, err := from.Output(ctx, nil, "ping", "-c", count, "-i", "0.2", "-W", wait, dst)
	if err != nil {
		t.Fatalf("ping through %s: %v\n%s", through, err, out)
	}
	var ttls []string
	for _, m := range ttlRE.FindAllStringSubmatch(string(out), -1) {
		ttls = append(ttls, m[1])
	}
	if len(ttls) == 0 {
		t.Fatalf("no reply TTL in ping's output:\n%s", out)
	}
	return ttls, out
}

// TestTransparentVMFunction deploys a transparent lab whose functions are VMs, one on taps and
// one on macvtaps, and checks the traffic is steered through both guests: ping's replies come
// back with TTL 62 (each guest's kernel forwarded each way once; the endpoints share a
// network and would see 64), the steering counters count both directions into and out of
// each hop, the guests' ports received and sent the packets, and a TCP transfer goes through.
// The macvtap VM's host side holds a macvtap (passthru) on each port's veth and no tap, and
// after destroy the macvtaps and their device nodes are gone.
func TestTransparentVMFunction(t *testing.T) {
	requireVM(t)
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	l := labtest.Deploy(t, transparentLab)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if l.P.Runtime != "vm" || l.P.Node("fwd").VM == nil {
		t.Fatalf("plan runtime %q, fwd vm %v: want the forwarder a VM", l.P.Runtime, l.P.Node("fwd").VM)
	}
	for _, name := range []string{"fwd", "mvt"} {
		rec, err := vm.ReadBoot(l.P.Lab, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("boot of %s: %s", name, rec.Phases())
		// No bump program in the VM's host-side namespace: the guest forwards.
		ns, err := netdev.OpenNS(l.P.Transparent.Node(name).Netns)
		if err != nil {
			t.Fatal(err)
		}
		bumped, err := steer.BumpAttached(ns, "in")
		ns.Close()
		if err != nil || bumped {
			t.Errorf("bump program on %s's in port: %v, %v; want none (the guest forwards)", name, bumped, err)
		}
	}
	probes := checkMacvtapPorts(t, ctx, l, "mvt", l.P.Transparent.Node("mvt").Netns, []string{"in", "out"}, true, l.Node(t, "mvt"))

	client, server := l.Node(t, "client"), l.Node(t, "server")
	guestCount := func(name, ifname, dir string) uint64 {
		t.Helper()
		return guestCounter(ctx, t, l.Node(t, name), ifname, dir+"_packets")
	}
	inRx0 := map[string]uint64{"fwd": guestCount("fwd", "in", "rx"), "mvt": guestCount("mvt", "in", "rx")}
	outTx0 := map[string]uint64{"fwd": guestCount("fwd", "out", "tx"), "mvt": guestCount("mvt", "out", "tx")}

	dst := l.P.Transparent.Node("server").Ports[0].Address.Addr().String()
	ttls, out := pingTTLs(t, ctx, client, dst, "3", "3", "the VM functions")
	for _, ttl := range ttls {
		if ttl != "62" {
			t.Errorf("reply TTL %s, want 62 (two kernels forwarding each way: the guests'):\n%s", ttl, out)
		}
	}
	for _, name := range []string{"fwd", "mvt"} {
		if in, o := guestCount(name, "in", "rx")-inRx0[name], guestCount(name, "out", "tx")-outTx0[name]; in < 3 || o < 3 {
			t.Errorf("%s: the guest's in port received %d and out port sent %d packets during 3 pings; want at least 3 each", name, in, o)
		}
	}

	logPath := t.TempDir() + "/iperf3.log"
	if _, err := server.Daemon([]string{"iperf3", "-s", "-B", dst, "-p", "5201", "-1"}, logPath); err != nil {
		t.Fatal(err)
	}
	var err error
	for i := range 20 { // the server binds within milliseconds; wait for it a bounded time
		out, err = client.Output(ctx, nil, "iperf3", "-c", dst, "-p", "5201", "-t", "1")
		if err == nil || i == 19 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3 through the VM functions: %v\n%s", err, out)
	}

	// Both directions of the chain went into the VM's hop and out of it.
	info, err := l.D.Inspect(ctx, l.P.Lab)
	if err != nil {
		t.Fatal(err)
	}
	if info.Steering == nil || info.Steering.Error != "" || len(info.Steering.Paths) != 2 {
		t.Fatalf("inspect steering: %+v", info.Steering)
	}
	for _, pa := range info.Steering.Paths {
		if len(pa.Packets) != 3 || slices.Contains(pa.Packets, 0) {
			t.Errorf("path %s %s: packets per hop %v, want some into g-fwd, into g-mvt and out of it", pa.Chain, pa.Dir, pa.Packets)
		}
	}
	for _, ni := range info.Nodes {
		if ni.Error != "" || ni.Down != "" {
			t.Errorf("inspect of node %s: error %q, down %q", ni.Name, ni.Error, ni.Down)
		}
		if ni.Name == "fwd" && !strings.Contains(ni.Machine, "512 MiB") {
			t.Errorf("inspect of the VM function: machine %q", ni.Machine)
		}
		if ni.Name == "mvt" && !strings.Contains(ni.Machine, "macvtap (passthru") {
			t.Errorf("inspect of the macvtap VM function: machine %q", ni.Machine)
		}
	}
	if err := l.D.Destroy(ctx, l.P.Lab); err != nil {
		t.Fatal(err)
	}
	assertMacvtapsGone(t, l.P.Lab, probes)
}
