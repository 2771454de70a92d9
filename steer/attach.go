package steer

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// FilterName is the name of sfclab's tc filters (tc filter show lists it).
const FilterName = "sfclab-steer"

// AttachPort attaches the host's port program at tc ingress of ifname, the host-side end of a
// port's veth, in the named network namespace ("" is sfclab's own).
// Equivalent to: ip netns exec NS tc qdisc add dev IF clsact &&
// ip netns exec NS tc filter replace dev IF ingress prio 1 handle 1 bpf da obj steer_bpfel.o sec tc
func (d *Dataplane) AttachPort(nsName string, host uint32, ifname string) error {
	p, ok := d.ports[host]
	if !ok {
		return fmt.Errorf("attach steering to %s: no program loaded for host %d", ifname, host)
	}
	return attach(nsName, ifname, p)
}

// AttachTunnel attaches the host's tunnel program at tc ingress of its steering VXLAN device.
func (d *Dataplane) AttachTunnel(nsName string, host uint32, ifname string) error {
	p, ok := d.tunl[host]
	if !ok {
		return fmt.Errorf("attach steering to %s: no program loaded for host %d", ifname, host)
	}
	return attach(nsName, ifname, p)
}

func handleIn(nsName string) (*netlink.Handle, error) {
	if nsName == "" {
		return netlink.NewHandle()
	}
	fd, err := netns.GetFromName(nsName)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	return netlink.NewHandleAt(fd)
}

func attach(nsName, ifname string, prog *ebpf.Program) error {
	what := fmt.Sprintf("attach steering to %s/%s", nsName, ifname)
	h, err := handleIn(nsName)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer h.Close()
	link, err := h.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	q := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index,
		Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}, QdiscType: "clsact"}
	if err := h.QdiscAdd(q); err != nil && !errors.Is(err, fs.ErrExist) && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("%s: add clsact: %w", what, err)
	}
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: link.Attrs().Index, Parent: netlink.HANDLE_MIN_INGRESS,
			Handle: 1, Protocol: unix.ETH_P_ALL, Priority: 1},
		Fd: prog.FD(), Name: FilterName, DirectAction: true,
	}
	if err := h.FilterReplace(f); err != nil {
		return fmt.Errorf("%s: add bpf filter: %w", what, err)
	}
	return nil
}

// Detach removes the clsact qdisc (and with it the steering filter) from ifname. A missing
// interface or qdisc is not an error.
// Equivalent to: ip netns exec NS tc qdisc del dev IF clsact
func Detach(nsName, ifname string) error {
	what := fmt.Sprintf("detach steering from %s/%s", nsName, ifname)
	h, err := handleIn(nsName)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	defer h.Close()
	link, err := h.LinkByName(ifname)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	q := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index,
		Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}, QdiscType: "clsact"}
	if err := h.QdiscDel(q); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Attached reports whether ifname carries sfclab's steering filter (for tests and destroy).
// Equivalent to: ip netns exec NS tc filter show dev IF ingress | grep sfclab-steer
func Attached(nsName, ifname string) (bool, error) {
	h, err := handleIn(nsName)
	if err != nil {
		return false, fmt.Errorf("list filters of %s/%s: %w", nsName, ifname, err)
	}
	defer h.Close()
	link, err := h.LinkByName(ifname)
	if err != nil {
		return false, fmt.Errorf("list filters of %s/%s: %w", nsName, ifname, err)
	}
	fs, err := h.FilterList(link, netlink.HANDLE_MIN_INGRESS)
	if err != nil {
		return false, fmt.Errorf("list filters of %s/%s: %w", nsName, ifname, err)
	}
	for _, f := range fs {
		if b, ok := f.(*netlink.BpfFilter); ok && b.Name == FilterName {
			return true, nil
		}
	}
	return false, nil
}
