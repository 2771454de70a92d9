package vm

import (
	"context"

	"github.com/sfclab/sfclab/hosts"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
)

// BootOnPorts boots a transparent lab's VMs, all at once, once package hosts has made their
// ports: a veth per port from the node's namespace to its host's bridge, whose host-side end
// carries the steering program as for a namespace node. In the node's namespace each veth end
// is spliced to a tap, as in a routed lab, and the guest's NIC takes the veth's MAC and MTU,
// so the steering program's rewrite to that MAC reaches the guest. A function's guest becomes
// the bump in the wire a namespace function is made into (hosts.ForwardIn, run by the agent):
// its kernel forwards whatever arrives on a way's ingress out of its egress. The tc fast
// paths (a forwarder's bump, a firewall's offload) are not loaded in guests: a VM function
// forwards by its kernel, as study C's VNFs did.
//
// A routed lab on emulated hosts (hosts:) has its ports made by package hosts too, in place
// of the runtime's Link (which would boot the VMs): its VMs boot here as well, each guest
// given the node's routed network (addresses, routes, rules) as in a routed lab on the
// machine itself, its NICs the MTU of the port (lower where VXLAN joins the hosts).
func (r Runtime) BootOnPorts(ctx context.Context, p *plan.Plan, ns map[string]*netdev.NS) error {
	if !hasVM(p) {
		return nil
	}
	if p.Transparent == nil {
		if len(p.Hosts) == 0 {
			return nil // Link booted them
		}
		return r.bootAll(ctx, p, ns, guestConfig)
	}
	return r.bootAll(ctx, p, ns, func(n *plan.Node) *GuestConfig {
		return transparentConfig(p.Transparent.Node(n.Name))
	})
}

// transparentConfig is a transparent node's guest network: its ports with their IPv4 and
// IPv6 addresses, reverse-path filtering off, IPv6 on only where the port has an address
// (no router advertisements taken), and a function's ways through.
func transparentConfig(n *plan.TNode) *GuestConfig {
	c := &GuestConfig{Sysctls: [][2]string{{"net.ipv4.conf.all.rp_filter", "0"}}}
	if n == nil {
		return c
	}
	for _, pt := range n.Ports {
		gi := GuestInterface{Name: pt.Ifname}
		if pt.Address.IsValid() {
			gi.Addrs = append(gi.Addrs, pt.Address)
		}
		c.Sysctls = append(c.Sysctls, [2]string{"net.ipv4.conf." + pt.Ifname + ".rp_filter", "0"})
		if pt.Address6.IsValid() {
			gi.Addrs = append(gi.Addrs, pt.Address6)
			c.Sysctls = append(c.Sysctls, [2]string{"net.ipv6.conf." + pt.Ifname + ".disable_ipv6", "0"},
				[2]string{"net.ipv6.conf." + pt.Ifname + ".accept_ra", "0"})
		} else {
			c.Sysctls = append(c.Sysctls, [2]string{"net.ipv6.conf." + pt.Ifname + ".disable_ipv6", "1"})
		}
		c.Interfaces = append(c.Interfaces, gi)
	}
	for _, w := range n.Ways {
		c.Ways = append(c.Ways, hosts.Pair{In: w[0], Out: w[1]})
	}
	return c
}
