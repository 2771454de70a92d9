package firewall

import (
	"fmt"

	"github.com/sfclab/sfclab/spec"
)

// Kind is the kind's name in a lab file (the register, vnf/kinds, maps it to this package).
const Kind = "firewall"

// FastPath is the offload program unless offload is none (FastPath).
func (p *FirewallParams) FastPath() string {
	if p.Offload == OffloadNone {
		return ""
	}
	return spec.FastPathOffload
}

// CheckRouted refuses what only a transparent lab honours (RoutedChecker): offload bpf (a
// program between the firewall's port and the host's bridge) and IPv6 rules (only a
// transparent lab's ports have IPv6).
func (p *FirewallParams) CheckRouted(pr *spec.Problems) {
	if p.Offload == OffloadBPF {
		pr.Addf("offload bpf is transparent steering's (its program sits between the firewall's port and the host's bridge); a routed firewall forwards by the kernel: drop offload or use steering: transparent")
	}
	if i := p.IPv6Rule(); i > 0 {
		pr.Addf("rule %d has an IPv6 address, and only a transparent lab's ports have IPv6 (routed labs are IPv4): use steering: transparent or an IPv4 prefix", i)
	}
}

// CheckTransparent refuses masquerade in a transparent lab (spec.TransparentChecker): it
// rewrites addresses, which a transparent chain cannot carry.
func (p *FirewallParams) CheckTransparent(pr *spec.Problems) {
	if p.Masquerade {
		pr.Addf("masquerade rewrites addresses, which a transparent chain cannot carry: drop masquerade or use steering: routed")
	}
}

// FirewallParams are the parameters of a stateful firewall: established and related traffic
// is accepted, then the rules apply in order, then the policy.
type FirewallParams struct {
	// Backend is "nftables" (default) or "iptables" (as study A used).
	Backend string `yaml:"backend,omitempty" json:"backend"`
	// Policy for forwarded packets no rule matched: "accept" (default) or "drop".
	Policy string `yaml:"policy,omitempty" json:"policy"`
	// Masquerade rewrites the source address of forwarded traffic to the egress address.
	Masquerade bool `yaml:"masquerade,omitempty" json:"masquerade,omitempty"`
	// Rules are tried in order on new connections.
	Rules []FirewallRule `yaml:"rules,omitempty" json:"rules,omitempty"`
	// Offload is how a firewall in a transparent lab forwards the packets of flows it has let
	// through: "bpf" (default there: a tc program at its ingress ports hands packets of
	// conntrack entries established both ways on, skipping the IP stack, conntrack and the
	// ruleset, as an nftables flowtable does) or "none" (every packet through the kernel). A
	// routed lab's firewalls always forward by the kernel.
	Offload string `yaml:"offload,omitempty" json:"offload,omitempty"`
}

// Firewall offloads.
const (
	OffloadBPF  = "bpf"
	OffloadNone = "none"
)

// FirewallRule allows, denies (drops) or rejects matching new connections.
type FirewallRule struct {
	// Action is "allow", "deny" (drop silently) or "reject".
	Action string `yaml:"action" json:"action"`
	// Protocol is "tcp", "udp", "icmp" or "" / "any".
	Protocol string `yaml:"protocol,omitempty" json:"protocol,omitempty"`
	// Source and Destination are CIDR prefixes or addresses (IPv6 too in a transparent lab,
	// whose ports are dual-stack; source and destination of one family).
	Source      string `yaml:"source,omitempty" json:"source,omitempty"`
	Destination string `yaml:"destination,omitempty" json:"destination,omitempty"`
	// Port is the destination port or range; SourcePort the source port or range.
	Port       spec.PortRange `yaml:"port,omitempty" json:"port,omitempty"`
	SourcePort spec.PortRange `yaml:"source_port,omitempty" json:"source_port,omitempty"`
}

// SetDefaults fills in the firewall's backend (nftables) and policy (accept).
func (p *FirewallParams) SetDefaults() {
	if p.Backend == "" {
		p.Backend = spec.BackendNftables
	}
	if p.Policy == "" {
		p.Policy = "accept"
	}
}

// Check checks the backend, the policy, the offload and every rule.
func (p *FirewallParams) Check(fn *spec.Function, pr *spec.Problems) {
	pr.OneOf("backend", p.Backend, spec.BackendNftables, spec.BackendIptables)
	pr.OneOf("policy", p.Policy, "accept", "drop")
	if p.Offload != "" {
		pr.OneOf("offload", p.Offload, OffloadBPF, OffloadNone)
	}
	for i, r := range p.Rules {
		what := fmt.Sprintf("rule %d", i+1)
		pr.OneOf(what+" action", r.Action, "allow", "deny", "reject")
		pr.Protocol(what, r.Protocol, r.Port, r.SourcePort)
		src := pr.AnyPrefix(what+" source", r.Source)
		dst := pr.AnyPrefix(what+" destination", r.Destination)
		if src.IsValid() && dst.IsValid() && src.Addr().Is4() != dst.Addr().Is4() {
			pr.Addf("%s: source %s and destination %s are of different IP versions; a packet has one: split the rule", what, r.Source, r.Destination)
		}
	}
}

// IPv6Rule returns the first rule (1-based) with an IPv6 source or destination, 0 if none:
// only a transparent lab's ports have IPv6.
func (p *FirewallParams) IPv6Rule() int {
	for i, r := range p.Rules {
		for _, s := range []string{r.Source, r.Destination} {
			if a, err := spec.ParseAnyPrefix(s); err == nil && !a.Addr().Is4() {
				return i + 1
			}
		}
	}
	return 0
}
