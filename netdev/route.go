package netdev

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// MainTable is the kernel's main routing table; Table 0 in [Route] and
// [Rule] means this table.
const MainTable = unix.RT_TABLE_MAIN

// Route is a unicast route. With no next hop it is a device route (Dev
// required); with one it is a plain route via a gateway; with several it is
// a multipath (ECMP) route whose flows are spread by weight.
type Route struct {
	Dst      netip.Prefix // host bits are cleared; 0.0.0.0/0 is the default route
	Dev      string       // output device; default for next hops without Dev
	NextHops []NextHop
	Table    int // 0 = main
}

// NextHop is one gateway of a route.
type NextHop struct {
	Via    netip.Addr // invalid (zero) = directly connected through Dev
	Dev    string     // "" = Route.Dev, or let the kernel pick from Via
	Weight int        // 1-256, 0 = 1; only used for multipath routes
}

// String renders r in ip-route syntax.
func (r Route) String() string {
	var b strings.Builder
	b.WriteString(r.Dst.String())
	if r.Table != 0 && r.Table != MainTable {
		fmt.Fprintf(&b, " table %d", r.Table)
	}
	nhDev := func(nh NextHop) string {
		if nh.Dev != "" {
			return nh.Dev
		}
		return r.Dev
	}
	switch len(r.NextHops) {
	case 0:
		fmt.Fprintf(&b, " dev %s", r.Dev)
	case 1:
		nh := r.NextHops[0]
		if nh.Via.IsValid() {
			fmt.Fprintf(&b, " via %s", nh.Via)
		}
		if d := nhDev(nh); d != "" {
			fmt.Fprintf(&b, " dev %s", d)
		}
	default:
		for _, nh := range r.NextHops {
			b.WriteString(" nexthop")
			if nh.Via.IsValid() {
				fmt.Fprintf(&b, " via %s", nh.Via)
			}
			if d := nhDev(nh); d != "" {
				fmt.Fprintf(&b, " dev %s", d)
			}
			fmt.Fprintf(&b, " weight %d", max(nh.Weight, 1))
		}
	}
	return b.String()
}

func tableOf(t int) int {
	if t == 0 {
		return MainTable
	}
	return t
}

func familyOf(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

func (n *NS) linkIndex(h *netlink.Handle, name string, cache map[string]int) (int, error) {
	if i, ok := cache[name]; ok {
		return i, nil
	}
	l, err := h.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
			return 0, fmt.Errorf("link %s: %w", n.where(name), ErrNotFound)
		}
		return 0, err
	}
	if cache != nil {
		cache[name] = l.Attrs().Index
	}
	return l.Attrs().Index, nil
}

// AddRoute adds r; it fails if the same route exists.
//
// Equivalent to: ip -n NS route add DST [table T] dev DEV
// | ip -n NS route add DST [table T] via VIA [dev DEV]
// | ip -n NS route add DST [table T] nexthop via V1 dev D1 weight W1 nexthop via V2 ...
func (n *NS) AddRoute(r Route) error {
	return n.addRoute(r, nil)
}

// AddRoutes adds routes in order, stopping at the first error; each device is looked up once
// for the whole batch (AddRoute asks the kernel for a device's index on every call, which
// doubles the netlink round trips of a node with many routes).
//
// Equivalent to: ip -n NS -batch (route add ... per line)
func (n *NS) AddRoutes(rs []Route) error {
	idx := map[string]int{}
	for _, r := range rs {
		if err := n.addRoute(r, idx); err != nil {
			return err
		}
	}
	return nil
}

