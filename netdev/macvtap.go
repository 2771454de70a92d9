package netdev

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// AddMacvtap creates a macvtap device in bridge mode on parent (a device of this namespace,
// such as a segment's bridge) directly in target's namespace under name, left down. Its
// character device is the kernel's, numbered at creation in target's namespace: read it with
// MacvtapDevice there. The macvtap goes when target's namespace goes.
//
// Equivalent to: ip -n NS link add NAME link PARENT netns TARGET mtu MTU type macvtap mode bridge
func (n *NS) AddMacvtap(parent string, target *NS, name string, mtu int) error {
	return n.addOnParent("macvtap", parent, target, name, mtu, func(attrs netlink.LinkAttrs) netlink.Link {
		return &netlink.Macvtap{Macvlan: netlink.Macvlan{LinkAttrs: attrs, Mode: netlink.MACVLAN_MODE_BRIDGE}}
	})
}

// AddMacvtapPassthru creates a macvtap device in passthru mode on lower, a device of this
// namespace (a node's veth end), under name in the same namespace, with lower's MAC and the
// MTU mtu, left down. In passthru mode the macvtap takes every frame lower receives (its
// rx_handler), whatever the destination MAC, and what is written to its character device
// leaves by lower: a VM's port on a device of its own (the veth whose other end carries a
// transparent lab's steering program, or a container's Docker-made interface) without a tap
// and a tc splice. Read its character device with MacvtapDevice.
//
// Equivalent to: ip -n NS link add NAME link LOWER mtu MTU type macvtap mode passthru
func (n *NS) AddMacvtapPassthru(lower, name string, mtu int) error {
	return n.addOnParent("macvtap", lower, n, name, mtu, func(attrs netlink.LinkAttrs) netlink.Link {
		return &netlink.Macvtap{Macvlan: netlink.Macvlan{LinkAttrs: attrs, Mode: netlink.MACVLAN_MODE_PASSTHRU}}
	})
}

// CharDev is a character device's number.
type CharDev struct{ Major, Minor uint32 }

// String is MAJOR:MINOR, as sysfs writes it.
func (d CharDev) String() string { return fmt.Sprintf("%d:%d", d.Major, d.Minor) }

// MacvtapDevice reads the number of macvtap link's character device (the one udev would name
// /dev/tapIFINDEX) from sysfs as this namespace sees it: /sys/class/net/LINK/macvtap/tapN/dev.
// sysfs lists the network devices of the namespace it was mounted in, so a child process
// started in this namespace, in a mount namespace of its own (private: nothing it mounts
// reaches the host's), mounts a sysfs there and reads it. A child, not a thread of sfclab's:
// a Go thread whose mount namespace changed must never run other code, and Go keeps the main
// thread alive when a goroutine locked to it exits (its /proc/self/ns would then be wrong).
// The number is the kernel's (minors are allocated host-wide), so a device node made from it
// anywhere opens this macvtap, whatever the ifindex clashes between namespaces.
//
// Equivalent to: ip netns exec NS cat /sys/class/net/LINK/macvtap/tap*/dev
func (n *NS) MacvtapDevice(link string) (CharDev, error) {
	what := "read character device of macvtap " + n.where(link)
	if err := checkIfname(link); err != nil {
		return CharDev{}, fmt.Errorf("%s: %w", what, err)
	}
	var out, errOut bytes.Buffer
	err := n.Do(func() error {
		cmd := exec.Command("sh", "-c", macvtapDevScript, "sh", link)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		// Go makes the new mount namespace's mounts private before it execs sh.
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
		return cmd.Run()
	})
	if err != nil {
		msg := strings.TrimSpace(errOut.String())
		if strings.Contains(msg, "no macvtap") {
			return CharDev{}, fmt.Errorf("%s: %s: %w", what, msg, ErrNotFound)
		}
		return CharDev{}, fmt.Errorf("%s: %w: %s", what, err, msg)
	}
	dev, err := parseCharDev(strings.TrimSpace(out.String()))
	if err != nil {
		return CharDev{}, fmt.Errorf("%s: %w", what, err)
	}
	return dev, nil
}

// macvtapDevScript mounts the namespace's sysfs over /sys (in the child's own mount
// namespace) and prints the macvtap's device number, $1 the link.
const macvtapDevScript = `mount -t sysfs -o ro,nosuid,nodev,noexec sysfs /sys || exit 1
set -- /sys/class/net/"$1"/macvtap/tap*/dev
if [ ! -f "$1" ]; then echo "no macvtap device under /sys/class/net/<link>/macvtap (is it a macvtap?)" >&2; exit 2; fi
cat "$1"`

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
