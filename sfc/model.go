// Package sfc holds the OpenStack networking-sfc model — flow classifiers, port pairs, port
// pair groups, port chains and service graphs — with networking-sfc's field names and
// validation rules, and compiles a set of chains into the tables of sfclab's transparent data
// plane (package steer loads them into BPF maps, so changing a chain is a map update).
//
// The package is pure: no syscalls. Lab files (package spec) and the REST API (package api)
// both build a Model and call Validate and Compile.
package sfc

import (
	"net/netip"
)

// Port is a Neutron port: one interface of an endpoint or a function instance on a network.
type Port struct {
	// Name identifies the port (a lab's ports are named NODE.IFNAME; the API uses UUIDs).
	Name string `json:"name"`
	// Node is the endpoint or function instance the port belongs to.
	Node string `json:"node,omitempty"`
	// Network is the L2 network the port sits on.
	Network string `json:"network,omitempty"`
	// Host is the emulated host the node runs on ("" for a single-host lab).
	Host string `json:"host,omitempty"`
	// IP is the port's fixed IPv4 address (optional).
	IP netip.Addr `json:"ip,omitzero"`
	// IP6 is the port's fixed IPv6 address (optional; dual-stack ports have both).
	IP6 netip.Addr `json:"ip6,omitzero"`
}

// FlowClassifier selects the traffic that enters a port chain. Zero values mean "any".
// Equivalent to: openstack sfc flow classifier create --ethertype ... --protocol ... NAME
type FlowClassifier struct {
	Name string `json:"name"`
	// Ethertype is "IPv4" (default) or "IPv6".
	Ethertype string `json:"ethertype,omitempty"`
	// Protocol is "tcp", "udp", "icmp", "icmpv6", a protocol number, or "" for any.
	Protocol                string       `json:"protocol,omitempty"`
	SourcePortRangeMin      int          `json:"source_port_range_min,omitempty"`
	SourcePortRangeMax      int          `json:"source_port_range_max,omitempty"`
	DestinationPortRangeMin int          `json:"destination_port_range_min,omitempty"`
	DestinationPortRangeMax int          `json:"destination_port_range_max,omitempty"`
	SourceIPPrefix          netip.Prefix `json:"source_ip_prefix,omitzero"`
	DestinationIPPrefix     netip.Prefix `json:"destination_ip_prefix,omitzero"`
	// LogicalSourcePort is the port the classified traffic comes from; the data plane
	// classifies there, so it is required.
	LogicalSourcePort string `json:"logical_source_port,omitempty"`
	// LogicalDestinationPort is the port the traffic goes to; a symmetric chain classifies
	// replies there, so its classifiers need one.
	LogicalDestinationPort string `json:"logical_destination_port,omitempty"`
}

// PortPair is one instance of a service function: where traffic enters and leaves it.
// Ingress and Egress may be the same port (a one-armed function).
// Equivalent to: openstack sfc port pair create --ingress IN --egress OUT NAME
type PortPair struct {
	Name    string `json:"name"`
	Ingress string `json:"ingress"`
	Egress  string `json:"egress"`
	// Weight is the share of flows this instance gets within its group (networking-sfc's
	// service_function_parameters weight, non-negative): 0 takes no flows, unless every pair
	// of the group weighs 0 (then flows spread evenly). Lab files give 1 when not set.
	Weight int `json:"weight,omitempty"`
}

// PortPairGroup is the instances of one function; flows are spread over them by a hash of
// LBFields, weighted. A tap group only receives a copy of the traffic.
// Equivalent to: openstack sfc port pair group create --port-pair PP ... NAME
type PortPairGroup struct {
	Name      string   `json:"name"`
	PortPairs []string `json:"port_pairs"`
	// LBFields are the packet fields hashed to pick an instance (networking-sfc's
	// port_pair_group_parameters lb_fields): ip_src, ip_dst, ip_proto, tcp_src, tcp_dst,
	// udp_src, udp_dst, eth_src, eth_dst. Empty means the 5-tuple.
	LBFields   []string `json:"lb_fields,omitempty"`
	TapEnabled bool     `json:"tap_enabled,omitempty"`
}

