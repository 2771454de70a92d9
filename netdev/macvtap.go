package netdev

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// AddMacvtap creates a macvtap device in bridge mode on parent (a device of this namespace,
// such as a segment's bridge) directly in target's namespace under name, left down. Its
// character device is the kernel's, numbered at creation in target's namespace: read it with
// MacvtapDevice there. The macvtap goes when target's namespace goes.
//
// Equivalent to: ip -n NS link add NAME link PARENT netns TARGET mtu MTU type macvtap mode bridge
func (n *NS) AddMacvtap(parent string, target *NS, name string, mtu int) error {
	if target == nil {
		target = n
	}
	what := fmt.Sprintf("add macvtap %s on %s", target.where(name), n.where(parent))
	if err := checkIfname(name); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	h, p, err := n.link(parent)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	attrs.MTU = mtu
	attrs.ParentIndex = p.Attrs().Index
	attrs.Namespace = netlink.NsFd(target.fd)
	if err := h.LinkAdd(&netlink.Macvtap{Macvlan: netlink.Macvlan{LinkAttrs: attrs, Mode: netlink.MACVLAN_MODE_BRIDGE}}); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// CharDev is a character device's number.
type CharDev struct{ Major, Minor uint32 }

// String is MAJOR:MINOR, as sysfs writes it.
func (d CharDev) String() string { return fmt.Sprintf("%d:%d", d.Major, d.Minor) }

// MacvtapDevice reads the number of macvtap link's character device (the one udev would name
// /dev/tapIFINDEX) from sysfs as this namespace sees it: /sys/class/net/LINK/macvtap/tapN/dev.
// sysfs shows the network devices of the namespace it was mounted in, so the read runs on a
// thread of its own with a private mount namespace, switched into this network namespace,
// with a sysfs mounted there; the thread is then discarded (never returned to Go's pool).
// The number is the kernel's (minors are allocated host-wide), so a device node made from it
// anywhere opens this macvtap, whatever the ifindex clashes between namespaces.
//
// Equivalent to: ip netns exec NS cat /sys/class/net/LINK/macvtap/tap*/dev
func (n *NS) MacvtapDevice(link string) (CharDev, error) {
	what := "read character device of macvtap " + n.where(link)
	type result struct {
		dev CharDev
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Locked and never unlocked: the goroutine's exit ends the thread, whose mount and
		// network namespaces are no longer the process's.
		runtime.LockOSThread()
		dev, err := n.readMacvtapDev(link)
		done <- result{dev, err}
	}()
	r := <-done
	if r.err != nil {
		return CharDev{}, fmt.Errorf("%s: %w", what, r.err)
	}
	return r.dev, nil
}

// readMacvtapDev runs on a locked thread that is thrown away afterwards.
func (n *NS) readMacvtapDev(link string) (CharDev, error) {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return CharDev{}, fmt.Errorf("unshare mount namespace: %w", err)
	}
	// No mount made here may reach the host's mount namespace.
	if err := unix.Mount("", "/", "", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
		return CharDev{}, fmt.Errorf("make mounts private: %w", err)
	}
	if n.fd.IsOpen() {
		if err := netns.Set(n.fd); err != nil {
			return CharDev{}, fmt.Errorf("enter netns: %w", err)
		}
	}
	dir, err := os.MkdirTemp("", "sfclab-sysfs-")
	if err != nil {
		return CharDev{}, err
	}
	defer os.Remove(dir)
	if err := unix.Mount("sysfs", dir, "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return CharDev{}, fmt.Errorf("mount sysfs: %w", err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	taps, err := filepath.Glob(filepath.Join(dir, "class/net", link, "macvtap", "tap*", "dev"))
	if err != nil {
		return CharDev{}, err
	}
	if len(taps) != 1 {
		return CharDev{}, fmt.Errorf("%d entries under /sys/class/net/%s/macvtap (is it a macvtap?): %w", len(taps), link, ErrNotFound)
	}
	b, err := os.ReadFile(taps[0])
	if err != nil {
		return CharDev{}, err
	}
	return parseCharDev(strings.TrimSpace(string(b)))
}

// parseCharDev reads "MAJOR:MINOR".
func parseCharDev(s string) (CharDev, error) {
	maj, min, ok := strings.Cut(s, ":")
	a, err1 := strconv.ParseUint(maj, 10, 32)
	b, err2 := strconv.ParseUint(min, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return CharDev{}, fmt.Errorf("device number %q is not MAJOR:MINOR", s)
	}
	return CharDev{Major: uint32(a), Minor: uint32(b)}, nil
}

// MakeCharDev creates the character device node path (mode 0600) for dev; an existing file
// there is replaced.
//
// Equivalent to: mknod -m 600 PATH c MAJOR MINOR
func MakeCharDev(path string, dev CharDev) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("make device node %s: %w", path, err)
	}
	if err := unix.Mknod(path, unix.S_IFCHR|0o600, int(unix.Mkdev(dev.Major, dev.Minor))); err != nil {
		return fmt.Errorf("make device node %s (%s): %w", path, dev, err)
	}
	return nil
}
