package spec

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Firewall backends.
const (
	BackendNftables = "nftables"
	BackendIptables = "iptables"
)

// DNATRule sends traffic for one port of the function to another address.
type DNATRule struct {
	// Protocol is "tcp" or "udp".
	Protocol string `yaml:"protocol" json:"protocol"`
	// Port is the destination port matched (on any address the function receives).
	Port uint16 `yaml:"port" json:"port"`
	// To is an endpoint name (its first instance's address in this chain) or an address.
	To string `yaml:"to" json:"to"`
	// ToPort is the new destination port; default Port.
	ToPort uint16 `yaml:"to_port,omitempty" json:"to_port,omitempty"`
}

// MaxObjectSize is the largest object an http-server makes.
const MaxObjectSize = 1 << 30

// ParseSize parses an object size: a number with an optional k, M or G suffix (powers of 1024).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	switch {
	case strings.HasSuffix(t, "k"), strings.HasSuffix(t, "K"):
		mult, t = 1<<10, t[:len(t)-1]
	case strings.HasSuffix(t, "M"):
		mult, t = 1<<20, t[:len(t)-1]
	case strings.HasSuffix(t, "G"):
		mult, t = 1<<30, t[:len(t)-1]
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("object size %q is not a size like 1k, 100k, 10M", s)
	}
	if n*mult > MaxObjectSize {
		return 0, fmt.Errorf("object size %q is over the %d MiB an http-server makes", s, MaxObjectSize>>20)
	}
	return n * mult, nil
}

// ObjectPath is the URL path of an object of the given size name.
func ObjectPath(size string) string { return "/obj-" + size }

// ParsePrefix parses an IPv4 CIDR prefix or a bare address (as a /32).
func ParsePrefix(s string) (netip.Prefix, error) {
	p, err := ParseAnyPrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("%q is not IPv4 (sfclab labs are IPv4)", s)
	}
	return p, nil
}

// ParseAnyPrefix is ParsePrefix for either family: a firewall rule's address in a transparent
// (dual-stack) lab may be IPv6.
func ParseAnyPrefix(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q has a zone; give the address alone", s)
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR prefix like 198.18.0.0/24", s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set; did you mean %s?", s, p.Masked())
	}
	return p, nil
}
