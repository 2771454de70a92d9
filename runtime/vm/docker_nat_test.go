package vm_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/vm"
	"github.com/sfclab/sfclab/runtime/vm/accel"
	"github.com/sfclab/sfclab/vnf/httpserver"
)

// dockerNATLab is a docker lab with attach nat whose published target is an http-server
// (Apache) in a VM booted from the Debian root: the client container reaches it at the
// gateway address of their network, where sfclab's nat rule (and, from the host, the engine's)
// DNATs it to the guest's address. Its pool is its own (the other docker labs': docker_test.go).
const dockerNATLab = `
name: t-vmdock-nat
runtime: docker
docker: {attach: nat}
addressing: {pool: 198.19.216.0/21}
endpoints:
  client: {kind: client}
  web: {kind: http-server, vm: {image: debian}, http: {objects: [1k]}}
chains:
  - {name: c, from: client, to: web, classifier: {protocol: tcp, destination_port: 80}}
`

// debianCacheFor is debianCache for the Debian root of the given kinds' packages.
func debianCacheFor(t *testing.T, kindNames ...string) string {
	t.Helper()
	root := os.Getenv("SFCLAB_TEST_VM_CACHE")
	if root == "" {
		root = vm.DefaultImageRoot
	}
	if testing.Short() {
		want := vm.DebianPackages(kindNames)
		if ims, _ := (vm.Builder{Root: root}).List(); !slices.ContainsFunc(ims, func(im *vm.Image) bool {
			return im.Disk() != "" && slices.Equal(im.Packages, want)
		}) {
			t.Skipf("SKIPPED LOUDLY: no cached Debian guest root with %s under %s and -short (a cold build takes minutes): sfclab images build --runtime vm --lab LAB", strings.Join(want, " "), root)
		}
	}
	return root
}

