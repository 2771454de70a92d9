package pktgen

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// FlowFrom reads the sending socket's addresses and the next hop's MAC (resolved by the warm-up)
// in the calling thread's namespace (the source node), and the index of the interface the
// frames leave by.
func FlowFrom(sfd int, target netip.AddrPort) (Flow, int, error) {
	var f Flow
	sa, err := unix.Getsockname(sfd)
	if err != nil {
		return f, 0, fmt.Errorf("read sender address: %w", err)
	}
	in4, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		return f, 0, errors.New("read sender address: not IPv4")
	}
	f.Src, f.SrcPort = netip.AddrFrom4(in4.Addr), uint16(in4.Port)
	f.Dst, f.DstPort = target.Addr(), target.Port()
	routes, err := netlink.RouteGet(net.IP(f.Dst.AsSlice()))
	if err != nil || len(routes) == 0 {
		return f, 0, fmt.Errorf("route to %s: %v", f.Dst, err)
	}
	r := routes[0]
	l, err := netlink.LinkByIndex(r.LinkIndex)
	if err != nil {
		return f, 0, fmt.Errorf("route to %s: interface %d: %w", f.Dst, r.LinkIndex, err)
	}
	if l.Type() != "veth" {
		return f, 0, fmt.Errorf("the source's interface %s is a %s, not a veth: live-frame transmission needs the driver's XDP transmit", l.Attrs().Name, l.Type())
	}
	f.SrcMAC = l.Attrs().HardwareAddr
	hop := f.Dst
	if r.Gw != nil {
		hop, _ = netip.AddrFromSlice(r.Gw.To4())
	}
	neigh, err := netlink.NeighList(r.LinkIndex, netlink.FAMILY_V4)
	if err != nil {
		return f, 0, fmt.Errorf("read neighbours: %w", err)
	}
	for _, n := range neigh {
		if a, ok := netip.AddrFromSlice(n.IP.To4()); ok && a == hop && len(n.HardwareAddr) == 6 {
			f.DstMAC = n.HardwareAddr
		}
	}
	if f.DstMAC == nil {
		return f, 0, fmt.Errorf("%w %s on %s", ErrNoNeighbour, hop, l.Attrs().Name)
	}
	return f, r.LinkIndex, nil
}

// Interfaces lists the non-loopback interfaces of the calling thread's namespace.
func Interfaces() ([]netlink.Link, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	var out []netlink.Link
	for _, l := range links {
		if l.Attrs().Flags&net.FlagLoopback == 0 {
			out = append(out, l)
		}
	}
	return out, nil
}

// InterfaceIndexes lists the indexes of the non-loopback interfaces of the calling thread's
// namespace, only its veths when vethOnly.
func InterfaceIndexes(vethOnly bool) ([]int, error) {
	links, err := Interfaces()
	if err != nil {
		return nil, err
	}
	var idx []int
	for _, l := range links {
		if !vethOnly || l.Type() == "veth" {
			idx = append(idx, l.Attrs().Index)
		}
	}
	return idx, nil
}
