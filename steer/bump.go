package steer

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/cilium/ebpf"
	ebpflink "github.com/cilium/ebpf/link"
	"github.com/sfclab/sfclab/netdev"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// MaxBumpAddrs is how many own addresses a bump program knows (a function's port addresses).
const MaxBumpAddrs = 8

// Bump says how a transparent forwarder forwards one way through it.
type Bump struct {
	In, Out string // ifnames in the function's namespace
	// Own are the function's addresses: packets for them go up its stack.
	Own []netip.Addr
	// Next is the destination MAC a forwarded frame leaves with: the placeholder neighbour's
	// the kernel's forwarding sends to (hosts.PlaceholderMAC); its source MAC becomes Out's.
	Next net.HardwareAddr
	// Queue transmits on Out (the frame takes a backlog round and counts as Out's tx) instead
	// of handing it straight to the peer's ingress (bpf_redirect_peer).
	Queue bool
}

// AttachBump makes a transparent forwarder forward the way b.In -> b.Out with the bump
// program (bpf/bump.c) at tc ingress of b.In, instead of the kernel's L3 forwarding: one
// program run and a redirect per packet. The program lives as long as its attachment (until
// the interface goes with its namespace).
// Equivalent to: ip netns exec NS bpftool net attach tcx_ingress pinned BUMP dev IN (with
// out_ifindex, peer and own set in its .rodata)
func AttachBump(ns *netdev.NS, b Bump) error {
	return attachWay(ns, b, "bump", BumpFilterName, loadBumpProgram)
}

// attachWay loads a program for way b (load, given the egress port's ifindex and MAC) and
// attaches it at tc ingress of b.In in ns (filter: its name as a cls_bpf filter).
func attachWay(ns *netdev.NS, b Bump, what, filter string, load func(Bump, int, net.HardwareAddr) (*ebpf.Program, error)) error {
	what = fmt.Sprintf("attach %s %s -> %s in %s", what, b.In, b.Out, ns.Name())
	var in, out int
	var outMAC net.HardwareAddr
	err := ns.Do(func() error {
		for _, x := range []struct {
			name string
			idx  *int
		}{{b.In, &in}, {b.Out, &out}} {
			l, err := netlink.LinkByName(x.name)
			if err != nil {
				return err
			}
			*x.idx = l.Attrs().Index
			outMAC = l.Attrs().HardwareAddr // the last one: Out's
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	prog, err := load(b, out, outMAC)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer prog.Close() // the attachment keeps the program
	if err := ns.Do(func() error { return attachIndex(in, b.In, filter, prog) }); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// loadBumpProgram loads a bump program for way b whose egress port has ifindex out and MAC
// outMAC.
func loadBumpProgram(b Bump, out int, outMAC net.HardwareAddr) (*ebpf.Program, error) {
	spec, err := loadBump()
	if err != nil {
		return nil, fmt.Errorf("load spec: %w", err)
	}
	if err := setWire(spec, b, out, outMAC); err != nil {
		return nil, err
	}
	var objs bumpObjects
	if err := loadAndAssign(spec, &objs); err != nil {
		return nil, err
	}
	return objs.Bump, nil
}

// setWire sets the constants of bpf/wire.h in spec for way b whose egress port has ifindex
// out and MAC outMAC.
func setWire(spec *ebpf.CollectionSpec, b Bump, out int, outMAC net.HardwareAddr) error {
	if len(b.Own) > MaxBumpAddrs {
		return fmt.Errorf("%d own addresses, at most %d", len(b.Own), MaxBumpAddrs)
	}
	if len(outMAC) != 6 || len(b.Next) != 6 {
		return fmt.Errorf("MACs %q (egress port) and %q (next hop) must be Ethernet MACs", outMAC, b.Next)
	}
	var src, dst [6]byte
	copy(src[:], outMAC)
	copy(dst[:], b.Next)
	var own [MaxBumpAddrs]uint32
	for i, a := range b.Own {
		if !a.Is4() {
			continue
		}
		v := a.As4()
		own[i] = uint32(v[0]) | uint32(v[1])<<8 | uint32(v[2])<<16 | uint32(v[3])<<24 // network order in memory
	}
	peer := uint32(1)
	if b.Queue {
		peer = 0
	}
	for name, v := range map[string]any{"out_ifindex": uint32(out), "peer": peer, "own": own, "src_mac": src, "dst_mac": dst} {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
	}
	return nil
}

// loadAndAssign loads spec into objs, with the verifier's log in the error if it refuses.
func loadAndAssign(spec *ebpf.CollectionSpec, objs any) error {
	if err := spec.LoadAndAssign(objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return fmt.Errorf("%+v", ve)
		}
		return err
	}
	return nil
}

// attachIndex attaches prog at tc ingress of the interface ifindex in the calling thread's
// namespace: by tcx, or as a cls_bpf filter under clsact where the kernel has no tcx.
func attachIndex(ifindex int, ifname, filter string, prog *ebpf.Program) error {
	tcxErr := rawAttachTCX(ifindex, prog)
	if tcxErr == nil {
		return nil
	}
	h, err := netlink.NewHandle()
	if err != nil {
		return err
	}
	defer h.Close()
	q := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex,
		Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}, QdiscType: "clsact"}
	if err := h.QdiscAdd(q); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add clsact to %s (tcx: %v): %w", ifname, tcxErr, err)
	}
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: ifindex, Parent: netlink.HANDLE_MIN_INGRESS,
			Handle: 1, Protocol: unix.ETH_P_ALL, Priority: 1},
		Fd: prog.FD(), Name: filter, DirectAction: true,
	}
	if err := h.FilterReplace(f); err != nil {
		return fmt.Errorf("add bpf filter to %s (tcx: %v): %w", ifname, tcxErr, err)
	}
	return nil
}