// addRoute adds r; idx, when not nil, caches device indexes across calls.
func (n *NS) addRoute(r Route, idx map[string]int) error {
	what := "add route " + r.String()
	if n.name != "" {
		what += " in " + n.name
	}
	rt, err := n.toNetlinkRoute(r, idx)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	h, err := n.handle()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := h.RouteAdd(rt); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// toNetlinkRoute translates r; cache, when not nil, keeps device indexes by name.
func (n *NS) toNetlinkRoute(r Route, cache map[string]int) (*netlink.Route, error) {
	dst, err := normPrefix(r.Dst)
	if err != nil {
		return nil, fmt.Errorf("destination: %w", err)
	}
	dst = dst.Masked()
	fam := familyOf(dst.Addr())
	h, err := n.handle()
	if err != nil {
		return nil, err
	}
	rt := &netlink.Route{Dst: ipNet(dst), Table: tableOf(r.Table), Family: fam}
	if r.Table < 0 {
		return nil, errors.New("negative table")
	}

	gw := func(nh NextHop) (net.IP, int, error) {
		dev := nh.Dev
		if dev == "" {
			dev = r.Dev
		}
		idx := 0
		if dev != "" {
			i, err := n.linkIndex(h, dev, cache)
			if err != nil {
				return nil, 0, err
			}
			idx = i
		}
		if !nh.Via.IsValid() {
			if idx == 0 {
				return nil, 0, errors.New("next hop needs a gateway or a device")
			}
			return nil, idx, nil
		}
		via := nh.Via.Unmap()
		if familyOf(via) != fam {
			return nil, 0, fmt.Errorf("gateway %s and destination %s differ in family", via, dst)
		}
		return net.IP(via.AsSlice()), idx, nil
	}

	switch len(r.NextHops) {
	case 0:
		if r.Dev == "" {
			return nil, errors.New("route needs a device or a next hop")
		}
		if rt.LinkIndex, err = n.linkIndex(h, r.Dev, cache); err != nil {
			return nil, err
		}
		rt.Scope = netlink.SCOPE_LINK
	case 1:
		if rt.Gw, rt.LinkIndex, err = gw(r.NextHops[0]); err != nil {
			return nil, err
		}
		if rt.Gw == nil {
			rt.Scope = netlink.SCOPE_LINK
		}
	default:
		for i, nh := range r.NextHops {
			if nh.Weight < 0 || nh.Weight > 256 {
				return nil, fmt.Errorf("next hop %d: weight %d out of 1-256", i, nh.Weight)
			}
			ip, idx, err := gw(nh)
			if err != nil {
				return nil, fmt.Errorf("next hop %d: %w", i, err)
			}
			// rtnh_hops holds weight-1, as in iproute2.
			rt.MultiPath = append(rt.MultiPath, &netlink.NexthopInfo{
				LinkIndex: idx, Gw: ip, Hops: max(nh.Weight, 1) - 1,
			})
		}
	}
	return rt, nil
}

// Routes lists the unicast routes of one table (0 = main), both families.
// A multipath route reports each next hop with its weight; a plain route
// with a gateway reports it as a single next hop.
//
// Equivalent to: ip -n NS route show table T; ip -n NS -6 route show table T
func (n *NS) Routes(table int) ([]Route, error) {
	what := fmt.Sprintf("list routes of table %d in %s", tableOf(table), displayName(n.name))
	h, err := n.handle()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	names, err := n.linkNames(h)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	rts, err := h.RouteListFiltered(netlink.FAMILY_ALL,
		&netlink.Route{Table: tableOf(table)}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var out []Route
	for _, rt := range rts {
		if rt.Type != unix.RTN_UNICAST {
			continue
		}
		r := Route{Table: rt.Table, Dev: names[rt.LinkIndex]}
		if p, ok := prefixOf(rt.Dst); ok {
			r.Dst = p
		} else if rt.Family == netlink.FAMILY_V6 {
			r.Dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		} else {
			r.Dst = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		}
		if r.Table == MainTable {
			r.Table = 0
		}
		addrOf := func(ip net.IP) netip.Addr {
			a, _ := netip.AddrFromSlice(ip)
			return a.Unmap()
		}
		switch {
		case len(rt.MultiPath) > 0:
			for _, nh := range rt.MultiPath {
				r.NextHops = append(r.NextHops, NextHop{
					Via: addrOf(nh.Gw), Dev: names[nh.LinkIndex], Weight: nh.Hops + 1,
				})
			}
		case rt.Gw != nil:
			r.NextHops = []NextHop{{Via: addrOf(rt.Gw), Dev: r.Dev}}
		}
		out = append(out, r)
	}
	return out, nil
}

func (n *NS) linkNames(h *netlink.Handle) (map[int]string, error) {
	links, err := h.LinkList()
	if err != nil {
		return nil, err
	}
	m := make(map[int]string, len(links))
	for _, l := range links {
		m[l.Attrs().Index] = l.Attrs().Name
	}
	return m, nil
}

// PortRange is an inclusive port range; the zero value means any port and
// To 0 means just From.
type PortRange struct{ From, To uint16 }

// IsZero reports whether p matches any port.
func (p PortRange) IsZero() bool { return p.From == 0 && p.To == 0 }

// String renders p as iproute2 does: "80" or "8000-8080".
func (p PortRange) String() string {
	if p.To == 0 || p.To == p.From {
		return strconv.Itoa(int(p.From))
	}
	return fmt.Sprintf("%d-%d", p.From, p.To)
}

// Rule is a policy routing rule. Zero fields match anything; Priority 0
// lets the kernel choose one; Table 0 is main. The rule is IPv6 when Src or
// Dst is IPv6, IPv4 otherwise.
type Rule struct {
	Priority, Table  int
	IPProto          uint8 // e.g. 6 (tcp), 17 (udp)
	SrcPort, DstPort PortRange
	Src, Dst         netip.Prefix
	IifName          string
	// IPv6 puts the rule in the IPv6 rule list (ip -6 rule); an IPv6 Src or Dst does too.
	IPv6 bool
}

// String renders r in ip-rule syntax.
func (r Rule) String() string {
	var b strings.Builder
	if r.Priority != 0 {
		fmt.Fprintf(&b, "pref %d ", r.Priority)
	}
	if r.IPProto != 0 {
		fmt.Fprintf(&b, "ipproto %d ", r.IPProto)
	}
	if !r.SrcPort.IsZero() {
		fmt.Fprintf(&b, "sport %s ", r.SrcPort)
	}
	if !r.DstPort.IsZero() {
		fmt.Fprintf(&b, "dport %s ", r.DstPort)
	}
	if r.Src.IsValid() {
		fmt.Fprintf(&b, "from %s ", r.Src)
	}
	if r.Dst.IsValid() {
		fmt.Fprintf(&b, "to %s ", r.Dst)
	}
	if r.IifName != "" {
		fmt.Fprintf(&b, "iif %s ", r.IifName)
	}
	fmt.Fprintf(&b, "lookup %d", tableOf(r.Table))
	return b.String()
}

// AddRule adds a policy routing rule.
//
// Equivalent to: ip -n NS rule add pref P [ipproto X] [sport A-B] [dport A-B] [from S] [to D] [iif I] lookup T
func (n *NS) AddRule(r Rule) error {
	what := "add rule " + r.String()
	if n.name != "" {
		what += " in " + n.name
	}
	nr, err := toNetlinkRule(r)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	h, err := n.handle()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := h.RuleAdd(nr); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func toNetlinkRule(r Rule) (*netlink.Rule, error) {
	if r.Priority < 0 || r.Table < 0 {
		return nil, errors.New("negative priority or table")
	}
	nr := netlink.NewRule()
	nr.Family = netlink.FAMILY_V4
	if r.IPv6 {
		nr.Family = netlink.FAMILY_V6
	}
	if r.Priority > 0 {
		nr.Priority = r.Priority
	}
	nr.Table = tableOf(r.Table)
	nr.IPProto = int(r.IPProto)
	nr.IifName = r.IifName
	ports := func(p PortRange) (*netlink.RulePortRange, error) {
		if p.IsZero() {
			return nil, nil
		}
		to := p.To
		if to == 0 {
			to = p.From
		}
		if to < p.From {
			return nil, fmt.Errorf("port range %d-%d is reversed", p.From, p.To)
		}
		return netlink.NewRulePortRange(p.From, to), nil
	}
	var err error
	if nr.Sport, err = ports(r.SrcPort); err != nil {
		return nil, err
	}
	if nr.Dport, err = ports(r.DstPort); err != nil {
		return nil, err
	}
	fam := 0
	for _, pp := range []struct {
		p   netip.Prefix
		dst **net.IPNet
	}{{r.Src, &nr.Src}, {r.Dst, &nr.Dst}} {
		if !pp.p.IsValid() {
			continue
		}
		p, err := normPrefix(pp.p)
		if err != nil {
			return nil, err
		}
		f := familyOf(p.Addr())
		if fam != 0 && f != fam {
			return nil, errors.New("from and to differ in family")
		}
		fam = f
		*pp.dst = ipNet(p.Masked())
	}
	if fam != 0 {
		nr.Family = fam
	}
	return nr, nil
}

// Rules lists the policy routing rules of both families, the kernel's
// default ones included.
//
// Equivalent to: ip -n NS rule show; ip -n NS -6 rule show
func (n *NS) Rules() ([]Rule, error) {
	what := "list rules in " + displayName(n.name)
	h, err := n.handle()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	nrs, err := h.RuleList(netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out := make([]Rule, 0, len(nrs))
	for _, nr := range nrs {
		r := Rule{Priority: max(nr.Priority, 0), Table: nr.Table, IifName: nr.IifName, IPv6: nr.Family == netlink.FAMILY_V6}
		if r.Table == MainTable {
			r.Table = 0
		}
		if nr.IPProto > 0 && nr.IPProto < 256 {
			r.IPProto = uint8(nr.IPProto)
		}
		if nr.Sport != nil {
			r.SrcPort = PortRange{nr.Sport.Start, nr.Sport.End}
		}
		if nr.Dport != nil {
			r.DstPort = PortRange{nr.Dport.Start, nr.Dport.End}
		}
		if p, ok := prefixOf(nr.Src); ok {
			r.Src = p
		}
		if p, ok := prefixOf(nr.Dst); ok {
			r.Dst = p
		}
		out = append(out, r)
	}
	return out, nil
}
