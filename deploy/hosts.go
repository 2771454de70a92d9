package deploy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/hosts"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/spec"
)

// hostTopology is what package hosts builds for a routed lab on emulated hosts: every
// segment is a network (its bridge on each host that has a member, VXLAN between them), every
// node interface a port (a veth to its host's bridge, or a macvlan on it, or for a VM node
// with vm: {backend: macvtap} a macvtap on it).
func hostTopology(p *plan.Plan) *hosts.Topology {
	topo := &hosts.Topology{Lab: p.Lab, NodesExist: true, NoSteering: !p.Redirects()}
	for _, h := range p.Hosts {
		cores, _ := cgroup.ParseCPUs(h.CPUs) // "" gives none
		topo.Hosts = append(topo.Hosts, hosts.Host{Name: h.Name, ID: h.ID, Underlay: h.Underlay, CPUs: cores})
	}
	port := map[string]string{} // node/ifname -> host-side port
	for i, s := range p.Segments {
		net := hosts.Network{Name: s.Name, Bridge: s.Bridge, VNI: uint32(SegmentVNIBase + i), Hosts: []string{}}
		for mi, m := range s.Members {
			node, _, _ := strings.Cut(m, "/")
			h := p.Node(node).Host
			if !slices.Contains(net.Hosts, h) {
				net.Hosts = append(net.Hosts, h)
			}
			if mi < len(s.Ports) {
				port[m] = s.Ports[mi]
			}
		}
		topo.Networks = append(topo.Networks, net)
	}
	for _, n := range p.Nodes {
		hn := hosts.Node{Name: n.Name, Host: n.Host}
		for _, i := range n.Interfaces {
			hn.Ports = append(hn.Ports, hosts.Port{Ifname: i.Name, HostIf: port[n.Name+"/"+i.Name], Network: i.Segment,
				Macvlan: n.Driver != nil && n.Driver.Type == spec.DriverMacvlan,
				Macvtap: n.VM.Macvtap() || (n.Driver != nil && n.Driver.Type == spec.DriverMacvtap)})
		}
		topo.Nodes = append(topo.Nodes, hn)
	}
	return topo
}

// SegmentVNIBase is the VXLAN id of a routed lab's first segment between hosts.
const SegmentVNIBase = 1000

// linkHosts wires a routed lab placed on emulated hosts (package hosts), then addresses the
// interfaces, in place of the runtime's Link: the nodes are namespaces or containers
// started without a network, named sfc.LAB.NODE either way (Plan.HostPorts). A runtime that
// wires segments where its nodes run (SegmentWirer) builds the hosts instead.
func linkHosts(ctx context.Context, rt runtime.Runtime, p *plan.Plan, ns map[string]*netdev.NS, undo runtime.Undo) error {
	if w, ok := rt.(SegmentWirer); ok {
		if _, err := w.BuildHosts(ctx, p, hostTopology(p), undo); err != nil {
			return err
		}
	} else {
		built, err := hosts.Build(hostTopology(p), undo)
		if built != nil {
			defer built.Close()
		}
		if err != nil {
			return err
		}
	}
	if r := remote(rt); r != nil {
		set := map[string]netdev.Settings{}
		for _, n := range p.Nodes {
			var s netdev.Settings
			for _, i := range n.Interfaces {
				s.Addrs = append(s.Addrs, netdev.IfAddr{Link: i.Name, Prefix: i.Address})
			}
			set[n.Name] = s
		}
		return r.Configure(ctx, p, set)
	}
	for _, n := range p.Nodes {
		for _, i := range n.Interfaces {
			if err := ns[n.Name].AddAddr(i.Name, i.Address); err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
			if err := ns[n.Name].SetUp(i.Name); err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
	}
	return nil
}
