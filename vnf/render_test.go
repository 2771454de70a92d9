package vnf_test

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/firewall"
	"github.com/sfclab/sfclab/vnf/kinds"
	"github.com/sfclab/sfclab/vnf/l4lb"
	"github.com/sfclab/sfclab/vnf/nat"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestRenderGolden pins the configuration every kind generates for the all-kinds lab.
func TestRenderGolden(t *testing.T) {
	lab, err := spec.Load("../spec/testdata/all-kinds.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(lab)
	if err != nil {
		t.Fatal(err)
	}
	fw, nt, lb := p.Node("fw").Function, p.Node("nat").Function, p.Node("lb").Function
	// The nftables form of the same firewall, and an nft load balancer with weights and a
	// backend port that differs.
	fwNft := *fw
	fwp := *fw.Params.(*firewall.FirewallParams)
	fwp.Backend, fwp.Masquerade = spec.BackendNftables, true
	fwNft.Params = &fwp
	lbNft := *lb
	lbp := *lb.Params.(*l4lb.L4LBParams)
	lbp.Impl, lbp.Balance = l4lb.ImplNft, "flow"
	lbNft.Params = &lbp
	lbNft.Backends = append([]plan.Backend(nil), lb.Backends...)
	lbNft.Backends[1].Port = 8080
	// HAProxy with its defaults: no threads given, no nbthread line.
	lbDef := *lb
	lbd := *lb.Params.(*l4lb.L4LBParams)
	lbd.Threads = 0
	lbDef.Params = &lbd
	natIpt := *nt
	np := *nt.Params.(*nat.NATParams)
	np.Backend = spec.BackendIptables
	natIpt.Params = &np
	// The same firewall on dual-stack ports (a transparent lab): icmp is ICMPv6 too, and the
	// iptables backend loads an ip6tables half.
	// A rule with an IPv6 address goes to the IPv6 half alone (ip6 saddr in nftables).
	v6rule := firewall.FirewallRule{Action: "deny", Protocol: "tcp", Port: spec.PortRange{From: 22, To: 22}, Source: "2001:2:0:1::/64", Destination: "2001:2::5"}
	fwDual := *fw
	fwDual.IPv6 = true
	fwip := *fw.Params.(*firewall.FirewallParams)
	fwip.Rules = append(slices.Clone(fwip.Rules), v6rule)
	fwDual.Params = &fwip
	fwDualNft := fwNft
	fwDualNft.IPv6 = true
	fwdp := *fwNft.Params.(*firewall.FirewallParams)
	fwdp.Masquerade = false
	fwdp.Rules = append(slices.Clone(fwdp.Rules), v6rule)
	fwDualNft.Params = &fwdp
	cases := map[string]string{
		"firewall.dual.iptables":   firewall.IptablesRules(&fwDual) + firewall.Ip6tablesRules(&fwDual),
		"firewall.dual.nft":        firewall.NftRuleset(&fwDualNft),
		"firewall.iptables":        firewall.IptablesRules(fw),
		"firewall.nft":             firewall.NftRuleset(&fwNft),
		"nat.nft":                  nat.NftRuleset(nt),
		"nat.iptables":             nat.IptablesRules(&natIpt),
		"l4lb.haproxy.cfg":         l4lb.HAProxyConfig(lb),
		"l4lb.nft":                 l4lb.NftRuleset(&lbNft),
		"l4lb.haproxy.default.cfg": l4lb.HAProxyConfig(&lbDef),
	}
	for name, got := range cases {
		golden := filepath.Join("testdata", name+".golden")
		if *update {
			os.WriteFile(golden, []byte(got), 0o644)
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (go test ./vnf -update)", err)
		}
		if got != string(want) {
			t.Errorf("%s differs from %s:\n%s", name, golden, got)
		}
	}
}
