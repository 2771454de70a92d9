package kubernetes

import (
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/sfclab/sfclab/hosts"
)

// The wiring of a lab across Kubernetes nodes (not enabled yet: placement still refuses a
// lab on more than one node, docs/kubernetes.md): each node's agent builds its half of the
// lab's topology, hosts.Topology.Local, whose VXLAN devices it creates in the node's own
// network namespace on the device that holds the node's address and floods to the other
// nodes' addresses.

// nodeHalves splits a lab's topology (in its slot) into one part per Kubernetes node, by
// node: the part builds only the emulated host whose nodes run on that Kubernetes node
// (Local), and every host's underlay address is its Kubernetes node's InternalIP (addrs, by
// Kubernetes node). hostNode maps each emulated host of the topology to its Kubernetes node;
// two hosts on one Kubernetes node, or a host without an address, are refused.
func nodeHalves(topo *hosts.Topology, hostNode map[string]string, addrs map[string]netip.Addr) (map[string]*hosts.Topology, error) {
	byNode := map[string]string{} // Kubernetes node -> host
	hs := slices.Clone(topo.Hosts)
	for i, h := range hs {
		kn := hostNode[h.Name]
		if kn == "" {
			return nil, fmt.Errorf("split the topology of lab %s: host %s is on no Kubernetes node", topo.Lab, h.Name)
		}
		if other, dup := byNode[kn]; dup {
			return nil, fmt.Errorf("split the topology of lab %s: hosts %s and %s are both on Kubernetes node %s (one host per node)", topo.Lab, other, h.Name, kn)
		}
		byNode[kn] = h.Name
		a, ok := addrs[kn]
		if !ok || !a.IsValid() {
			return nil, fmt.Errorf("split the topology of lab %s: Kubernetes node %s has no InternalIP for its VXLAN devices", topo.Lab, kn)
		}
		hs[i].Underlay = netip.PrefixFrom(a, a.BitLen())
	}
	out := map[string]*hosts.Topology{}
	for kn, h := range byNode {
		part := *topo
		part.Hosts = hs
		part.Local = h
		part.UnderlayNS = "" // the agent's: the node's own network namespace
		part.UnderlayIf = "" // found by the agent: the device holding the node's address
		out[kn] = &part
	}
	return out, nil
}

// underlayDevice names the device of the agent's namespace (the node's) that holds addr: a
// node's half of a topology creates its VXLAN devices on it.
func underlayDevice(addr netip.Addr) (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("find the node's device with address %s: %w", addr, err)
	}
	for _, i := range ifs {
		as, err := i.Addrs()
		if err != nil {
			continue
		}
		for _, a := range as {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr() == addr {
				return i.Name, nil
			}
		}
	}
	return "", fmt.Errorf("find the node's device with address %s: none holds it", addr)
}

// localUnderlay fills in a node's half of a topology on its node: the device that holds
// the Local host's underlay address, when the half names none.
func localUnderlay(t *hosts.Topology) error {
	if t.Local == "" || t.UnderlayIf != "" {
		return nil
	}
	for _, h := range t.Hosts {
		if h.Name == t.Local {
			dev, err := underlayDevice(h.Underlay.Addr())
			if err != nil {
				return fmt.Errorf("build host %s of lab %s: %w", h.Name, t.Lab, err)
			}
			t.UnderlayIf = dev
			return nil
		}
	}
	return fmt.Errorf("build host %s of lab %s: %w", t.Local, t.Lab, hosts.ErrNoHost)
}
