package vm_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/runtime/vm"
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
	pn := l.P.Node("fwd")
	hostSide, err := netdev.OpenNS(pn.Netns)
	if err != nil {
		t.Fatal(err)
	}
	defer hostSide.Close()
	links, err := hostSide.Links()
	if err != nil {
		t.Fatal(err)
	}
	kinds, macs := map[string]string{}, map[string]string{}
	for _, li := range links {
		kinds[li.Name], macs[li.Name] = li.Kind, li.MAC
	}
	fwd := l.Node(t, "fwd")
	probeDir := t.TempDir()
	var probes []string
	for _, i := range pn.Interfaces {
		if kinds[i.Name] != "macvtap" {
			t.Errorf("host side of fwd/%s is a %q, want a macvtap (links: %v)", i.Name, kinds[i.Name], kinds)
			continue
		}
		if kinds["vt0"] != "" {
			t.Errorf("the macvtap node has a tap too: %v", kinds)
		}
		dev, err := hostSide.MacvtapDevice(i.Name)
		if err != nil {
			t.Fatal(err)
		}
		node := filepath.Join(vm.DevRoot, l.P.Lab, "fwd."+i.Name)
		var st unix.Stat_t
		if err := unix.Stat(node, &st); err != nil {
			t.Fatalf("device node of fwd/%s: %v", i.Name, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(st.Rdev) != dev.Major || unix.Minor(st.Rdev) != dev.Minor {
			t.Errorf("%s: mode %o device %d:%d, want a character device %s", node, st.Mode, unix.Major(st.Rdev), unix.Minor(st.Rdev), dev)
		}
		// A probe of the same number outside the lab, to see the macvtap gone after destroy.
		probe := filepath.Join(probeDir, i.Name)
		if err := netdev.MakeCharDev(probe, dev); err != nil {
			t.Fatal(err)
		}
		probes = append(probes, probe)
		out, err := fwd.Output(ctx, nil, "cat", "/sys/class/net/"+i.Name+"/address")
		if err != nil || strings.TrimSpace(string(out)) != macs[i.Name] {
			t.Errorf("guest's %s has MAC %q (%v), its macvtap %s", i.Name, out, err, macs[i.Name])
		}
	}
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
	if _, err := os.Stat(filepath.Join(vm.DevRoot, l.P.Lab)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("device directory %s left (%v)", filepath.Join(vm.DevRoot, l.P.Lab), err)
	}
	// The macvtaps went with the node's namespace; the kernel deletes them while it cleans
	// the namespace up, shortly after.
	deadline := time.Now().Add(10 * time.Second)
	for _, probe := range probes {
		for {
			f, err := os.OpenFile(probe, os.O_RDWR, 0)
			if err != nil {
				if !errors.Is(err, syscall.ENXIO) && !errors.Is(err, syscall.ENODEV) {
					t.Errorf("open %s after destroy: %v, want ENXIO (no such macvtap)", probe, err)
				}
				break
			}
			f.Close()
			if time.Now().After(deadline) {
				t.Fatalf("macvtap %s still exists 10 s after destroy", filepath.Base(probe))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
