package attach_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/attach"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/rtt"
	"github.com/sfclab/sfclab/probe/rtt/echo"
)

// hostDevice creates a device in the host for the test — one end of a veth pair whose other
// end is name+"p" (this kernel has no dummy driver) — removed at the test's end wherever it is
// then, and returns the host namespace.
func hostDevice(t *testing.T, name string, addr string) *netdev.NS {
	t.Helper()
	labtest.RequireRoot(t)
	host, err := netdev.OpenNS("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	if err := host.AddVeth(name, nil, name+"p", 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", name).Run()
		_ = exec.Command("ip", "link", "del", name+"p").Run()
	})
	if addr != "" {
		if err := host.AddAddr(name, netip.MustParsePrefix(addr)); err != nil {
			t.Fatal(err)
		}
	}
	return host
}

// uplink returns the interface of the host's IPv4 default route, or "".
func uplink() string {
	out, _ := exec.Command("ip", "-4", "route", "show", "default").Output()
	f := strings.Fields(string(out))
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "dev" {
			return f[i+1]
		}
	}
	return ""
}

func driverLab(name, client, server string) string {
	return `
name: ` + name + `
endpoints:
  client: {kind: client` + client + `}
  server: {kind: server` + server + `}
chains:
  - {name: direct, from: client, to: server}
`
}

// TestRefusedBeforeAnything: a missing device, the host's uplink, an addressed interface and
// sriov on this host are refused by deploy before anything of the lab exists.
func TestRefusedBeforeAnything(t *testing.T) {
	hostDevice(t, "rttaddr0", "198.19.254.1/32")
	tests := []struct{ name, server, want string }{
		{"missing", ", driver: {type: host-device, device: rttnope0}", "no such interface"},
		{"addressed", ", driver: {type: host-device, device: rttaddr0}", "carries an address"},
		{"sriov", ", driver: {type: sriov, pf: rttaddr0}", "sriov_totalvfs"},
	}
	if up := uplink(); up != "" {
		tests = append(tests, struct{ name, server, want string }{"uplink", ", driver: {type: host-device, device: " + up + "}", "the host's uplink"})
	} else {
		t.Log("SKIPPED LOUDLY: the uplink case: this host has no IPv4 default route")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := labtest.Plan(t, driverLab("t-rtt-ref", "", tt.server))
			d := &deploy.Deployer{Journal: journal.Journal{Root: t.TempDir()}}
			_, err := d.Deploy(context.Background(), p, "test")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				_ = d.Destroy(context.Background(), p.Lab)
				t.Fatalf("deploy: %v; want an error with %q", err, tt.want)
			}
			if tt.name == "sriov" && !errors.Is(err, attach.ErrNoSRIOV) {
				t.Errorf("sriov refusal %v does not wrap ErrNoSRIOV", err)
			}
			if ns, _ := netdev.ListNetns(plan.NetnsName(p.Lab, "")); len(ns) > 0 {
				t.Errorf("refused deploy left namespaces %v", ns)
			}
			t.Log(err)
		})
	}
}

// TestMacvlan: the client attached by a macvlan, or by a macvtap (driver macvtap, its
// character device left closed), on the segment's bridge reaches the server (a veth on the
// same bridge): echoes measured by the rtt probe.
func TestMacvlan(t *testing.T) {
	for _, kind := range []string{"macvlan", "macvtap"} {
		t.Run(kind, func(t *testing.T) {
			l := labtest.Deploy(t, driverLab("t-rtt-"+kind[3:], ", driver: "+kind, ""))
			ns, err := netdev.OpenNS(l.P.Node("client").Netns)
			if err != nil {
				t.Fatal(err)
			}
			defer ns.Close()
			links, _ := ns.Links()
			var got string
			for _, li := range links {
				if li.Name == "eth0" {
					got = li.Kind
				}
			}
			if got != kind {
				t.Fatalf("client eth0 is a %q, want %s", got, kind)
			}
			env := l.ProbeEnv(t, "direct")
			dst := netip.AddrPortFrom(probe.DestinationAddr(env.Plan, env.Chain), 0)
			if err := rtt.Warm(context.Background(), l.Node(t, "client"), dst, rtt.Config{}); err != nil {
				t.Fatal(err)
			}
			r, err := echo.Measure(context.Background(), l.Node(t, "client"), dst, rtt.Config{Count: 200, Rate: 1000})
			if err != nil || r.Received != 200 {
				t.Fatalf("echoes over %s: %v, %d of 200 back", kind, err, r.Received)
			}
			t.Logf("%s: median rtt %s, path %s", kind, echo.Median(r.Durations(rtt.Packet.RTT, false)), echo.Median(r.Durations(rtt.Packet.Path, true)))
		})
	}
}

