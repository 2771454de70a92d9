// Package firewall is the stateful firewall function: established and related traffic is
// accepted, invalid dropped, then the rules apply in order, then the policy; optionally the
// egress traffic is masqueraded (study A's iptables NAT firewall). Backends: nftables
// (default) or iptables.
//
// In a transparent (dual-stack) lab the rules cover IPv6 too: the nftables table is inet
// (both families) and protocol icmp matches ICMPv6 as well; the iptables backend loads the
// same chain into ip6tables (a rule with an IPv4 source or destination is IPv4's only, one
// with an IPv6 address IPv6's only).
package firewall

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf"
)

// Names of what the firewall creates in its node.
const (
	NftTable    = "sfclab_fw"
	NftNatTable = "sfclab_fw_nat"
	IptChain    = "SFCLAB-FW"
)

// Firewall implements vnf.Function.
type Firewall struct{}

func params(f *plan.Function) *FirewallParams { return f.Params.(*FirewallParams) }

// NewParams returns the kind's empty parameters (FirewallParams) for the decoder.
func (Firewall) NewParams() any { return &FirewallParams{} }

// Requires lists nft or iptables-restore and iptables-save (Teardown reads the tables back;
// ip6tables' for IPv6), by backend.
func (Firewall) Requires(f *plan.Function) []string {
	if params(f).Backend == spec.BackendIptables {
		if f.IPv6 {
			return []string{"iptables", "iptables-restore", "iptables-save", "ip6tables", "ip6tables-restore", "ip6tables-save"}
		}
		return []string{"iptables", "iptables-restore", "iptables-save"}
	}
	return []string{"nft"}
}

// Setup loads the ruleset in one transaction (per family with iptables).
// Equivalent to: nft -f RULESET (or iptables-restore --noflush RULES; ip6tables-restore --noflush RULES6)
func (fw Firewall) Setup(ctx context.Context, env vnf.Env) error {
	f := env.Plan.Function
	if params(f).Backend == spec.BackendIptables {
		if _, err := env.Node.Output(ctx, []byte(IptablesRules(f)), "iptables-restore", "-w", "--noflush"); err != nil {
			return vnf.Errorf(env, "load iptables rules: %w", err)
		}
		if f.IPv6 {
			if _, err := env.Node.Output(ctx, []byte(Ip6tablesRules(f)), "ip6tables-restore", "-w", "--noflush"); err != nil {
				return vnf.Errorf(env, "load ip6tables rules: %w", err)
			}
		}
		return nil
	}
	if _, err := env.Node.Output(ctx, []byte(NftRuleset(f)), "nft", "-f", "-"); err != nil {
		return vnf.Errorf(env, "load nftables ruleset: %w", err)
	}
	return nil
}

// Teardown deletes the firewall's tables or chains; what is already gone is skipped.
func (Firewall) Teardown(ctx context.Context, env vnf.Env) error {
	f := env.Plan.Function
	if params(f).Backend == spec.BackendIptables {
		errs := []error{
			vnf.RemoveIptablesChain(ctx, env.Node, "filter", IptChain, "-A FORWARD -j "+IptChain),
			vnf.RemoveIptablesChain(ctx, env.Node, "nat", "", "-A POSTROUTING -o "+f.Egress+" -j MASQUERADE")}
		if f.IPv6 {
			errs = append(errs, vnf.RemoveIp6tablesChain(ctx, env.Node, "filter", IptChain, "-A FORWARD -j "+IptChain))
		}
		return errors.Join(errs...)
	}
	return vnf.DeleteNftTables(ctx, env.Node, "inet "+NftTable, "ip "+NftNatTable)
}

func ruleMatch(r FirewallRule) vnf.Match {
	return vnf.Match{Protocol: r.Protocol, Source: r.Source, Destination: r.Destination, SrcPort: r.SourcePort, DstPort: r.Port}
}

// RuleName is the comment that tags rule i (0-based) so its counter can be read back.
func RuleName(i int) string { return fmt.Sprintf("rule-%d", i+1) }

