package steer

import (
	"fmt"
	"net/netip"

	"github.com/sfclab/sfclab/hosts"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
)

// FastPathOf is the fast path a transparent node's function asks for (spec.FastPath), "" for
// none.
func FastPathOf(n *plan.TNode) string {
	if n.Function != nil {
		if fp, ok := n.Function.Params.(spec.FastPath); ok {
			return fp.FastPath()
		}
	}
	return ""
}

// BumpInTheWire turns off reverse-path filtering on a node's ports (and IPv6 on a port without
// an IPv6 address) and, for a function, makes whatever arrives on a way's ingress leave by its
// egress, IPv6 too on dual-stack ports (hosts.Forward); fast is the function's fast path
// (FastPathOf), passed apart so that a node can travel without its function's parameters.
func BumpInTheWire(ns *netdev.NS, n *plan.TNode, fast string) error {
	if ns == nil {
		return fmt.Errorf("node %s: no namespace handle", n.Name)
	}
	for _, pt := range n.Ports {
		kvs := [][2]string{{"net.ipv4.conf." + pt.Ifname + ".rp_filter", "0"}}
		if !pt.Address6.IsValid() {
			kvs = append(kvs, [2]string{"net.ipv6.conf." + pt.Ifname + ".disable_ipv6", "1"})
		}
		for _, kv := range kvs {
			if err := ns.SetSysctl(kv[0], kv[1]); err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
	}
	if len(n.Ways) == 0 {
		return nil
	}
	var ways []hosts.Pair
	for _, w := range n.Ways {
		ways = append(ways, hosts.Pair{In: w[0], Out: w[1]})
	}
	if err := hosts.ForwardIn(ns, ways, true); err != nil {
		return err
	}
	bump, offload := fast == spec.FastPathBump, fast == spec.FastPathOffload
	if !bump && !offload {
		return nil
	}
	if offload {
		// Conntrack does not see offloaded segments, so its TCP window for the flow falls
		// behind, and the FIN that ends the flow (the kernel's again) would be out of its
		// window: ct state invalid, dropped by the ruleset, and the connection never closes.
		// An nftables flowtable marks its flows' entries liberal for the same reason; the
		// namespace's sysctl does it for every flow of the firewall.
		if err := ns.SetSysctls([][2]string{{"net.netfilter.nf_conntrack_tcp_be_liberal", "1"}}); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	// A forwarder forwards everything that is not its own: the bump program does it at its
	// ingress port, with the kernel's forwarding above as the fallback for the rest. A
	// firewall's offload program forwards the packets of established flows the same way and
	// leaves the rest to the kernel's forwarding, conntrack and ruleset.
	var own []netip.Addr
	for _, pt := range n.Ports {
		if pt.Address.IsValid() {
			own = append(own, pt.Address.Addr())
		}
	}
	// Ways in ForwardIn's order, each with its reverse; the first way from a port wins, as the
	// first matching policy rule does.
	done := map[string]bool{}
	for _, w := range ways {
		for _, x := range []hosts.Pair{w, {In: w.Out, Out: w.In}} {
			if done[x.In] {
				continue
			}
			done[x.In] = true
			b := Bump{In: x.In, Out: x.Out, Own: own, Next: hosts.PlaceholderMAC}
			attach := AttachBump
			if offload {
				attach = AttachFwOffload
			}
			if err := attach(ns, b); err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
	}
	return nil
}