// BumpFilterName names the bump's tc filter where the kernel has no tcx.
const BumpFilterName = "sfclab-bump"

// rawAttachTCX attaches prog by tcx at ingress of ifindex (Linux 6.6+).
func rawAttachTCX(ifindex int, prog *ebpf.Program) error {
	return ebpflink.RawAttachProgram(ebpflink.RawAttachProgramOptions{Target: ifindex,
		Program: prog, Attach: ebpf.AttachTCXIngress})
}

// BumpAttached reports whether ifname in ns carries a bump program (by tcx or as sfclab's
// bump filter), for tests and inspection.
// Equivalent to: ip netns exec NS bpftool net show dev IF | grep bump
func BumpAttached(ns *netdev.NS, ifname string) (bool, error) {
	ids, err := attachedIDs(ns, ifname, "bump", BumpFilterName)
	return len(ids) > 0, err
}

// attachedIDs lists the programs named name at tc ingress of ifname in ns, by tcx or as a
// cls_bpf filter named filter.
func attachedIDs(ns *netdev.NS, ifname, name, filter string) ([]ebpf.ProgramID, error) {
	var ids []ebpf.ProgramID
	err := ns.Do(func() error {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			return err
		}
		if res, err := ebpflink.QueryPrograms(ebpflink.QueryOptions{Target: l.Attrs().Index, Attach: ebpf.AttachTCXIngress}); err == nil {
			for _, p := range res.Programs {
				if progName(p.ID) == name {
					ids = append(ids, p.ID)
				}
			}
		}
		fs, err := netlink.FilterList(l, netlink.HANDLE_MIN_INGRESS)
		if err != nil {
			return err
		}
		for _, f := range fs {
			if b, ok := f.(*netlink.BpfFilter); ok && b.Name == filter {
				ids = append(ids, ebpf.ProgramID(b.Id))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list programs of %s in %s: %w", ifname, ns.Name(), err)
	}
	return ids, nil
}

// progName is the name of program id ("" if it is gone).
func progName(id ebpf.ProgramID) string {
	p, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return ""
	}
	defer p.Close()
	info, err := p.Info()
	if err != nil {
		return ""
	}
	return info.Name
}
