package vm_test

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/runtime/vm"
)

// hostsLab is a routed chain whose VM forwarder sits on the second of two emulated hosts:
// client and server on h1, so each way crosses the VXLAN between the hosts twice.
const hostsLab = `
name: t-vmhosts
hosts: [h1, h2]
endpoints:
  client: {kind: client, host: h1}
  server: {kind: server, host: h1}
functions:
  fwd: {kind: forwarder, host: h2, vm: {}}
chains:
  - {name: c, from: client, to: server, hops: [fwd]}
`

// TestHostsVMForwarder deploys a routed lab on two emulated hosts with a VM forwarder on the
// other host than its endpoints (ports made by package hosts, the VM booted on them) and
// checks that ping crosses the guest: the replies come back with TTL 63 (one routed hop each
// way: the guest's kernel), the guest's NICs counted the pings, and they have their ports'
// MTU.
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
	rec, err := vm.ReadBoot(l.P.Lab, "fwd")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("boot: %s", rec.Phases())

	fwd, client := l.Node(t, "fwd"), l.Node(t, "client")
	counts := func() map[string]int {
		m := map[string]int{}
		for _, i := range l.P.Node("fwd").Interfaces {
			for _, c := range []string{"rx_packets", "tx_packets"} {
				out, err := fwd.Output(ctx, nil, "cat", "/sys/class/net/"+i.Name+"/statistics/"+c)
				if err != nil {
					t.Fatalf("read the guest's %s counter of %s: %v", c, i.Name, err)
				}
				m[i.Name+"/"+c], _ = strconv.Atoi(strings.TrimSpace(string(out)))
			}
		}
		return m
	}
	before := counts()
	dst := l.P.Node("server").Interfaces[0].Address.Addr().String()
	out, err := client.Output(ctx, nil, "ping", "-c", "5", "-i", "0.2", "-W", "2", dst)
	if err != nil {
		t.Fatalf("ping through the VM forwarder on the other host: %v\n%s", err, out)
	}
	for _, m := range ttlRE.FindAllStringSubmatch(string(out), -1) {
		if m[1] != "63" {
			t.Errorf("ping reply with ttl=%s, want 63 (one routed hop, the guest):\n%s", m[1], out)
			break
		}
	}
	after := counts()
	for k, v := range after {
		if v-before[k] < 5 {
			t.Errorf("guest counter %s went from %d to %d over 5 pings", k, before[k], v)
		}
	}
	for _, i := range l.P.Node("fwd").Interfaces {
		guest, err := fwd.Output(ctx, nil, "cat", "/sys/class/net/"+i.Name+"/mtu")
		if err != nil {
			t.Fatal(err)
		}
		port, err := exec.Command("ip", "netns", "exec", l.P.Node("fwd").Netns, "cat", "/sys/class/net/"+i.Name+"/mtu").Output()
		if err != nil {
			t.Fatal(err)
		}
		if g, p := strings.TrimSpace(string(guest)), strings.TrimSpace(string(port)); g != p {
			t.Errorf("guest NIC %s has MTU %s, its port %s", i.Name, g, p)
		} else {
			t.Logf("guest NIC %s: MTU %s, as its port", i.Name, g)
		}
	}
}
