package netdev

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"slices"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// maxIfname is IFNAMSIZ-1.
const maxIfname = 15

// NS is an open network namespace. Its netlink socket is opened on first
// use and reused by every later call, so a sequence of calls on one NS costs
// no thread switching and no process spawning. The methods may be called
// from several goroutines at once; Close must be the last call.
type NS struct {
	name string
	fd   netns.NsHandle

	mu     sync.Mutex
	closed bool
	h      *netlink.Handle  // NETLINK_ROUTE socket inside the namespace
	raw    *nl.SocketHandle // same, for requests the netlink package lacks
}

// OpenNS opens the named network namespace; "" means the namespace sfclab
// itself runs in (the host). A missing namespace gives an error wrapping
// [ErrNotFound].
func OpenNS(name string) (*NS, error) {
	var fd netns.NsHandle
	var err error
	if err := CheckGuard(name); name != "" && err != nil {
		return nil, err
	}
	if name == "" {
		fd, err = currentNetns()
	} else {
		if err = checkNetnsName(name); err != nil {
			return nil, fmt.Errorf("open netns %q: %w", name, err)
		}
		fd, err = netns.GetFromName(name)
		if errors.Is(err, fs.ErrNotExist) {
			err = ErrNotFound
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", displayName(name), err)
	}
	return &NS{name: name, fd: fd}, nil
}

// OpenNSPath opens the network namespace at a path, e.g. /proc/PID/ns/net of a container's
// process; the name is used in messages. A missing path gives an error wrapping [ErrNotFound].
// Equivalent to: nsenter --net=PATH
func OpenNSPath(path, name string) (*NS, error) {
	if err := CheckGuard(path); err != nil {
		return nil, err
	}
	fd, err := netns.GetFromPath(path)
	if errors.Is(err, fs.ErrNotExist) {
		err = ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("open netns %s (%s): %w", name, path, err)
	}
	return &NS{name: name, fd: fd}, nil
}

// currentNetns returns the namespace of a thread no one has switched:
// threads are only handed back to the Go scheduler in their original
// namespace (see onLockedThread), so any unlocked thread will do.
func currentNetns() (netns.NsHandle, error) {
	var fd netns.NsHandle
	err := onLockedThread(netns.None(), func() error {
		var err error
		fd, err = netns.Get()
		return err
	})
	return fd, err
}

func displayName(name string) string {
	if name == "" {
		return "(host)"
	}
	return name
}

// Name returns the namespace name given to OpenNS ("" for the host).
func (n *NS) Name() string { return n.name }

// Close releases the namespace handle and its netlink sockets. It does not
// delete the namespace.
func (n *NS) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	if n.h != nil {
		n.h.Close()
		n.h = nil
	}
	if n.raw != nil {
		n.raw.Close()
		n.raw = nil
	}
	return n.fd.Close()
}

var errClosed = errors.New("namespace handle closed")

func (n *NS) handle() (*netlink.Handle, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errClosed
	}
	if n.h == nil {
		h, err := netlink.NewHandleAt(n.fd, unix.NETLINK_ROUTE)
		if err != nil {
			return nil, fmt.Errorf("open netlink in netns %s: %w", displayName(n.name), err)
		}
		n.h = h
	}
	return n.h, nil
}

func (n *NS) rawSocket() (*nl.SocketHandle, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errClosed
	}
	if n.raw == nil {
		s, err := nl.GetNetlinkSocketAt(n.fd, netns.None(), unix.NETLINK_ROUTE)
		if err != nil {
			return nil, fmt.Errorf("open netlink in netns %s: %w", displayName(n.name), err)
		}
		n.raw = &nl.SocketHandle{Socket: s}
	}
	return n.raw, nil
}

// Do runs fn on an OS thread locked and switched into the namespace, then
// switches the thread back. Goroutines started by fn do not run in the
// namespace. A process forked by fn (exec.Cmd.Start) starts in it.
//
// Equivalent to: nsenter --net=/run/netns/NAME (for the duration of fn)
func (n *NS) Do(fn func() error) error {
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return fmt.Errorf("enter netns %s: %w", displayName(n.name), errClosed)
	}
	return onLockedThread(n.fd, fn)
}

func (n *NS) where(link string) string {
	if n.name == "" {
		return link
	}
	return n.name + "/" + link
}

func checkIfname(name string) error {
	if name == "" || len(name) > maxIfname || name == "." || name == ".." {
		return fmt.Errorf("invalid interface name %q (1-%d bytes)", name, maxIfname)
	}
	for _, c := range []byte(name) {
		if c == '/' || c == ':' || c <= ' ' {
			return fmt.Errorf("invalid interface name %q", name)
		}
	}
	return nil
}

func (n *NS) link(name string) (*netlink.Handle, netlink.Link, error) {
	h, err := n.handle()
	if err != nil {
		return nil, nil, err
	}
	l, err := h.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
			return nil, nil, fmt.Errorf("link %s: %w", n.where(name), ErrNotFound)
		}
		return nil, nil, err
	}
	return h, l, nil
}

