// Package vethpair makes two network namespaces joined by a veth pair for tests and
// benchmarks that send packets between two nodes without deploying a lab: namespaces
// "sfc-vp<pid>-<n>-a" and "-b", interfaces "va" and "vb", addresses 198.18.250.1/30 and .2,
// removed when the test ends (also when it fails).
package vethpair

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netns"
)

// Pair is two namespaces joined by a veth pair.
type Pair struct {
	A, B         string // namespace names
	IfA, IfB     string // interface names in each
	AddrA, AddrB netip.Addr
	MACA, MACB   net.HardwareAddr
	IndexA       int
	IndexB       int
}

var seq atomic.Int64

// New makes the pair; it is removed when tb ends.
func New(tb testing.TB) *Pair {
	tb.Helper()
	n := seq.Add(1)
	p := &Pair{A: fmt.Sprintf("sfc-vp%d-%d-a", os.Getpid(), n), B: fmt.Sprintf("sfc-vp%d-%d-b", os.Getpid(), n),
		IfA: "va", IfB: "vb", AddrA: netip.MustParseAddr("198.18.250.1"), AddrB: netip.MustParseAddr("198.18.250.2")}
	tb.Cleanup(func() {
		_ = exec.Command("ip", "netns", "del", p.A).Run()
		_ = exec.Command("ip", "netns", "del", p.B).Run()
	})
	tmp := fmt.Sprintf("sfcvp%d", n)
	for _, c := range [][]string{
		{"netns", "add", p.A}, {"netns", "add", p.B},
		{"link", "add", tmp + "a", "type", "veth", "peer", "name", tmp + "b"},
		{"link", "set", tmp + "a", "netns", p.A, "name", p.IfA},
		{"link", "set", tmp + "b", "netns", p.B, "name", p.IfB},
		{"-n", p.A, "addr", "add", "198.18.250.1/30", "dev", p.IfA},
		{"-n", p.B, "addr", "add", "198.18.250.2/30", "dev", p.IfB},
		{"-n", p.A, "link", "set", p.IfA, "up"}, {"-n", p.B, "link", "set", p.IfB, "up"},
		{"-n", p.A, "link", "set", "lo", "up"}, {"-n", p.B, "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			tb.Fatalf("ip %s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
	for _, side := range []struct {
		ns, dev string
		mac     *net.HardwareAddr
		idx     *int
	}{{p.A, p.IfA, &p.MACA, &p.IndexA}, {p.B, p.IfB, &p.MACB, &p.IndexB}} {
		if err := p.Do(side.ns, func() error {
			i, err := net.InterfaceByName(side.dev)
			if err != nil {
				return err
			}
			*side.mac, *side.idx = i.HardwareAddr, i.Index
			return nil
		}); err != nil {
			tb.Fatal(err)
		}
	}
	return p
}

// Do runs fn on a thread inside namespace ns.
func (p *Pair) Do(ns string, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return fmt.Errorf("enter %s: %w", ns, err)
	}
	defer orig.Close()
	h, err := netns.GetFromName(ns)
	if err != nil {
		return fmt.Errorf("enter %s: %w", ns, err)
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		return fmt.Errorf("enter %s: %w", ns, err)
	}
	defer netns.Set(orig) //nolint:errcheck // the thread stays locked if this fails
	return fn()
}

// Threaded moves the receive processing of interface dev in ns to a kernel thread (threaded
// NAPI) and pins it to cpu, so that a sender on another CPU does not also run the receiver's
// work. It returns an error saying why when the host cannot.
func (p *Pair) Threaded(ns, dev string, cpu int) error {
	return Threaded(func(argv ...string) ([]byte, error) {
		return exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...).CombinedOutput()
	}, dev, cpu)
}

// Threaded does what Pair.Threaded does through run, which runs a command in the node (whose
// /sys must show the node's interfaces, as `ip netns exec` mounts it).
func Threaded(run func(argv ...string) ([]byte, error), dev string, cpu int) error {
	if out, err := run("sh", "-c", "echo 1 > /sys/class/net/"+dev+"/threaded"); err != nil {
		return fmt.Errorf("thread napi of %s: %v: %s", dev, err, out)
	}
	out, err := run("sh", "-c", "for p in $(pgrep -x 'napi/"+dev+"-[0-9]*'); do taskset -pc "+fmt.Sprint(cpu)+" $p >/dev/null && chrt -f -p 50 $p && echo $p; done")
	if err != nil || len(strings.TrimSpace(string(out))) == 0 {
		return fmt.Errorf("pin napi thread of %s to cpu %d: %v: %s", dev, cpu, err, out)
	}
	return nil
}
