package netdev

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Two macvtaps of one name on one bridge, each in a namespace of its own: each one's number
// is read in its namespace (the same as `ip netns exec NS cat .../dev` gives), the two differ
// although /dev/tapIFINDEX would name both alike, a node made from the number opens its
// macvtap, and it no longer opens once the macvtap's namespace is gone.
func TestMacvtapDevice(t *testing.T) {
	requireRoot(t)
	before := threadNamespaces(t)
	fabric := newTestNS(t, "mvf")
	if err := fabric.AddBridge("br0"); err != nil {
		t.Fatal(err)
	}
	if err := fabric.SetUp("br0"); err != nil {
		t.Fatal(err)
	}
	a := newTestNS(t, "mva")
	bName := testPrefix + "mvb"
	if err := CreateNetns(bName); err != nil {
		t.Fatal(err)
	}
	bGone := false
	t.Cleanup(func() {
		if !bGone {
			_ = DeleteNetns(bName)
		}
	})
	b, err := OpenNS(bName)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	devs := map[string]CharDev{}
	var idx []int
	for name, ns := range map[string]*NS{"a": a, "b": b} {
		if err := fabric.AddMacvtap("br0", ns, "m0", 1500); err != nil {
			t.Fatal(err)
		}
		dev, err := ns.MacvtapDevice("m0")
		if err != nil {
			t.Fatal(err)
		}
		links, err := ns.Links()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			if l.Name == "m0" {
				if l.Kind != "macvtap" {
					t.Errorf("m0 in %s is a %s", name, l.Kind)
				}
				idx = append(idx, l.Index)
				out, err := nsExec(t, ns, "cat", filepath.Join("/sys/class/net/m0/macvtap", "tap"+strconv.Itoa(l.Index), "dev"))
				if err != nil || strings.TrimSpace(out) != dev.String() {
					t.Errorf("macvtap in %s: read %s; ip netns exec says %q (%v)", name, dev, out, err)
				}
			}
		}
		devs[name] = dev
		path := filepath.Join(dir, name)
		if err := MakeCharDev(path, dev); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatalf("open the node of macvtap %s: %v", name, err)
		}
		f.Close()
	}
	t.Logf("macvtaps: ifindexes %v (udev's names /dev/tap%d, /dev/tap%d), devices %s and %s", idx, idx[0], idx[1], devs["a"], devs["b"])
	if devs["a"] == devs["b"] {
		t.Errorf("two macvtaps share device %s", devs["a"])
	}
	if _, err := a.MacvtapDevice("lo"); !errors.Is(err, ErrNotFound) {
		t.Errorf("device of lo: %v, want ErrNotFound", err)
	}
	// No thread of this process was left in another mount or network namespace (the reads
	// happen in a child).
	for ns := range threadNamespaces(t) {
		if !before[ns] {
			t.Errorf("a thread of the test is in %s after the reads; before, all were in %v", ns, before)
		}
	}
	// The macvtap goes with its namespace (the kernel deletes it while cleaning the
	// namespace up, shortly after the last reference goes).
	b.Close()
	if err := DeleteNetns(bName); err != nil {
		t.Fatal(err)
	}
	bGone = true
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, err := os.OpenFile(filepath.Join(dir, "b"), os.O_RDWR, 0)
		if err != nil {
			if !errors.Is(err, unix.ENXIO) && !errors.Is(err, unix.ENODEV) {
				t.Errorf("open a deleted macvtap's node: %v, want ENXIO", err)
			}
			break
		}
		f.Close()
		if time.Now().After(deadline) {
			t.Fatal("the macvtap still opens 10 s after its namespace was deleted")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// threadNamespaces is the set of network and mount namespaces the process's threads are in.
func threadNamespaces(t *testing.T) map[string]bool {
	t.Helper()
	tasks, err := filepath.Glob("/proc/self/task/*")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, task := range tasks {
		for _, kind := range []string{"net", "mnt"} {
			if l, err := os.Readlink(filepath.Join(task, "ns", kind)); err == nil {
				out[l] = true
			}
		}
	}
	return out
}

// A macvtap in passthru mode on a veth end (a VM's port on a device of its own): it takes the
// veth's MAC and the given MTU, a frame written to its character device leaves by the veth
// (the other end receives it), and a frame sent to the veth from the other end is read from
// the character device, whatever its destination MAC.
func TestMacvtapPassthru(t *testing.T) {
	requireRoot(t)
	a, b := newTestNS(t, "mpa"), newTestNS(t, "mpb")
	if err := a.AddVeth("e0", b, "e1", 1400); err != nil {
		t.Fatal(err)
	}
	if err := a.AddMacvtapPassthru("e0", "mt0", 1400); err != nil {
		t.Fatal(err)
	}
	for _, s := range []func() error{
		func() error { return a.SetUp("e0") }, func() error { return a.SetUp("mt0") }, func() error { return b.SetUp("e1") },
	} {
		if err := s(); err != nil {
			t.Fatal(err)
		}
	}
	link := func(ns *NS, name string) LinkInfo {
		t.Helper()
		links, err := ns.Links()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			if l.Name == name {
				return l
			}
		}
		t.Fatalf("no link %s in %s", name, ns.Name())
		return LinkInfo{}
	}
	e0, mt := link(a, "e0"), link(a, "mt0")
	if mt.Kind != "macvtap" || mt.MAC != e0.MAC || mt.MTU != 1400 {
		t.Errorf("mt0: kind %s MAC %s MTU %d; want a macvtap with e0's MAC %s and MTU 1400", mt.Kind, mt.MAC, mt.MTU, e0.MAC)
	}
	dev, err := a.MacvtapDevice("mt0")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mt0")
	if err := MakeCharDev(path, dev); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Out: a broadcast frame of an unused EtherType behind the 10-byte virtio-net header.
	frame := append(make([]byte, 10), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}...)
	frame = append(frame, mustMAC(t, mt.MAC)...)
	frame = append(frame, 0x88, 0xb5) // local experimental EtherType
	frame = append(frame, make([]byte, 46)...)
	before := link(b, "e1").Stats.RxPackets
	if _, err := f.Write(frame); err != nil {
		t.Fatalf("write a frame to the macvtap: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for link(b, "e1").Stats.RxPackets == before {
		if time.Now().After(deadline) {
			t.Fatal("the frame written to the macvtap did not reach the veth's other end")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// In: ping from b to an address whose neighbour is a MAC that is not the veth's: passthru
	// hands the frame to the macvtap all the same.
	if out, err := nsExec(t, b, "ip", "neigh", "add", "198.18.250.2", "lladdr", "02:00:00:00:00:99", "dev", "e1"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := nsExec(t, b, "ip", "addr", "add", "198.18.250.1/24", "dev", "e1"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	_, _ = nsExec(t, b, "ping", "-c", "1", "-W", "1", "198.18.250.2")
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, err := f.Read(buf)
			if err != nil {
				close(got)
				return
			}
			if n > 10+34 && buf[10+12] == 0x08 && buf[10+13] == 0x00 && buf[10+23] == 1 { // IPv4, ICMP
				got <- append([]byte(nil), buf[:n]...)
				return
			}
		}
	}()
	select {
	case fr, ok := <-got:
		if !ok {
			t.Fatal("read from the macvtap failed")
		}
		if d := fr[10:16]; d[0] != 0x02 || d[5] != 0x99 {
			t.Errorf("frame read has destination %x, want 02:00:00:00:00:99", d)
		}
	case <-time.After(5 * time.Second):
		f.Close() // ends the reader
		t.Fatal("the ping sent to the veth was not read from the macvtap's character device")
	}
}

func mustMAC(t *testing.T, s string) []byte {
	t.Helper()
	var b []byte
	for _, x := range strings.Split(s, ":") {
		v, err := strconv.ParseUint(x, 16, 8)
		if err != nil {
			t.Fatalf("MAC %q: %v", s, err)
		}
		b = append(b, byte(v))
	}
	return b
}
