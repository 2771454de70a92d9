package vnf

import (
	"fmt"
	"strings"

	"github.com/sfclab/sfclab/spec"
)

// Match is a packet match shared by the firewall and NAT kinds.
type Match struct {
	Protocol    string
	Source      string
	Destination string
	SrcPort     spec.PortRange
	DstPort     spec.PortRange
	InIf, OutIf string
}

// Nft renders the match as nftables expressions.
// Equivalent to: iifname "in" ip saddr S ip daddr D meta l4proto tcp tcp sport A tcp dport B
func (m Match) Nft() string {
	var p []string
	if m.InIf != "" {
		p = append(p, fmt.Sprintf("iifname %q", m.InIf))
	}
	if m.OutIf != "" {
		p = append(p, fmt.Sprintf("oifname %q", m.OutIf))
	}
	if m.Source != "" {
		p = append(p, nftFamily(m.Source)+" saddr "+m.Source)
	}
	if m.Destination != "" {
		p = append(p, nftFamily(m.Destination)+" daddr "+m.Destination)
	}
	if m.Protocol != "" && m.Protocol != "any" {
		p = append(p, "meta l4proto "+m.Protocol)
	}
	if !m.SrcPort.IsZero() {
		p = append(p, m.Protocol+" sport "+m.SrcPort.String())
	}
	if !m.DstPort.IsZero() {
		p = append(p, m.Protocol+" dport "+m.DstPort.String())
	}
	return strings.Join(p, " ")
}

// Iptables renders the match as iptables options.
// Equivalent to: -i in -s S -d D -p tcp --sport A --dport B
func (m Match) Iptables() string {
	var p []string
	if m.InIf != "" {
		p = append(p, "-i "+m.InIf)
	}
	if m.OutIf != "" {
		p = append(p, "-o "+m.OutIf)
	}
	if m.Source != "" {
		p = append(p, "-s "+m.Source)
	}
	if m.Destination != "" {
		p = append(p, "-d "+m.Destination)
	}
	if m.Protocol != "" && m.Protocol != "any" {
		p = append(p, "-p "+m.Protocol)
	}
	if !m.SrcPort.IsZero() {
		p = append(p, "--sport "+strings.ReplaceAll(m.SrcPort.String(), "-", ":"))
	}
	if !m.DstPort.IsZero() {
		p = append(p, "--dport "+strings.ReplaceAll(m.DstPort.String(), "-", ":"))
	}
	return strings.Join(p, " ")
}

// nftFamily is the nftables payload an address or prefix is matched in: ip, or ip6 for IPv6.
func nftFamily(prefix string) string {
	if IsIPv6(prefix) {
		return "ip6"
	}
	return "ip"
}

// IsIPv6 reports whether an address or prefix (as the spec checked it) is IPv6.
func IsIPv6(prefix string) bool {
	p, err := spec.ParseAnyPrefix(prefix)
	return err == nil && !p.Addr().Is4()
}