// AddVeth creates a veth pair with name in this namespace and peerName
// directly in peer's namespace (no temporary name on the host). peer may be
// n itself or nil (same namespace). mtu 0 keeps the kernel default. Both
// ends are left down.
//
// Equivalent to: ip -n NS link add NAME mtu MTU type veth peer name PEER netns PEERNS mtu MTU
func (n *NS) AddVeth(name string, peer *NS, peerName string, mtu int) error {
	if peer == nil {
		peer = n
	}
	what := fmt.Sprintf("add veth %s -- %s", n.where(name), peer.where(peerName))
	if err := checkIfname(name); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := checkIfname(peerName); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if mtu < 0 {
		return fmt.Errorf("%s: negative mtu", what)
	}
	h, err := n.handle()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	attrs.MTU = mtu
	attrs.Namespace = netlink.NsFd(n.fd)
	veth := netlink.NewVeth(attrs)
	veth.PeerName = peerName
	veth.PeerMTU = uint32(mtu)
	veth.PeerNamespace = netlink.NsFd(peer.fd)
	if err := h.LinkAdd(veth); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// AddBridge creates a Linux bridge with STP off and forward delay 0, left
// down.
//
// Equivalent to: ip -n NS link add name NAME type bridge stp_state 0 forward_delay 0
func (n *NS) AddBridge(name string) error {
	what := "add bridge " + n.where(name)
	if err := checkIfname(name); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	s, err := n.rawSocket()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	// The netlink package has no bridge STP/forward-delay attributes, so
	// build RTM_NEWLINK by hand.
	req := &nl.NetlinkRequest{
		NlMsghdr: unix.NlMsghdr{
			Len:   unix.SizeofNlMsghdr,
			Type:  unix.RTM_NEWLINK,
			Flags: unix.NLM_F_REQUEST | unix.NLM_F_CREATE | unix.NLM_F_EXCL | unix.NLM_F_ACK,
		},
		Sockets: map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: s},
	}
	req.AddData(nl.NewIfInfomsg(unix.AF_UNSPEC))
	req.AddData(nl.NewRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated(name)))
	info := nl.NewRtAttr(unix.IFLA_LINKINFO, nil)
	info.AddRtAttr(nl.IFLA_INFO_KIND, nl.NonZeroTerminated("bridge"))
	data := info.AddRtAttr(nl.IFLA_INFO_DATA, nil)
	data.AddRtAttr(nl.IFLA_BR_STP_STATE, nl.Uint32Attr(0))
	data.AddRtAttr(nl.IFLA_BR_FORWARD_DELAY, nl.Uint32Attr(0))
	req.AddData(info)
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// SetMaster enslaves link to bridge (both in this namespace).
//
// Equivalent to: ip -n NS link set LINK master BRIDGE
func (n *NS) SetMaster(link, bridge string) error {
	what := fmt.Sprintf("set master %s of %s", bridge, n.where(link))
	h, l, err := n.link(link)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	_, br, err := n.link(bridge)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := h.LinkSetMasterByIndex(l, br.Attrs().Index); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// DelLink deletes link; a missing link is not an error. Deleting one end of
// a veth pair deletes both.
//
// Equivalent to: ip -n NS link del LINK
func (n *NS) DelLink(link string) error {
	what := "delete link " + n.where(link)
	h, l, err := n.link(link)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := h.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// SetUp sets link administratively up.
//
// Equivalent to: ip -n NS link set LINK up
func (n *NS) SetUp(link string) error {
	what := "set up " + n.where(link)
	h, l, err := n.link(link)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// AddAddr adds the address p (host bits kept, e.g. 198.18.0.1/24) to link.
// IPv6 addresses skip duplicate address detection so they are usable at
// once.
//
// Equivalent to: ip -n NS addr add P dev LINK [nodad]
func (n *NS) AddAddr(link string, p netip.Prefix) error {
	h, l, err := n.link(link)
	if err != nil {
		return fmt.Errorf("add addr %s to %s: %w", p, n.where(link), err)
	}
	return n.addAddr(h, l, link, p)
}

// addAddr adds p to the link l already looked up through h.
func (n *NS) addAddr(h *netlink.Handle, l netlink.Link, link string, p netip.Prefix) error {
	what := fmt.Sprintf("add addr %s to %s", p, n.where(link))
	p, err := normPrefix(p)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	addr := &netlink.Addr{IPNet: ipNet(p)}
	if p.Addr().Is6() {
		addr.Flags = unix.IFA_F_NODAD
	}
	if err := h.AddrAdd(l, addr); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// AddAddrsUp adds the addresses ps to link (as AddAddr) and sets it up, looking the link up
// once: a deploy does this for every interface, and AddAddr then SetUp ask the kernel for the
// link twice.
//
// Equivalent to: ip -n NS addr add P dev LINK; ip -n NS link set LINK up
func (n *NS) AddAddrsUp(link string, ps ...netip.Prefix) error {
	h, l, err := n.link(link)
	if err != nil {
		return fmt.Errorf("set up %s: %w", n.where(link), err)
	}
	for _, p := range ps {
		if err := n.addAddr(h, l, link, p); err != nil {
			return err
		}
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set up %s: %w", n.where(link), err)
	}
	return nil
}

// LinkInfo describes one network device.
type LinkInfo struct {
	Name   string
	Kind   string // "veth", "bridge", ...; "device" for lo and plain devices
	MAC    string // "" when the address is all zeros (lo)
	Master string // name of the bridge it is enslaved to, if any
	MTU    int
	Index  int
	Up     bool // administratively up (IFF_UP)
	Addrs  []netip.Prefix
	Stats  LinkStats
}

// LinkStats are a device's 64-bit counters.
type LinkStats struct {
	RxPackets, TxPackets, RxBytes, TxBytes, RxDropped, TxDropped uint64
}

// Links lists every device in the namespace, lo included, ordered by
// index, with addresses and counters.
//
// Equivalent to: ip -n NS -s addr show
func (n *NS) Links() ([]LinkInfo, error) {
	what := "list links in " + displayName(n.name)
	h, err := n.handle()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	names := make(map[int]string, len(links))
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	byLink := make(map[int][]netip.Prefix)
	for _, a := range addrs {
		if p, ok := prefixOf(a.IPNet); ok {
			byLink[a.LinkIndex] = append(byLink[a.LinkIndex], p)
		}
	}
	out := make([]LinkInfo, 0, len(links))
	for _, l := range links {
		a := l.Attrs()
		li := LinkInfo{
			Name:   a.Name,
			Kind:   l.Type(),
			MAC:    a.HardwareAddr.String(),
			Master: names[a.MasterIndex],
			MTU:    a.MTU,
			Index:  a.Index,
			Up:     a.Flags&net.FlagUp != 0,
			Addrs:  byLink[a.Index],
			Stats:  statsOf(a),
		}
		out = append(out, li)
	}
	slices.SortFunc(out, func(x, y LinkInfo) int { return x.Index - y.Index })
	return out, nil
}

// LinkStats returns the counters of one device.
//
// Equivalent to: ip -n NS -s link show LINK
func (n *NS) LinkStats(name string) (LinkStats, error) {
	_, l, err := n.link(name)
	if err != nil {
		return LinkStats{}, fmt.Errorf("read stats of %s: %w", n.where(name), err)
	}
	return statsOf(l.Attrs()), nil
}

func statsOf(a *netlink.LinkAttrs) LinkStats {
	s := a.Statistics
	if s == nil {
		return LinkStats{}
	}
	return LinkStats{
		RxPackets: s.RxPackets, TxPackets: s.TxPackets,
		RxBytes: s.RxBytes, TxBytes: s.TxBytes,
		RxDropped: s.RxDropped, TxDropped: s.TxDropped,
	}
}

// normPrefix turns an IPv4-mapped IPv6 prefix into plain IPv4.
func normPrefix(p netip.Prefix) (netip.Prefix, error) {
	if !p.IsValid() {
		return p, errors.New("invalid prefix")
	}
	if !p.Addr().Is4In6() {
		return p, nil
	}
	if p.Bits() < 96 {
		return p, fmt.Errorf("prefix %s mixes IPv4 and IPv6", p)
	}
	return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96), nil
}

// ipNet converts a prefix checked by normPrefix.
func ipNet(p netip.Prefix) *net.IPNet {
	a := p.Addr()
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(p.Bits(), a.BitLen())}
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	ones, bits := n.Mask.Size()
	if bits == 0 {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, ones), true
}

// RenameLink renames a link (taking it down first, as the kernel requires, and up again if it
// was up). Containers get eth0, eth1, ... from the engine; sfclab names them as the plan does.
//
// Equivalent to: ip -n NS link set OLD down; ip -n NS link set OLD name NEW; ip -n NS link set NEW up
func (n *NS) RenameLink(old, name string) error {
	what := "rename " + n.where(old) + " to " + name
	if err := checkIfname(name); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	h, l, err := n.link(old)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	up := l.Attrs().Flags&net.FlagUp != 0
	if up {
		if err := h.LinkSetDown(l); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if err := h.LinkSetName(l, name); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if up {
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// DelDefaultRoutes removes every IPv4 default route of the main table, so a node reaches
// nothing outside its lab.
//
// Equivalent to: ip -n NS route del default
func (n *NS) DelDefaultRoutes() error {
	h, err := n.handle()
	if err != nil {
		return fmt.Errorf("delete default routes in %s: %w", displayName(n.name), err)
	}
	routes, err := h.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("delete default routes in %s: %w", displayName(n.name), err)
	}
	for _, r := range routes {
		if r.Dst == nil || r.Dst.String() == "0.0.0.0/0" {
			r := r
			if err := h.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("delete default route in %s: %w", displayName(n.name), err)
			}
		}
	}
	return nil
}
