package hosts

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/sfclab/sfclab/netdev"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Placeholder is the next hop every transparent function forwards to: a permanent neighbor
// with PlaceholderMAC on the egress port. Steering at the egress port rewrites the
// destination MAC anyway (next hop or destination), so a function needs no route to the far
// end and no ARP for it.
// Placeholder6 is its IPv6 twin (in 2001:2::/48, outside the networks' 2001:2:0:N::/64),
// with the same MAC.
var (
	Placeholder    = netip.MustParseAddr("198.19.255.254")
	Placeholder6   = netip.MustParseAddr("2001:2:0:ffff::fffe")
	PlaceholderMAC = net.HardwareAddr{0x02, 0x5f, 0xc1, 0xab, 0x00, 0xfe}
)

// Pair is a function instance's way through: what arrives on In leaves by Out (In == Out for
// a one-armed function).
type Pair struct{ In, Out string }

// firstTable is the first routing table used for pairs.
const firstTable = 100

// Forward makes a function namespace a bump in the wire for its port pairs: IP forwarding
// on, reverse-path filter and ICMP redirects off, and per way (In to Out, and back from Out
// to In with reverse, for symmetric chains) a policy rule sending whatever arrives on In out
// of Out towards Placeholder; a one-armed function with one way gets a main-table default
// route instead (no policy rule: the kernel's fast path). Where a way's egress port has IPv6
// on (a dual-stack port: hosts.Port.Addr6), the same for IPv6: forwarding, the rule, the
// route via Placeholder6 and its neighbour.
// Equivalent to: sysctl net.ipv4.ip_forward=1; ip rule add iif IN lookup T;
// ip route add default via 198.19.255.254 dev OUT onlink table T;
// ip neigh replace 198.19.255.254 lladdr 02:5f:c1:ab:00:fe dev OUT nud permanent;
// and for IPv6: sysctl net.ipv6.conf.all.forwarding=1; ip -6 rule add iif IN lookup T;
// ip -6 route add default via 2001:2:0:ffff::fffe dev OUT onlink table T;
// ip -6 neigh replace 2001:2:0:ffff::fffe lladdr 02:5f:c1:ab:00:fe dev OUT nud permanent
func Forward(nsName string, pairs []Pair, reverse bool) error {
	ns, err := netdev.OpenNS(nsName)
	if err != nil {
		return fmt.Errorf("set up forwarding in %s: %w", nsName, err)
	}
	defer ns.Close()
	return ForwardIn(ns, pairs, reverse)
}

// ForwardIn is Forward in an open namespace (a container's, which has no name).
func ForwardIn(ns *netdev.NS, pairs []Pair, reverse bool) error {
	nsName := ns.Name()
	for _, kv := range [][2]string{
		{"net.ipv4.ip_forward", "1"},
		{"net.ipv4.conf.all.rp_filter", "0"},
		{"net.ipv4.conf.default.rp_filter", "0"},
		{"net.ipv4.conf.all.send_redirects", "0"},
		{"net.ipv4.conf.default.send_redirects", "0"},
	} {
		if err := ns.SetSysctl(kv[0], kv[1]); err != nil {
			return err
		}
	}
	var h *netlink.Handle
	err := ns.Do(func() error {
		var err error
		h, err = netlink.NewHandle(unix.NETLINK_ROUTE) // its socket stays in the namespace it was opened in
		return err
	})
	if err != nil {
		return fmt.Errorf("set up forwarding in %s: %w", nsName, err)
	}
	defer h.Close()
	var ways []Pair
	for _, p := range pairs {
		ways = append(ways, p)
		if reverse && p.In != p.Out {
			ways = append(ways, Pair{In: p.Out, Out: p.In})
		}
	}
	neigh := map[string]bool{}
	// IPv6 goes the same ways where the egress port has it on.
	v6 := map[string]bool{}
	for _, w := range ways {
		if on, err := ns.GetSysctl("net.ipv6.conf." + w.Out + ".disable_ipv6"); err == nil && on == "0" {
			v6[w.Out] = true
		}
	}
	if len(v6) > 0 {
		if err := ns.SetSysctl("net.ipv6.conf.all.forwarding", "1"); err != nil {
			return err
		}
	}
	for i, w := range ways {
		for _, ifname := range []string{w.In, w.Out} {
			for _, key := range []string{"rp_filter", "send_redirects"} {
				if err := ns.SetSysctl("net.ipv4.conf."+ifname+"."+key, "0"); err != nil {
					return err
				}
			}
		}
		// A one-armed function with one way needs no policy rule: whatever it forwards leaves
		// by its only port anyway (connected routes included), so the main table's default
		// route does, and the kernel forwards on its fast path (no fib rules walked). Two-armed
		// functions need the rule: a connected route could send the packet out of the wrong
		// port.
		table := 0
		if len(ways) > 1 || w.In != w.Out {
			table = firstTable + i
			if err := ns.AddRule(netdev.Rule{Priority: 1000 + i, Table: table, IifName: w.In}); err != nil {
				return err
			}
			if v6[w.Out] {
				if err := ns.AddRule(netdev.Rule{Priority: 1000 + i, Table: table, IifName: w.In, IPv6: true}); err != nil {
					return err
				}
			}
		}
		out, err := h.LinkByName(w.Out)
		if err != nil {
			return fmt.Errorf("set up forwarding in %s: %w", nsName, err)
		}
		type family struct {
			fam  int
			gw   netip.Addr
			bits int
		}
		fams := []family{{netlink.FAMILY_V4, Placeholder, 32}}
		if v6[w.Out] {
			fams = append(fams, family{netlink.FAMILY_V6, Placeholder6, 128})
		}
		for _, f := range fams {
			if !neigh[w.Out] {
				n := &netlink.Neigh{LinkIndex: out.Attrs().Index, Family: f.fam, State: netlink.NUD_PERMANENT,
					IP: f.gw.AsSlice(), HardwareAddr: PlaceholderMAC}
				if err := h.NeighSet(n); err != nil {
					return fmt.Errorf("set up forwarding in %s: placeholder neighbor %s on %s: %w", nsName, f.gw, w.Out, err)
				}
			}
			zero := net.IPv4zero
			if f.fam == netlink.FAMILY_V6 {
				zero = net.IPv6zero
			}
			r := &netlink.Route{LinkIndex: out.Attrs().Index, Table: table, Gw: f.gw.AsSlice(), Family: f.fam,
				Flags: int(netlink.FLAG_ONLINK), Dst: &net.IPNet{IP: zero, Mask: net.CIDRMask(0, f.bits)}}
			if err := h.RouteAdd(r); err != nil {
				return fmt.Errorf("set up forwarding in %s: route %s -> %s via %s: %w", nsName, w.In, w.Out, f.gw, err)
			}
		}
		neigh[w.Out] = true
	}
	return nil
}
