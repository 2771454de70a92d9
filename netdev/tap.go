package netdev

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// AddTap creates a persistent tap device (no packet information header, virtio-net header
// on) for a hypervisor to open by name later; it is left down. It goes when the namespace
// goes.
//
// Equivalent to: ip -n NS tuntap add dev NAME mode tap vnet_hdr
func (n *NS) AddTap(name string, mtu int) error {
	what := "add tap " + n.where(name)
	if err := checkIfname(name); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	err := n.Do(func() error {
		f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		var req struct {
			name  [unix.IFNAMSIZ]byte
			flags uint16
			_     [22]byte
		}
		copy(req.name[:], name)
		req.flags = unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.TUNSETIFF, uintptr(unsafe.Pointer(&req))); e != 0 {
			return fmt.Errorf("TUNSETIFF: %w", e)
		}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.TUNSETPERSIST, 1); e != 0 {
			return fmt.Errorf("TUNSETPERSIST: %w", e)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if mtu > 0 {
		h, l, err := n.link(name)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := h.LinkSetMTU(l, mtu); err != nil {
			return fmt.Errorf("%s: set mtu: %w", what, err)
		}
	}
	return nil
}

// Splice joins two devices of the namespace into one wire: every frame that arrives on one
// leaves by the other, before the namespace's own stack sees it (a tc ingress filter that
// matches everything, with a mirred redirect, on each side). A VM's tap and the node's veth
// end are spliced so the guest's NIC is where the veth was.
//
// Equivalent to: tc qdisc add dev A clsact; tc filter add dev A ingress protocol all u32 match u32 0 0 action mirred egress redirect dev B (and B to A)
func (n *NS) Splice(a, b string) error {
	what := fmt.Sprintf("splice %s and %s", n.where(a), n.where(b))
	h, la, err := n.link(a)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	_, lb, err := n.link(b)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, pair := range [][2]netlink.Link{{la, lb}, {lb, la}} {
		from, to := pair[0].Attrs(), pair[1].Attrs()
		q := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: from.Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}, QdiscType: "clsact"}
		if err := h.QdiscAdd(q); err != nil && !os.IsExist(err) {
			return fmt.Errorf("%s: add clsact to %s: %w", what, from.Name, err)
		}
		mirred := netlink.NewMirredAction(to.Index)
		mirred.MirredAction = netlink.TCA_EGRESS_REDIR
		f := &netlink.U32{
			FilterAttrs: netlink.FilterAttrs{LinkIndex: from.Index, Parent: netlink.HANDLE_MIN_INGRESS, Priority: 1, Protocol: unix.ETH_P_ALL},
			Sel:         &netlink.TcU32Sel{Flags: netlink.TC_U32_TERMINAL, Nkeys: 1, Keys: []netlink.TcU32Key{{Mask: 0, Val: 0, Off: 0}}},
			Actions:     []netlink.Action{mirred},
		}
		if err := h.FilterAdd(f); err != nil {
			return fmt.Errorf("%s: add redirect from %s: %w", what, from.Name, err)
		}
	}
	return nil
}

// SetMTU sets a link's MTU.
//
// Equivalent to: ip -n NS link set LINK mtu MTU
func (n *NS) SetMTU(link string, mtu int) error {
	what := fmt.Sprintf("set mtu of %s to %d", n.where(link), mtu)
	h, l, err := n.link(link)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := h.LinkSetMTU(l, mtu); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
