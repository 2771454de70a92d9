package spec_test

import (
	"strings"
	"testing"

	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// transparentBase is a valid transparent lab; cases replace one line.
const transparentBase = `name: tbad
steering: transparent
hosts: [h1, h2]
endpoints:
  client: {kind: client}
  server: {kind: server}
functions:
  a: {kind: forwarder, ports: {in: net, out: net}}
  b: {kind: forwarder}
  t: {kind: tap}
port_pairs:
  pa: {ingress: a.in, egress: a.out}
  pb: {ingress: b.eth0, egress: b.eth0}
  pt: {ingress: t.eth0, egress: t.eth0}
port_pair_groups:
  ga: {port_pairs: [pa]}
  gb: {port_pairs: [pb]}
  gt: {port_pairs: [pt], tap_enabled: true}
flow_classifiers:
  web: {protocol: tcp, logical_source_port: client.eth0, logical_destination_port: server.eth0}
  dns: {protocol: udp, logical_source_port: client.eth0}
port_chains:
  c1: {flow_classifiers: [web], port_pair_groups: [ga, gt, gb], symmetric: true}
  c2: {flow_classifiers: [dns], port_pair_groups: [gb]}
`

// TestTransparentBadInput: every case of the issue is refused with file:line.
func TestTransparentBadInput(t *testing.T) {
	// On docker, two hosts give the containers ports of sfclab's: a function may have two
	// ports on one network, and a host its own cores, as on netns.
	if _, err := spec.Decode([]byte(strings.NewReplacer("steering: transparent", "steering: transparent\nruntime: docker", "hosts: [h1, h2]", "hosts: [{name: h1, cpus: \"0\"}, h2]").Replace(transparentBase)), "t.yaml", kinds.Spec()); err != nil {
		t.Fatalf("base lab on docker on two hosts: %v", err)
	}
	if _, err := spec.Decode([]byte(transparentBase), "t.yaml", kinds.Spec()); err != nil {
		t.Fatalf("base lab refused: %v", err)
	}
	// A transparent forwarder may forward by the kernel instead of the bump program.
	kfwd := strings.Replace(transparentBase, "b: {kind: forwarder}", "b: {kind: forwarder, params: {datapath: kernel}}", 1)
	if _, err := spec.Decode([]byte(kfwd), "t.yaml", kinds.Spec()); err != nil {
		t.Fatalf("datapath kernel in a transparent lab refused: %v", err)
	}
	// A transparent firewall may offload or not.
	for _, o := range []string{"bpf", "none"} {
		fw := strings.Replace(transparentBase, "b: {kind: forwarder}", "b: {kind: firewall, params: {offload: "+o+"}}", 1)
		if _, err := spec.Decode([]byte(fw), "t.yaml", kinds.Spec()); err != nil {
			t.Fatalf("offload %s in a transparent lab refused: %v", o, err)
		}
	}
	// A transparent lab's ports are dual-stack: a firewall rule may name IPv6 addresses.
	v6fw := strings.Replace(transparentBase, "b: {kind: forwarder}", "b: {kind: firewall, params: {rules: [{action: deny, protocol: tcp, source: 2001:2:0:1::/64}]}}", 1)
	if _, err := spec.Decode([]byte(v6fw), "t.yaml", kinds.Spec()); err != nil {
		t.Fatalf("IPv6 firewall rule in a transparent lab refused: %v", err)
	}
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"no logical source port", "dns: {protocol: udp, logical_source_port: client.eth0}", "dns: {protocol: udp}",
			"t.yaml:21:8: flow classifier dns: the data plane classifies at the traffic's source port: set logical_source_port"},
		{"overlapping classifiers", "dns: {protocol: udp, logical_source_port: client.eth0}", "dns: {logical_source_port: client.eth0}",
			"t.yaml:21:8: flow classifier dns: overlaps flow classifier \"web\" of port chain \"c1\""},
		{"unknown port", "pb: {ingress: b.eth0, egress: b.eth0}", "pb: {ingress: b.eth1, egress: b.eth0}",
			"t.yaml:13:8: port pair pb: no port \"b.eth1\""},
		{"tap first", "port_pair_groups: [ga, gt, gb]", "port_pair_groups: [gt, ga, gb]",
			"t.yaml:23:33: port chain c1: tap group \"gt\" cannot be first"},
		{"IPv4 prefix in an IPv6 classifier", "dns: {protocol: udp, logical_source_port: client.eth0}", "dns: {ethertype: IPv6, protocol: udp, destination_ip_prefix: 198.18.0.0/24, logical_source_port: client.eth0}",
			"t.yaml:21:41: flow classifier dns: prefix family does not match ethertype IPv6"},
		{"IPv6 prefix in an IPv4 classifier", "dns: {protocol: udp, logical_source_port: client.eth0}", "dns: {protocol: udp, source_ip_prefix: 2001:2::1, logical_source_port: client.eth0}",
			"t.yaml:21:24: flow classifier dns: prefix family does not match ethertype IPv4"},
		{"firewall rule of two IP versions", "b: {kind: forwarder}", "b: {kind: firewall, params: {rules: [{action: deny, source: 2001:2::/48, destination: 198.18.0.1}]}}",
			"t.yaml:9:6: function \"b\": rule 1: source 2001:2::/48 and destination 198.18.0.1 are of different IP versions"},
		{"rewriting kind", "b: {kind: forwarder}", "b: {kind: nat, params: {masquerade: true}}",
			"t.yaml:9:6: function \"b\": kind nat rewrites addresses"},
		{"routed chains", "hosts: [h1, h2]", "hosts: [h1, h2]\nchains: [{from: client, to: server}]",
			"chains: is routed steering's"},
		{"transparent fields in a routed lab", "steering: transparent", "steering: routed",
			"needs steering: transparent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(transparentBase, tc.old) {
				t.Fatalf("case does not apply: %q", tc.old)
			}
			_, err := spec.Decode([]byte(strings.Replace(transparentBase, tc.old, tc.new, 1)), "t.yaml", kinds.Spec())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant %q", err, tc.want)
			}
		})
	}
}

