package runtime

import (
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
)

// Routing is a plan node's routes and policy rules as netdev sets them, the same whoever
// sets them: deploy in the node's namespace, or a VM's guest agent (runtime vm). Either is nil
// when the node has none.
func Routing(n *plan.Node) ([]netdev.Route, []netdev.Rule) {
	var routes []netdev.Route
	for _, r := range n.Routes {
		nr := netdev.Route{Dst: r.Dst, Table: r.Table}
		for _, h := range r.NextHops {
			nr.NextHops = append(nr.NextHops, netdev.NextHop{Via: h.Via, Dev: h.Dev, Weight: h.Weight})
		}
		routes = append(routes, nr)
	}
	var rules []netdev.Rule
	for _, r := range n.Rules {
		rules = append(rules, netdev.Rule{Priority: r.Priority, Table: r.Table, IPProto: ipProto(r.Protocol),
			SrcPort: netdev.PortRange{From: r.SrcPort.From, To: r.SrcPort.To},
			DstPort: netdev.PortRange{From: r.DstPort.From, To: r.DstPort.To},
			Src:     r.Src, Dst: r.Dst})
	}
	return routes, rules
}

// ipProto is the IP protocol number of a rule's protocol name (0: any).
func ipProto(p string) uint8 {
	switch p {
	case "tcp":
		return 6
	case "udp":
		return 17
	case "icmp":
		return 1
	}
	return 0
}