// ChainParameters are networking-sfc's chain_parameters.
type ChainParameters struct {
	// Correlation is "mpls" or "nsh" in networking-sfc; the eBPF data plane carries the
	// path id and index itself, so only "" (none) is accepted.
	Correlation string `json:"correlation,omitempty"`
	// Symmetric sends replies back through the same instances in reverse order.
	Symmetric bool `json:"symmetric,omitempty"`
}

// PortChain binds flow classifiers to an ordered list of port pair groups.
// Equivalent to: openstack sfc port chain create --flow-classifier FC --port-pair-group PPG NAME
type PortChain struct {
	Name            string          `json:"name"`
	FlowClassifiers []string        `json:"flow_classifiers"`
	PortPairGroups  []string        `json:"port_pair_groups"`
	ChainParameters ChainParameters `json:"chain_parameters,omitzero"`
	// ChainID, when set, fixes the chain's path id at 2*ChainID (networking-sfc's chain_id),
	// so a chain keeps its path (and its hop counters) when other chains come and go; unset,
	// the chain's position decides (chain i has 2(i+1), the chain_id the API shows for it).
	ChainID int `json:"chain_id,omitempty"`
}

// ServiceGraph links chains: traffic leaving a source chain continues into the first of its
// destination chains whose classifier matches.
// Equivalent to: openstack sfc service graph create --branching-point SRC:DST1,DST2 NAME
type ServiceGraph struct {
	Name string `json:"name"`
	// PortChains maps a source chain to its destination chains.
	PortChains map[string][]string `json:"port_chains"`
}

// Model is a set of ports and networking-sfc resources.
type Model struct {
	Ports           []Port           `json:"ports"`
	FlowClassifiers []FlowClassifier `json:"flow_classifiers"`
	PortPairs       []PortPair       `json:"port_pairs"`
	PortPairGroups  []PortPairGroup  `json:"port_pair_groups"`
	PortChains      []PortChain      `json:"port_chains"`
	ServiceGraphs   []ServiceGraph   `json:"service_graphs,omitempty"`
}

// LBField bits, as the data plane hashes them.
const (
	LBIPSrc uint32 = 1 << iota
	LBIPDst
	LBIPProto
	LBTCPSrc
	LBTCPDst
	LBUDPSrc
	LBUDPDst
	LBEthSrc
	LBEthDst
)

// lbFieldBits maps networking-sfc's lb_fields names to data plane bits.
var lbFieldBits = map[string]uint32{
	"ip_src": LBIPSrc, "ip_dst": LBIPDst, "ip_proto": LBIPProto,
	"tcp_src": LBTCPSrc, "tcp_dst": LBTCPDst, "udp_src": LBUDPSrc, "udp_dst": LBUDPDst,
	"eth_src": LBEthSrc, "eth_dst": LBEthDst,
}

// DefaultLBFields is the 5-tuple, used when a group names no lb_fields.
var DefaultLBFields = []string{"ip_src", "ip_dst", "ip_proto", "tcp_src", "tcp_dst", "udp_src", "udp_dst"}

// LBFieldNames lists the lb_fields names networking-sfc defines, in a stable order.
func LBFieldNames() []string {
	return []string{"ip_src", "ip_dst", "ip_proto", "tcp_src", "tcp_dst", "udp_src", "udp_dst", "eth_src", "eth_dst"}
}

// protocolNumbers maps networking-sfc's protocol names to IP protocol numbers.
var protocolNumbers = map[string]int{"icmp": 1, "tcp": 6, "udp": 17, "icmpv6": 58}

// ProtocolNumber returns the IP protocol number of a classifier's protocol: a name or a
// number; "" gives 0 (any).
func ProtocolNumber(p string) (int, bool) {
	if p == "" {
		return 0, true
	}
	if n, ok := protocolNumbers[p]; ok {
		return n, true
	}
	n := 0
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
		if n > 255 {
			return 0, false
		}
	}
	return n, true
}
