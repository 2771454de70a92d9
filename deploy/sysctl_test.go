package deploy

import (
	"testing"

	"github.com/sfclab/sfclab/internal/plantest"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
)

// TestTakesDefaults checks when a node's interfaces need no sysctls of their own: only when
// its namespace defaults are what links would set (rp_filter 0, IPv6 off).
func TestTakesDefaults(t *testing.T) {
	sc := func(kv ...string) *plan.Node {
		n := &plan.Node{}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Sysctls = append(n.Sysctls, plan.Sysctl{Key: kv[i], Value: kv[i+1]})
		}
		return n
	}
	for _, tc := range []struct {
		name string
		n    *plan.Node
		want bool
	}{
		{"both", sc("net.ipv4.conf.default.rp_filter", "0", "net.ipv6.conf.default.disable_ipv6", "1"), true},
		{"none", sc(), false},
		{"rp_filter only", sc("net.ipv4.conf.default.rp_filter", "0"), false},
		{"strict rp_filter", sc("net.ipv4.conf.default.rp_filter", "1", "net.ipv6.conf.default.disable_ipv6", "1"), false},
		{"IPv6 on", sc("net.ipv4.conf.default.rp_filter", "0", "net.ipv6.conf.default.disable_ipv6", "0"), false},
		{"all, not default", sc("net.ipv4.conf.all.rp_filter", "0", "net.ipv6.conf.all.disable_ipv6", "1"), false},
	} {
		if got := takesDefaults(tc.n); got != tc.want {
			t.Errorf("%s: takesDefaults = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestInterfaceSysctls deploys a chain with a veth pair hop and a fan-out group on a bridge
// and checks what every node's interfaces took from the sysctls written as its namespace was
// created: rp_filter off, IPv6 off, forwarding on in functions, lo up.
func TestInterfaceSysctls(t *testing.T) {
	requireRoot(t)
	d := testDeployer(t)
	p := plantest.Decode(t, `name: t-sysctl
endpoints: {client: {}, server: {}}
functions:
  f: {kind: forwarder}
  g: {kind: forwarder, instances: 2}
chains: [{from: client, to: server, hops: [f, g]}]
`)
	deploy(t, d, p)
	for _, n := range p.Nodes {
		ns, err := netdev.OpenNS(n.Netns)
		if err != nil {
			t.Fatal(err)
		}
		defer ns.Close()
		want := map[string]string{}
		for _, i := range n.Interfaces {
			want["net.ipv4.conf."+i.Name+".rp_filter"] = "0"
			want["net.ipv6.conf."+i.Name+".disable_ipv6"] = "1"
		}
		for _, s := range n.Sysctls {
			want[s.Key] = s.Value
		}
		for k, v := range want {
			if got, err := ns.GetSysctl(k); err != nil || got != v {
				t.Errorf("node %s: %s = %q, %v; want %q", n.Name, k, got, err, v)
			}
		}
		links, err := ns.Links()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			if !l.Up {
				t.Errorf("node %s: %s is down", n.Name, l.Name)
			}
		}
	}
}
