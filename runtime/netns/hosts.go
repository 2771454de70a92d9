package netns

import (
	"fmt"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/hosts"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/spec"
)

// checkHosts refuses, before anything is created, hosts whose cores this machine cannot give:
// no cpuset controller, or a core that does not exist. The error starts with the host's place
// in the lab file.
func checkHosts(p *plan.Plan) error {
	for _, h := range p.AllHosts() {
		if h.CPUs == "" {
			continue
		}
		err := cgroup.CPUsAvailable()
		if err == nil {
			err = cgroup.CheckCPUs(h.CPUs)
		}
		if err != nil {
			where := h.Where
			if where == "" {
				where = "lab " + p.Lab
			}
			return fmt.Errorf("%s: host %s: cpus: %w", where, h.Name, err)
		}
	}
	return nil
}

// confine puts a node's cgroup on its host's cores, if the host has any.
func confine(p *plan.Plan, node string, cg *cgroup.Group) error {
	h := p.HostOf(node)
	if h == nil || h.CPUs == "" {
		return nil
	}
	if err := cg.SetCPUs(h.CPUs); err != nil {
		return fmt.Errorf("node %s on host %s: %w", node, h.Name, err)
	}
	return nil
}

// hostTopology is what package hosts builds for a routed lab on emulated hosts: every
// segment is a network (its bridge on each host that has a member, VXLAN between them), every
// node interface a port (a veth to its host's bridge, or a macvlan on it).
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
			node, _ := splitMember(m)
			h := p.Node(node).Host
			if !contains(net.Hosts, h) {
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
				Macvlan: n.Driver != nil && n.Driver.Type == spec.DriverMacvlan})
		}
		topo.Nodes = append(topo.Nodes, hn)
	}
	return topo
}

// SegmentVNIBase is the VXLAN id of a routed lab's first segment between hosts.
const SegmentVNIBase = 1000

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// linkHosts wires a routed lab placed on emulated hosts (package hosts), then addresses the
// interfaces as Link does.
func linkHosts(p *plan.Plan, ns map[string]*netdev.NS, undo runtime.Undo) error {
	built, err := hosts.Build(hostTopology(p), undo)
	if built != nil {
		defer built.Close()
	}
	if err != nil {
		return err
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
