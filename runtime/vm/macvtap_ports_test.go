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
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/vm"
)

// checkMacvtapPorts checks that VM node node's ports (ifnames, in its host-side namespace
// nsName) are macvtaps: the interfaces themselves in bridge mode (passthru false), or a
// macvtap with each interface's MAC on it when the interface is a device of the port's own
// (passthru true: a veth, or a container's Docker-made interface). No tap is left beside
// them, the device node under vm.DevRoot carries the macvtap's number, and the guest's NIC of
// each interface has its MAC. It returns a device node of each macvtap's number made outside
// the lab, for assertMacvtapsGone after destroy.
func checkMacvtapPorts(t *testing.T, ctx context.Context, l *labtest.Lab, node, nsName string, ifnames []string, passthru bool, guest runtime.Node) []string {
	t.Helper()
	ns, err := netdev.OpenNS(nsName)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	links, err := ns.Links()
	if err != nil {
		t.Fatal(err)
	}
	kinds, macs := map[string]string{}, map[string]string{}
	for _, li := range links {
		kinds[li.Name], macs[li.Name] = li.Kind, li.MAC
		if strings.HasPrefix(li.Name, "vt") {
			t.Errorf("%s: a tap %s beside the macvtaps (links %v)", node, li.Name, kinds)
		}
	}
	var probes []string
	for _, ifname := range ifnames {
		mt := ""
		switch {
		case !passthru && kinds[ifname] == "macvtap":
			mt = ifname
		case passthru && kinds[ifname] != "macvtap" && kinds[ifname] != "":
			for _, li := range links {
				if li.Kind == "macvtap" && li.MAC == macs[ifname] {
					mt = li.Name
				}
			}
		}
		if mt == "" {
			t.Errorf("%s/%s: no macvtap (passthru %v) for it; links %v", node, ifname, passthru, kinds)
			continue
		}
		dev, err := ns.MacvtapDevice(mt)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(vm.DevRoot, l.P.Lab, node+"."+ifname)
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			t.Errorf("device node of %s/%s: %v", node, ifname, err)
		} else if st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(st.Rdev) != dev.Major || unix.Minor(st.Rdev) != dev.Minor {
			t.Errorf("%s: device %d:%d, want the character device %s of macvtap %s", path, unix.Major(st.Rdev), unix.Minor(st.Rdev), dev, mt)
		}
		probe := filepath.Join(t.TempDir(), node+"."+ifname)
		if err := netdev.MakeCharDev(probe, dev); err != nil {
			t.Fatal(err)
		}
		probes = append(probes, probe)
		out, err := guest.Output(ctx, nil, "cat", "/sys/class/net/"+ifname+"/address")
		if err != nil || strings.TrimSpace(string(out)) != macs[mt] {
			t.Errorf("guest's %s of %s has MAC %q (%v), its macvtap %s %s", ifname, node, out, err, mt, macs[mt])
		}
	}
	return probes
}

// checkNodeMacvtaps is checkMacvtapPorts over every interface of VM node node of a lab (not
// a transparent one's), seen from the node's guest.
func checkNodeMacvtaps(t *testing.T, ctx context.Context, l *labtest.Lab, node string, passthru bool) []string {
	t.Helper()
	pn := l.P.Node(node)
	var ifnames []string
	for _, i := range pn.Interfaces {
		ifnames = append(ifnames, i.Name)
	}
	return checkMacvtapPorts(t, ctx, l, node, pn.Netns, ifnames, passthru, l.Node(t, node))
}

// assertMacvtapsGone waits until no probe (a device node of a lab's macvtap's number) opens:
// the macvtaps went with their namespaces, which the kernel cleans up shortly after destroy.
func assertMacvtapsGone(t *testing.T, lab string, probes []string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(vm.DevRoot, lab)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("device directory %s left (%v)", filepath.Join(vm.DevRoot, lab), err)
	}
	deadline := time.Now().Add(15 * time.Second)
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
				t.Errorf("macvtap %s still exists 15 s after destroy", filepath.Base(probe))
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