// inHost reports whether the host has device name, and its alias.
func inHost(t *testing.T, host *netdev.NS, name string) (bool, string) {
	t.Helper()
	d, err := host.Inspect(name)
	if err != nil {
		t.Fatal(err)
	}
	al, _ := host.Aliased("")
	for _, a := range al {
		if a.Name == name {
			return d.Exists, a.Alias
		}
	}
	return d.Exists, ""
}

const childEnv = "SFCLAB_ATTACH_TEST_CHILD"

// TestHostDeviceGivenBack: a host device moved into a node comes back to the host, under its
// name and without sfclab's alias, at destroy; and after the deploying process is killed
// with SIGKILL, at destroy --all (a fresh deployer on the same journal).
func TestHostDeviceGivenBack(t *testing.T) {
	if dir := os.Getenv(childEnv); dir != "" {
		// The child: deploy, then wait to be killed.
		p := labtest.Plan(t, driverLab("t-rtt-hd", "", ", driver: {type: host-device, device: rtthd0}"))
		d := &deploy.Deployer{Journal: journal.Journal{Root: dir}}
		if _, err := d.Deploy(context.Background(), p, "test"); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(dir+"/deployed", nil, 0o644)
		time.Sleep(time.Minute)
		return
	}
	host := hostDevice(t, "rtthd0", "")
	lab := driverLab("t-rtt-hd", "", ", driver: {type: host-device, device: rtthd0}")

	l := labtest.Deploy(t, lab)
	if ok, _ := inHost(t, host, "rtthd0"); ok {
		t.Fatal("rtthd0 is still in the host after deploy")
	}
	ns, err := netdev.OpenNS(l.P.Node("server").Netns)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ns.Inspect("eth0")
	ns.Close()
	if err != nil || !d.Exists || d.Kind != "veth" || !d.HasAddress {
		t.Fatalf("server eth0: %+v, %v; want the host's veth end, addressed", d, err)
	}
	if err := l.D.Destroy(context.Background(), l.P.Lab); err != nil {
		t.Fatal(err)
	}
	if ok, alias := inHost(t, host, "rtthd0"); !ok || alias != "" {
		t.Fatalf("after destroy: rtthd0 in host %v, alias %q", ok, alias)
	}

	// kill -9 of the deploying process, then destroy --all.
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run", "^TestHostDeviceGivenBack$", "-test.count=1")
	child.Env = append(os.Environ(), childEnv+"="+dir)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(dir + "/deployed"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			child.Process.Kill()
			child.Wait()
			t.Fatal("the child did not deploy within 20 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	child.Wait()
	if ok, _ := inHost(t, host, "rtthd0"); ok {
		t.Fatal("rtthd0 is in the host while the killed child's lab exists")
	}
	done, err := (&deploy.Deployer{Journal: journal.Journal{Root: dir}}).DestroyAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ok, alias := inHost(t, host, "rtthd0"); !ok || alias != "" {
		t.Fatalf("after kill -9 and destroy --all (%v): rtthd0 in host %v, alias %q", done, ok, alias)
	}
	if ns, _ := netdev.ListNetns(plan.NetnsName("t-rtt-hd", "")); len(ns) > 0 {
		t.Errorf("destroy --all left namespaces %v", ns)
	}
}
