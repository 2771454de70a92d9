package nat

import (
	"fmt"
	"net/netip"

	"github.com/sfclab/sfclab/spec"
)

// Kind is the kind's name in a lab file (the register, vnf/kinds, maps it to this package).
const Kind = "nat"

// NATParams are the parameters of a NAT function on its own.
type NATParams struct {
	// Backend is "nftables" (default) or "iptables".
	Backend string `yaml:"backend,omitempty" json:"backend"`
	// Masquerade rewrites sources to the egress address.
	Masquerade bool `yaml:"masquerade,omitempty" json:"masquerade,omitempty"`
	// SNAT rewrites sources to this address (instead of masquerade).
	SNAT string `yaml:"snat,omitempty" json:"snat,omitempty"`
	// DNAT rewrites destinations of matching traffic.
	DNAT []spec.DNATRule `yaml:"dnat,omitempty" json:"dnat,omitempty"`
}

// DNATRules are the rules whose targets the plan resolves (spec.Rewriter).
func (p *NATParams) DNATRules() []spec.DNATRule { return p.DNAT }

// SetDefaults fills in the backend (nftables) and each DNAT rule's to_port (its port).
func (p *NATParams) SetDefaults() {
	if p.Backend == "" {
		p.Backend = spec.BackendNftables
	}
	for i := range p.DNAT {
		if p.DNAT[i].ToPort == 0 {
			p.DNAT[i].ToPort = p.DNAT[i].Port
		}
	}
}

// Check checks the backend, that the function rewrites something, and every DNAT rule.
func (p *NATParams) Check(fn *spec.Function, pr *spec.Problems) {
	pr.OneOf("backend", p.Backend, spec.BackendNftables, spec.BackendIptables)
	if p.SNAT != "" {
		if a, err := netip.ParseAddr(p.SNAT); err != nil || !a.Is4() {
			pr.Addf("snat %q is not an IPv4 address", p.SNAT)
		}
		if p.Masquerade {
			pr.Addf("snat and masquerade exclude each other; pick one")
		}
	}
	if !p.Masquerade && p.SNAT == "" && len(p.DNAT) == 0 {
		pr.Addf("a nat function needs masquerade, snat or dnat")
	}
	for i, d := range p.DNAT {
		what := fmt.Sprintf("dnat %d", i+1)
		pr.OneOf(what+" protocol", d.Protocol, "tcp", "udp")
		if d.Port == 0 {
			pr.Addf("%s needs a port (1-65535)", what)
		}
		if d.To == "" {
			pr.Addf("%s needs to: an endpoint name or an address", what)
		}
	}
}