// TestDockerNATVMServer deploys a docker lab with attach nat whose published target is an
// http-server in a Debian guest. The kind's readiness check passes in the Debian root, which
// has no netstat or wget (the agent lists the sockets and makes the GET). Then the object is
// fetched at the published address (the network's gateway) from the client container, through
// sfclab's nat PREROUTING rule, which counts it, the guest seeing the client's own address;
// and from the host, through the engine's DNAT for the published port. With QEMU killed the
// published port answers no more (nothing in the container serves it). Destroy leaves no
// container, network, host rule, QEMU, namespace or cgroup.
func TestDockerNATVMServer(t *testing.T) {
	requireVM(t)
	requireDocker(t)
	cache := debianCacheFor(t, "http-server")
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	p := labtest.Plan(t, dockerNATLab)
	if len(p.Publish) != 1 || p.Publish[0].Node != "web" || p.Publish[0].Port != 80 || p.Chains[0].Target != p.Publish[0].HostIP {
		t.Fatalf("plan publishes %+v, chain target %s: want web's port 80 at the gateway", p.Publish, p.Chains[0].Target)
	}
	pub := p.Publish[0]
	t.Cleanup(func() { assertNoDockerVMLeft(t, p) })
	start := time.Now()
	l := labtest.DeployWith(t, dockerNATLab, withImageRoot(cache))
	t.Logf("deploy (the http-server's readiness check in the Debian guest included): %s", time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if rec, err := vm.ReadBoot(l.P.Lab, "web"); err == nil {
		t.Logf("boot: %s", rec.Phases())
	}

	web, client := l.Node(t, "web"), l.Node(t, "client")
	// The guest is the Debian root, and it has neither tool the kind's check used before.
	if out, err := web.Output(ctx, nil, debianProgram, "-W", "apache2"); err != nil || !strings.HasPrefix(string(out), "apache2") {
		t.Fatalf("%s -W apache2 in the guest: %v\n%s", debianProgram, err, out)
	}
	if out, err := web.Output(ctx, nil, "sh", "-c", "command -v wget netstat"); err == nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("the Debian guest has wget or netstat (%v: %s): the readiness check's independence of them is not shown", err, out)
	}

	path := "/obj-1k"
	want, _ := io.ReadAll(io.LimitReader(httpserver.Content(1024), 1024))
	url := "http://" + net.JoinHostPort(pub.HostIP.String(), strconv.Itoa(int(pub.HostPort))) + path
	fetch := func(who string, node runtime.Node) error {
		tr := &http.Transport{DisableKeepAlives: true}
		if node != nil {
			tr.DialContext = func(ctx context.Context, network, a string) (c net.Conn, err error) {
				err = node.Do(func() error {
					c, err = (&net.Dialer{Timeout: 3 * time.Second}).DialContext(ctx, network, a)
					return err
				})
				return c, err
			}
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, want) {
			return fmt.Errorf("GET %s from %s: %s, %d bytes, want 200 and the object's 1024 bytes", url, who, resp.Status, len(body))
		}
		return nil
	}

	// From the client container: sfclab's PREROUTING rule carries it to the guest.
	rx0 := guestCounter(ctx, t, web, "eth0", "rx_packets")
	if err := fetch("the client container", client); err != nil {
		t.Fatal(err)
	}
	if rx := guestCounter(ctx, t, web, "eth0", "rx_packets") - rx0; rx < 3 {
		t.Errorf("the guest's eth0 received %d packets during a GET; want the connection's", rx)
	}
	if dnat := natRuleHits(t, l.P.Lab); dnat == 0 {
		t.Errorf("sfclab's DNAT rule for the published port counted no packet")
	}
	// The guest sees the client's own address, not the gateway's (the userland proxy's).
	var conn net.Conn
	err := client.Do(func() (err error) {
		conn, err = net.DialTimeout("tcp", net.JoinHostPort(pub.HostIP.String(), strconv.Itoa(int(pub.HostPort))), 3*time.Second)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The guest kernel's table gives a remote address as the kernel's 32-bit word in hex
	// (little-endian here: 198.19.216.1 is 01D813C6); the local port 80 is 0050.
	client4 := l.P.Node("client").Interfaces[0].Address.Addr().As4()
	peer := fmt.Sprintf(":0050 %02X%02X%02X%02X:", client4[3], client4[2], client4[1], client4[0])
	var table []byte
	for range 30 { // the guest has the connection once the client's ACK reached it
		if table, err = web.Output(ctx, nil, "cat", "/proc/net/tcp"); err != nil || strings.Contains(string(table), peer) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	conn.Close()
	if err != nil || !strings.Contains(string(table), peer) {
		t.Errorf("the guest's TCP table (%v) has no connection on port 80 from the client's own address %s (%q):\n%s", err, l.P.Node("client").Interfaces[0].Address.Addr(), peer, table)
	}
	t.Logf("GET %s from the client container: the guest's Apache answered (%s); the guest's connection comes from the client's own address", url, accel.TCGMark)

	// From the host: the engine's DNAT of the published port.
	if err := fetch("the host", nil); err != nil {
		t.Fatalf("from the host: %v", err)
	}
	t.Logf("GET %s from the host: the guest's Apache answered", url)

	// Nothing but the guest serves the published port.
	for _, pid := range vm.QEMUPids(l.P.Lab) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(vm.QEMUPids(l.P.Lab)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if err := fetch("the client container", client); err == nil {
		t.Error("the published port answered with the guest's QEMU killed")
	}
}

// guestCounter reads one of a guest interface's statistics through the agent.
func guestCounter(ctx context.Context, t *testing.T, node runtime.Node, ifname, counter string) uint64 {
	t.Helper()
	out, err := node.Output(ctx, nil, "cat", "/sys/class/net/"+ifname+"/statistics/"+counter)
	if err != nil {
		t.Fatalf("read the guest's %s %s: %v", ifname, counter, err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// natRuleHits is the packet count of the lab's DNAT rules in the host's nat PREROUTING
// (iptables-save -c, the rules carrying the lab's comment).
func natRuleHits(t *testing.T, lab string) uint64 {
	t.Helper()
	out, err := exec.Command("iptables-save", "-c", "-t", "nat").Output()
	if err != nil {
		t.Fatalf("iptables-save: %v", err)
	}
	var n uint64
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.Contains(l, `"sfclab lab=`+lab+`"`) || !strings.Contains(l, "-A PREROUTING") || !strings.Contains(l, "DNAT") {
			continue
		}
		var pk, by uint64
		if _, err := fmt.Sscanf(l, "[%d:%d]", &pk, &by); err == nil {
			n += pk
		}
	}
	return n
}
