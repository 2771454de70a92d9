package steer

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/cilium/ebpf"
	ebpflink "github.com/cilium/ebpf/link"
	"github.com/sfclab/sfclab/netdev"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// FilterName is the name of sfclab's tc filters where the kernel has no tcx and steering falls
// back to cls_bpf (tc filter show lists it).
const FilterName = "sfclab-steer"

// AttachPort attaches the host's port program at tc ingress of ifname, the host-side end of a
// port's veth, in the named network namespace ("" is sfclab's own).
// Equivalent to: ip netns exec NS bpftool net attach tcx_ingress pinned PROG dev IF
// (without tcx: ip netns exec NS tc qdisc add dev IF clsact &&
// ip netns exec NS tc filter replace dev IF ingress prio 1 handle 1 bpf da obj steer_bpfel.o sec tc)
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

// attach attaches prog at tc ingress of ifname: as a tcx program (BPF_PROG_ATTACH with
// BPF_TCX_INGRESS, Linux 6.6+) when the kernel has tcx, else as a cls_bpf filter under a clsact
// qdisc. tcx runs the program straight from the device's ingress hook; cls_bpf goes through
// the clsact qdisc's classifier walk first (tc_run, tcf_classify, cls_bpf_classify), which
// on a chain of forwarders was a third of what steering cost per hop once the flow cache had
// removed the map lookups. Either way the attachment lives until the interface goes (its
// host namespace is deleted) or Detach removes it.
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
	tcxErr := inNetns(nsName, func() error {
		return ebpflink.RawAttachProgram(ebpflink.RawAttachProgramOptions{Target: link.Attrs().Index,
			Program: prog, Attach: ebpf.AttachTCXIngress})
	})
	if tcxErr == nil {
		return nil
	}
	q := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index,
		Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}, QdiscType: "clsact"}
	if err := h.QdiscAdd(q); err != nil && !errors.Is(err, fs.ErrExist) && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("%s: add clsact (tcx: %v): %w", what, tcxErr, err)
	}
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: link.Attrs().Index, Parent: netlink.HANDLE_MIN_INGRESS,
			Handle: 1, Protocol: unix.ETH_P_ALL, Priority: 1},
		Fd: prog.FD(), Name: FilterName, DirectAction: true,
	}
	if err := h.FilterReplace(f); err != nil {
		return fmt.Errorf("%s: add bpf filter (tcx: %v): %w", what, tcxErr, err)
	}
	return nil
}

// inNetns runs fn on a thread in the named network namespace ("" is sfclab's own): tcx
// attachments name their interface by ifindex, which the kernel resolves in the caller's
// namespace.
func inNetns(nsName string, fn func() error) error {
	if nsName == "" {
		return fn()
	}
	ns, err := netdev.OpenNS(nsName)
	if err != nil {
		return err
	}
	defer ns.Close()
	return ns.Do(fn)
}

// tcxPrograms lists the programs attached by tcx at ingress of ifindex in the namespace.
func tcxPrograms(nsName string, ifindex int) ([]ebpf.ProgramID, error) {
	var ids []ebpf.ProgramID
	err := inNetns(nsName, func() error {
		res, err := ebpflink.QueryPrograms(ebpflink.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXIngress})
		if err != nil {
			return err
		}
		for _, p := range res.Programs {
			ids = append(ids, p.ID)
		}
		return nil
	})
	return ids, err
}

// isSteering reports whether program id is a steering program (steer_port or steer_tunnel).
func isSteering(id ebpf.ProgramID) bool {
	p, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return false
	}
	defer p.Close()
	info, err := p.Info()
	if err != nil {
		return false
	}
	return strings.HasPrefix(info.Name, "steer_")
}

// Detach removes the steering program from ifname: its tcx attachment, and the clsact qdisc
// (with the steering filter, where cls_bpf carried it). A missing
// interface or qdisc is not an error.
// Equivalent to: ip netns exec NS bpftool net detach tcx_ingress dev IF;
// ip netns exec NS tc qdisc del dev IF clsact
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
	ids, _ := tcxPrograms(nsName, link.Attrs().Index) // no tcx: nothing attached by it
	for _, id := range ids {
		if !isSteering(id) {
			continue
		}
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // gone meanwhile
		}
		err = inNetns(nsName, func() error {
			return ebpflink.RawDetachProgram(ebpflink.RawDetachProgramOptions{Target: link.Attrs().Index,
				Program: p, Attach: ebpf.AttachTCXIngress})
		})
		p.Close()
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%s: detach tcx program %d: %w", what, id, err)
		}
	}
	q := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index,
		Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}, QdiscType: "clsact"}
	if err := h.QdiscDel(q); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Attached reports whether ifname carries a steering program, by tcx or as sfclab's tc filter
// (for tests and destroy).
// Equivalent to: ip netns exec NS bpftool net show dev IF; ip netns exec NS tc filter show dev IF ingress | grep sfclab-steer
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
	if ids, err := tcxPrograms(nsName, link.Attrs().Index); err == nil {
		for _, id := range ids {
			if isSteering(id) {
				return true, nil
			}
		}
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
