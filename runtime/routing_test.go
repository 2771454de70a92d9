package runtime

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
)

// TestRouting: a plan node's routes (single and multipath, in a table) and rules (each
// protocol, ports, prefixes) become the netdev routes and rules deploy and the VM guest set.
func TestRouting(t *testing.T) {
	pfx, addr := netip.MustParsePrefix, netip.MustParseAddr
	for _, tc := range []struct {
		name      string
		node      plan.Node
		wantRoute []netdev.Route
		wantRule  []netdev.Rule
	}{
		{name: "nothing", node: plan.Node{Name: "n"}},
		{name: "routes", node: plan.Node{Name: "n", Routes: []plan.Route{
			{Dst: pfx("198.18.1.0/24"), NextHops: []plan.NextHop{{Via: addr("198.18.0.2"), Dev: "eth0"}}},
			{Dst: pfx("198.18.2.0/24"), Table: 100, NextHops: []plan.NextHop{
				{Via: addr("198.18.0.3"), Dev: "eth0", Weight: 1}, {Via: addr("198.18.0.4"), Dev: "eth1", Weight: 2}}},
		}}, wantRoute: []netdev.Route{
			{Dst: pfx("198.18.1.0/24"), NextHops: []netdev.NextHop{{Via: addr("198.18.0.2"), Dev: "eth0"}}},
			{Dst: pfx("198.18.2.0/24"), Table: 100, NextHops: []netdev.NextHop{
				{Via: addr("198.18.0.3"), Dev: "eth0", Weight: 1}, {Via: addr("198.18.0.4"), Dev: "eth1", Weight: 2}}},
		}},
		{name: "rules", node: plan.Node{Name: "n", Rules: []plan.Rule{
			{Priority: 100, Table: 100, Protocol: "tcp", DstPort: spec.PortRange{From: 80, To: 80}, Src: pfx("198.18.0.0/24")},
			{Priority: 101, Table: 101, Protocol: "udp", SrcPort: spec.PortRange{From: 1000, To: 2000}, Dst: pfx("198.18.3.0/24")},
			{Priority: 102, Table: 102, Protocol: "icmp"},
			{Priority: 103, Table: 103},
		}}, wantRule: []netdev.Rule{
			{Priority: 100, Table: 100, IPProto: 6, DstPort: netdev.PortRange{From: 80, To: 80}, Src: pfx("198.18.0.0/24")},
			{Priority: 101, Table: 101, IPProto: 17, SrcPort: netdev.PortRange{From: 1000, To: 2000}, Dst: pfx("198.18.3.0/24")},
			{Priority: 102, Table: 102, IPProto: 1},
			{Priority: 103, Table: 103},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			routes, rules := Routing(&tc.node)
			if !reflect.DeepEqual(routes, tc.wantRoute) {
				t.Errorf("routes %+v\nwant %+v", routes, tc.wantRoute)
			}
			if !reflect.DeepEqual(rules, tc.wantRule) {
				t.Errorf("rules %+v\nwant %+v", rules, tc.wantRule)
			}
		})
	}
}
