package vm_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
)

const macvtapLab = `
name: t-mvtap
endpoints:
  client: {kind: client}
  server: {kind: server}
functions:
  fwd: {kind: forwarder, vm: {cpus: 1, memory: 512, backend: macvtap}}
chains:
  - {name: c, from: client, to: server, hops: [fwd]}
`

// TestMacvtapForwarder deploys a VM forwarder whose ports are macvtaps (bridge mode) on the
// segments' bridges, between two namespace endpoints: the host side holds macvtaps, not
// veths, the guest's NICs have their MACs, QEMU opened the character devices sfclab made in
// the lab's device directory, inspect names the backend, and ping and iperf3 cross the VM.
// Destroy leaves no device node and no macvtap (a node made from each one's number no longer
// opens).
func TestMacvtapForwarder(t *testing.T) {
	requireVM(t)
	labtest.Exclusive(t)
	l := labtest.Deploy(t, macvtapLab)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	probes := checkNodeMacvtaps(t, ctx, l, "fwd", false)
	info, err := l.D.Inspect(ctx, l.P.Lab)
	if err != nil {
		t.Fatal(err)
	}
	for _, ni := range info.Nodes {
		if ni.Name == "fwd" && !strings.Contains(ni.Machine, "nic virtio on macvtap") {
			t.Errorf("inspect of the VM node does not name the backend: %q", ni.Machine)
		}
	}
	client := l.Node(t, "client")
	dst := l.P.Node("server").Interfaces[0].Address.Addr().String()
	if out, err := client.Output(ctx, nil, "ping", "-c", "3", "-i", "0.2", "-W", "2", dst); err != nil {
		t.Fatalf("ping through the VM forwarder on macvtap: %v\n%s", err, out)
	}
	g := iperf3Gbps(t, l, "1")
	if g <= 0 {
		t.Fatalf("iperf3 through the VM forwarder on macvtap moved nothing")
	}
	t.Logf("iperf3 TCP through the VM forwarder on macvtap: %.2f Gbit/s (TCG, not a figure)", g)

	if err := l.D.Destroy(ctx, l.P.Lab); err != nil {
		t.Fatal(err)
	}
	assertMacvtapsGone(t, l.P.Lab, probes)
}