// ruleMatchFor is rule r's match for a firewall: with IPv6 (dual-stack ports), protocol icmp
// means ICMP of both families.
func ruleMatchFor(f *plan.Function, r FirewallRule) vnf.Match {
	m := ruleMatch(r)
	if f.IPv6 && r.Protocol == "icmp" {
		m.Protocol = "{ icmp, ipv6-icmp }"
	}
	return m
}

// NftRuleset renders the nftables ruleset of a firewall.
func NftRuleset(f *plan.Function) string {
	p := params(f)
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n\tchain forward {\n", NftTable)
	fmt.Fprintf(&b, "\t\ttype filter hook forward priority filter; policy %s;\n", p.Policy)
	b.WriteString("\t\tct state established,related counter accept comment \"established\"\n")
	b.WriteString("\t\tct state invalid counter drop comment \"invalid\"\n")
	for i, r := range p.Rules {
		verdict := map[string]string{"allow": "accept", "deny": "drop", "reject": "reject"}[r.Action]
		if r.Action == "reject" && r.Protocol == "tcp" {
			verdict = "reject with tcp reset"
		}
		m := ruleMatchFor(f, r).Nft()
		if m != "" {
			m += " "
		}
		fmt.Fprintf(&b, "\t\t%scounter %s comment %q\n", m, verdict, RuleName(i))
	}
	fmt.Fprintf(&b, "\t\tcounter comment \"policy\"\n\t}\n}\n")
	if p.Masquerade {
		fmt.Fprintf(&b, "table ip %s {\n\tchain postrouting {\n", NftNatTable)
		b.WriteString("\t\ttype nat hook postrouting priority srcnat; policy accept;\n")
		fmt.Fprintf(&b, "\t\toifname %q counter masquerade comment \"masquerade\"\n\t}\n}\n", f.Egress)
	}
	return b.String()
}

// IptablesRules renders the firewall as iptables-restore input (used with --noflush).
func IptablesRules(f *plan.Function) string { return iptablesRules(f, false) }

// Ip6tablesRules renders the firewall's IPv6 half as ip6tables-restore input: the same chain,
// rules and policy, except rules with an IPv4 source or destination (IPv4's only, as rules with
// IPv6 addresses are left out of IptablesRules), protocol icmp as ICMPv6, and no masquerade (a
// transparent lab has none).
func Ip6tablesRules(f *plan.Function) string { return iptablesRules(f, true) }

func iptablesRules(f *plan.Function, v6 bool) string {
	p := params(f)
	var b strings.Builder
	b.WriteString("*filter\n")
	fmt.Fprintf(&b, ":%s - [0:0]\n", IptChain)
	fmt.Fprintf(&b, "-A FORWARD -j %s\n", IptChain)
	fmt.Fprintf(&b, "-A %s -m conntrack --ctstate ESTABLISHED,RELATED -m comment --comment established -j ACCEPT\n", IptChain)
	fmt.Fprintf(&b, "-A %s -m conntrack --ctstate INVALID -m comment --comment invalid -j DROP\n", IptChain)
	for i, r := range p.Rules {
		target := map[string]string{"allow": "ACCEPT", "deny": "DROP", "reject": "REJECT"}[r.Action]
		if r.Action == "reject" && r.Protocol == "tcp" {
			target = "REJECT --reject-with tcp-reset"
		}
		rm := ruleMatch(r)
		addr := r.Source
		if addr == "" {
			addr = r.Destination // both set are of one family (spec checks it)
		}
		if addr != "" && vnf.IsIPv6(addr) != v6 {
			continue // its addresses are the other family's: the rule cannot match here
		}
		if v6 && r.Protocol == "icmp" {
			rm.Protocol = "ipv6-icmp"
		}
		m := rm.Iptables()
		if m != "" {
			m += " "
		}
		fmt.Fprintf(&b, "-A %s %s-m comment --comment %s -j %s\n", IptChain, m, RuleName(i), target)
	}
	policy := "ACCEPT"
	if p.Policy == "drop" {
		policy = "DROP"
	}
	fmt.Fprintf(&b, "-A %s -m comment --comment policy -j %s\n", IptChain, policy)
	b.WriteString("COMMIT\n")
	if p.Masquerade && !v6 {
		fmt.Fprintf(&b, "*nat\n-A POSTROUTING -o %s -j MASQUERADE\nCOMMIT\n", f.Egress)
	}
	return b.String()
}

var nftCounter = regexp.MustCompile(`counter packets (\d+) bytes (\d+).*comment "([^"]+)"`)

// Counters reads the per-rule counters back from the node ("established", "rule-N", "policy").
// Equivalent to: nft list table inet sfclab_fw (or iptables -L SFCLAB-FW -v -x -n)
func Counters(ctx context.Context, node vnf.Node, f *plan.Function) ([]vnf.Counter, error) {
	var out []vnf.Counter
	if params(f).Backend == spec.BackendIptables {
		out, err := iptablesCounters(ctx, node, "iptables")
		if err != nil || !f.IPv6 {
			return out, err
		}
		// Both families: a rule's counter is the sum.
		out6, err := iptablesCounters(ctx, node, "ip6tables")
		if err != nil {
			return nil, err
		}
		at := map[string]int{}
		for i, c := range out {
			at[c.Rule] = i
		}
		for _, c := range out6 {
			if i, ok := at[c.Rule]; ok {
				out[i].Packets += c.Packets
				out[i].Bytes += c.Bytes
				continue
			}
			out = append(out, c)
		}
		return out, nil
	}
	text, err := node.Output(ctx, nil, "nft", "list", "table", "inet", NftTable)
	if err != nil {
		return nil, fmt.Errorf("read firewall counters: %w", err)
	}
	for _, m := range nftCounter.FindAllStringSubmatch(string(text), -1) {
		pk, _ := strconv.ParseUint(m[1], 10, 64)
		by, _ := strconv.ParseUint(m[2], 10, 64)
		out = append(out, vnf.Counter{Rule: m[3], Packets: pk, Bytes: by})
	}
	return out, nil
}

// iptablesCounters reads the chain's counters with bin (iptables or ip6tables).
// Equivalent to: BIN -L SFCLAB-FW -v -x -n
func iptablesCounters(ctx context.Context, node vnf.Node, bin string) ([]vnf.Counter, error) {
	text, err := node.Output(ctx, nil, bin, "-w", "-L", IptChain, "-v", "-x", "-n")
	if err != nil {
		return nil, fmt.Errorf("read firewall counters (%s): %w", bin, err)
	}
	var out []vnf.Counter
	sc := bufio.NewScanner(strings.NewReader(string(text)))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		i := strings.Index(sc.Text(), "/* ")
		if len(fields) < 2 || i < 0 {
			continue
		}
		pk, err1 := strconv.ParseUint(fields[0], 10, 64)
		by, err2 := strconv.ParseUint(fields[1], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		name := strings.TrimSuffix(strings.TrimSpace(sc.Text()[i+3:]), " */")
		name, _, _ = strings.Cut(name, " */")
		out = append(out, vnf.Counter{Rule: name, Packets: pk, Bytes: by})
	}
	return out, nil
}

// Counters reads the per-rule counters of one instance (vnf.RuleCounters, for inspect).
func (Firewall) Counters(ctx context.Context, node vnf.Node, f *plan.Function) ([]vnf.Counter, error) {
	return Counters(ctx, node, f)
}

// Compose loads the same ruleset in an exported container (vnf.Composer).
func (Firewall) Compose(f *plan.Function) ([]vnf.ComposeStep, string, error) {
	if params(f).Backend == spec.BackendIptables {
		steps := []vnf.ComposeStep{{Cmd: "iptables-restore -w --noflush", Stdin: IptablesRules(f)}}
		if f.IPv6 {
			steps = append(steps, vnf.ComposeStep{Cmd: "ip6tables-restore -w --noflush", Stdin: Ip6tablesRules(f)})
		}
		return steps, "", nil
	}
	return []vnf.ComposeStep{{Cmd: "nft -f -", Stdin: NftRuleset(f)}}, "", nil
}

// ImagePackages are the packages of both backends (vnf.ImagePackager).
func (Firewall) ImagePackages() []string { return []string{"nftables", "iptables"} }
