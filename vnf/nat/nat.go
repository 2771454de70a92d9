// Package nat is the NAT function on its own: source NAT (masquerade or a fixed address) on
// the egress, and destination NAT of chosen ports to an endpoint or address.
package nat

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf"
)

// Names of what the NAT function creates in its node.
const (
	NftTable = "sfclab_nat"
	IptPre   = "SFCLAB-NAT-PRE"
	IptPost  = "SFCLAB-NAT-POST"
)

// NAT implements vnf.Function.
type NAT struct{}

func params(f *plan.Function) *NATParams { return f.Params.(*NATParams) }

// NewParams returns the kind's empty parameters (NATParams) for the decoder.
func (NAT) NewParams() any { return &NATParams{} }

// Requires lists nft or iptables-restore, by backend.
func (NAT) Requires(f *plan.Function) []string {
	if params(f).Backend == spec.BackendIptables {
		return []string{"iptables", "iptables-restore"}
	}
	return []string{"nft"}
}

// Setup loads the NAT rules in one transaction.
func (NAT) Setup(ctx context.Context, env vnf.Env) error {
	f := env.Plan.Function
	if params(f).Backend == spec.BackendIptables {
		if _, err := env.Node.Output(ctx, []byte(IptablesRules(f)), "iptables-restore", "-w", "--noflush"); err != nil {
			return vnf.Errorf(env, "load iptables nat rules: %w", err)
		}
		return nil
	}
	if _, err := env.Node.Output(ctx, []byte(NftRuleset(f)), "nft", "-f", "-"); err != nil {
		return vnf.Errorf(env, "load nftables nat ruleset: %w", err)
	}
	return nil
}

// Teardown removes the NAT table or chains.
func (NAT) Teardown(ctx context.Context, env vnf.Env) error {
	if params(env.Plan.Function).Backend == spec.BackendIptables {
		return errors.Join(
			vnf.RemoveIptablesChain(ctx, env.Node, "nat", IptPre, "-A PREROUTING -j "+IptPre),
			vnf.RemoveIptablesChain(ctx, env.Node, "nat", IptPost, "-A POSTROUTING -j "+IptPost))
	}
	return vnf.DeleteNftTables(ctx, env.Node, "ip "+NftTable)
}

// NftRuleset renders the NAT function as an nftables ruleset.
func NftRuleset(f *plan.Function) string {
	p := params(f)
	var b strings.Builder
	fmt.Fprintf(&b, "table ip %s {\n", NftTable)
	b.WriteString("\tchain prerouting {\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n")
	for i, d := range f.DNAT {
		fmt.Fprintf(&b, "\t\tmeta l4proto %s %s dport %d counter dnat to %s:%d comment \"dnat-%d\"\n", d.Protocol, d.Protocol, d.Port, d.To, d.ToPort, i+1)
	}
	b.WriteString("\t}\n\tchain postrouting {\n\t\ttype nat hook postrouting priority srcnat; policy accept;\n")
	switch {
	case p.Masquerade:
		fmt.Fprintf(&b, "\t\toifname %q counter masquerade comment \"snat\"\n", f.Egress)
	case p.SNAT != "":
		fmt.Fprintf(&b, "\t\toifname %q counter snat to %s comment \"snat\"\n", f.Egress, p.SNAT)
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// IptablesRules renders the NAT function as iptables-restore input (used with --noflush).
func IptablesRules(f *plan.Function) string {
	p := params(f)
	var b strings.Builder
	fmt.Fprintf(&b, "*nat\n:%s - [0:0]\n:%s - [0:0]\n-A PREROUTING -j %s\n-A POSTROUTING -j %s\n", IptPre, IptPost, IptPre, IptPost)
	for _, d := range f.DNAT {
		fmt.Fprintf(&b, "-A %s -p %s --dport %d -j DNAT --to-destination %s:%d\n", IptPre, d.Protocol, d.Port, d.To, d.ToPort)
	}
	switch {
	case p.Masquerade:
		fmt.Fprintf(&b, "-A %s -o %s -j MASQUERADE\n", IptPost, f.Egress)
	case p.SNAT != "":
		fmt.Fprintf(&b, "-A %s -o %s -j SNAT --to-source %s\n", IptPost, f.Egress, p.SNAT)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// Compose loads the same rules in an exported container (vnf.Composer).
func (NAT) Compose(f *plan.Function) ([]vnf.ComposeStep, string, error) {
	if params(f).Backend == spec.BackendIptables {
		return []vnf.ComposeStep{{Cmd: "iptables-restore -w --noflush", Stdin: IptablesRules(f)}}, "", nil
	}
	return []vnf.ComposeStep{{Cmd: "nft -f -", Stdin: NftRuleset(f)}}, "", nil
}

// ImagePackages are the packages of both backends (vnf.ImagePackager).
func (NAT) ImagePackages() []string { return []string{"nftables", "iptables"} }
