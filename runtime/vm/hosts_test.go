package vm_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/runtime/vm"
)

// hostsLab is a routed chain whose first VM forwarder sits on the second of two emulated
// hosts (tap backend), its second on h1 (macvtap backend: bridge mode on h1's bridges):
// client and server on h1, so each way crosses the VXLAN between the hosts twice.
const hostsLab = `
name: t-vmhosts
hosts: [h1, h2]
endpoints:
  client: {kind: client, host: h1}
  server: {kind: server, host: h1}
functions:
  fwd: {kind: forwarder, host: h2, vm: {}}
  mvt: {kind: forwarder, host: h1, vm: {backend: macvtap}}
chains:
  - {name: c, from: client, to: server, hops: [fwd, mvt]}
`

// TestHostsVMForwarder deploys a routed lab on two emulated hosts with a VM forwarder on the
// other host than its endpoints and a second one, on macvtaps, on theirs (ports made by
// package hosts, the VMs booted on them) and checks that ping crosses the guests: the replies
// come back with TTL 62 (two routed hops each way: the guests' kernels), the guests' NICs
// counted the pings, and they have their ports' MTU (1450: VXLAN joins the hosts). The
// macvtap VM's ports are macvtaps on h1's bridges (no veth, no tap), an iperf3 transfer
// crosses both guests, and after destroy the macvtaps and their device nodes are gone.
func TestHostsVMForwarder(t *testing.T) {
	requireVM(t)
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	l := labtest.Deploy(t, hostsLab)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if n := l.P.Node("fwd"); n.VM == nil || n.Host != "h2" {
		t.Fatalf("fwd: vm %v on host %q; want a VM on h2", n.VM, n.Host)
	}
	if n := l.P.Node("mvt"); !n.VM.Macvtap() || n.Host != "h1" {
		t.Fatalf("mvt: vm %v on host %q; want a macvtap VM on h1", n.VM, n.Host)
	}
	for _, name := range []string{"fwd", "mvt"} {
		rec, err := vm.ReadBoot(l.P.Lab, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("boot of %s: %s", name, rec.Phases())
	}
	probes := checkNodeMacvtaps(t, ctx, l, "mvt", false)

	client := l.Node(t, "client")
	counts := func() map[string]int {
		m := map[string]int{}
		for _, name := range []string{"fwd", "mvt"} {
			g := l.Node(t, name)
			for _, i := range l.P.Node(name).Interfaces {
				for _, c := range []string{"rx_packets", "tx_packets"} {
					m[name+"/"+i.Name+"/"+c] = int(guestCounter(ctx, t, g, i.Name, c))
				}
			}
		}
		return m
	}
	before := counts()
	dst := l.P.Node("server").Interfaces[0].Address.Addr().String()
	out, err := client.Output(ctx, nil, "ping", "-c", "5", "-i", "0.2", "-W", "2", dst)
	if err != nil {
		t.Fatalf("ping through the VM forwarders: %v\n%s", err, out)
	}
	for _, m := range ttlRE.FindAllStringSubmatch(string(out), -1) {
		if m[1] != "62" {
			t.Errorf("ping reply with ttl=%s, want 62 (two routed hops, the guests):\n%s", m[1], out)
			break
		}
	}
	after := counts()
	for k, v := range after {
		if v-before[k] < 5 {
			t.Errorf("guest counter %s went from %d to %d over 5 pings", k, before[k], v)
		}
	}
	for _, name := range []string{"fwd", "mvt"} {
		for _, i := range l.P.Node(name).Interfaces {
			guest, err := l.Node(t, name).Output(ctx, nil, "cat", "/sys/class/net/"+i.Name+"/mtu")
			if err != nil {
				t.Fatal(err)
			}
			port, err := exec.Command("ip", "netns", "exec", l.P.Node(name).Netns, "cat", "/sys/class/net/"+i.Name+"/mtu").Output()
			if err != nil {
				t.Fatal(err)
			}
			if g, p := strings.TrimSpace(string(guest)), strings.TrimSpace(string(port)); g != p || g != "1450" {
				t.Errorf("guest NIC %s/%s has MTU %s, its port %s; want both 1450", name, i.Name, g, p)
			}
		}
	}
	g := iperf3Gbps(t, l, "1")
	if g <= 0 {
		t.Fatal("iperf3 through the two VM forwarders moved nothing")
	}
	t.Logf("iperf3 TCP through a tap VM on h2 and a macvtap VM on h1: %.2f Gbit/s (TCG, not a figure)", g)
	if err := l.D.Destroy(ctx, l.P.Lab); err != nil {
		t.Fatal(err)
	}
	assertMacvtapsGone(t, l.P.Lab, probes)
}