// TestTransparentIPv6: an IPv6 classifier (transparent labs are dual-stack) is accepted, with
// an IPv6 prefix, beside an IPv4 classifier of the same fields on the same logical source port
// (the two never match the same packet).
func TestTransparentIPv6(t *testing.T) {
	lab := strings.Replace(transparentBase, "dns: {protocol: udp, logical_source_port: client.eth0}",
		"dns: {protocol: udp, logical_source_port: client.eth0}\n  dns6: {ethertype: IPv6, protocol: udp, destination_ip_prefix: 2001:2::/64, logical_source_port: client.eth0}", 1)
	lab = strings.Replace(lab, "c2: {flow_classifiers: [dns], port_pair_groups: [gb]}", "c2: {flow_classifiers: [dns], port_pair_groups: [gb]}\n  c3: {flow_classifiers: [dns6], port_pair_groups: [ga]}", 1)
	if _, err := spec.Decode([]byte(lab), "t.yaml", kinds.Spec()); err != nil {
		t.Fatalf("IPv6 classifier refused: %v", err)
	}
}

// TestPortPairAcrossHosts: both ports of one instance on different hosts cannot happen in a
// lab file (a node has one host), so the model check is exercised by sfc; here a pair made of
// two nodes' ports on two hosts is refused with its line.
func TestPortPairAcrossHosts(t *testing.T) {
	lab := strings.Replace(transparentBase, "pa: {ingress: a.in, egress: a.out}", "pa: {ingress: a.in, egress: b2.eth0}", 1)
	lab = strings.Replace(lab, "b: {kind: forwarder}", "b: {kind: forwarder}\n  b2: {kind: forwarder, host: h2}", 1)
	_, err := spec.Decode([]byte(lab), "t.yaml", kinds.Spec())
	if err == nil || !strings.Contains(err.Error(), "t.yaml:13:") || !strings.Contains(err.Error(), "both ports of an instance must be on one host") {
		t.Fatalf("err = %v", err)
	}
}

// TestTransparentDocker: a one-host transparent lab is accepted on docker; what docker cannot
// do is refused with its line.
func TestTransparentDocker(t *testing.T) {
	base := strings.Replace(transparentBase, "hosts: [h1, h2]", "runtime: docker\nhosts: [h1]\nnetworks: [net, net2]", 1)
	base = strings.Replace(base, "a: {kind: forwarder, ports: {in: net, out: net}}", "a: {kind: forwarder, ports: {in: net, out: net2}}", 1)
	if _, err := spec.Decode([]byte(base), "t.yaml", kinds.Spec()); err != nil {
		t.Fatalf("one-host docker lab refused: %v", err)
	}
	// The host's cores confine its containers (docker's cpuset).
	if _, err := spec.Decode([]byte(strings.Replace(base, "hosts: [h1]", "hosts: [{name: h1, cpus: \"0\"}]", 1)), "t.yaml", kinds.Spec()); err != nil {
		t.Fatalf("one-host docker lab with cpus refused: %v", err)
	}
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"attach nat", "hosts: [h1]", "hosts: [h1]\ndocker: {attach: nat}",
			"docker attach nat publishes a routed chain's service port"},
		{"two ports on one network", "ports: {in: net, out: net2}", "ports: {in: net, out: net}",
			"t.yaml:10:6: function \"a\": ports in and out are both on network net, and Docker connects a container to a network once"},
		{"tap pcap", "t: {kind: tap}", "t: {kind: tap, params: {pcap: t.pcap}}",
			"function \"t\": pcap: needs tcpdump"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(base, tc.old) {
				t.Fatalf("case does not apply: %q", tc.old)
			}
			_, err := spec.Decode([]byte(strings.Replace(base, tc.old, tc.new, 1)), "t.yaml", kinds.Spec())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant %q", err, tc.want)
			}
		})
	}
	withImage := strings.Replace(base, "t: {kind: tap}", "t: {kind: tap, params: {pcap: t.pcap}}", 1)
	withImage = strings.Replace(withImage, "hosts: [h1]", "hosts: [h1]\ndocker: {image: example.org/node:1}", 1)
	if _, err := spec.Decode([]byte(withImage), "t.yaml", kinds.Spec()); err != nil {
		t.Fatalf("a tap's pcap with the lab's own image refused: %v", err)
	}
}
