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
