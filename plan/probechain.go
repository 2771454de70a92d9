package plan

import (
	"fmt"
	"strings"

	"github.com/sfclab/sfclab/spec"
)

// DirectChain is the name ProbeChain gives the path of a transparent lab without port
// chains: its one client straight to its one server (study C's C0).
const DirectChain = "direct"

// ProbeChain returns the chain a probe measures: a routed lab's chain of that name (its first
// for ""), or, for a transparent lab, a view of the port chain of that name as a Chain, which
// the plan itself does not hold: From and To are the nodes of its first flow classifier's
// logical source and destination ports, Path the source, the first instance of every group
// (taps left out: they only get copies) and the destination, Target the destination port's
// address, Port the classifier's single destination port. A transparent lab without port
// chains has DirectChain: its client to its server, nothing between.
func (p *Plan) ProbeChain(name string) (*Chain, error) {
	if p.Transparent == nil {
		if name == "" && len(p.Chains) > 0 {
			return p.Chains[0], nil
		}
		if c := p.Chain(name); c != nil {
			return c, nil
		}
		return nil, fmt.Errorf("find chain: lab %s has no chain %q", p.Lab, name)
	}
	t := p.Transparent
	m := t.Model
	if len(m.PortChains) == 0 {
		if name != "" && name != DirectChain {
			return nil, fmt.Errorf("find chain %q in lab %s: the lab has no port chains, only %q (its client to its server)", name, p.Lab, DirectChain)
		}
		return t.direct(p.Lab)
	}
	pc := m.PortChains[0]
	if name != "" {
		found := false
		for _, c := range m.PortChains {
			if c.Name == name {
				pc, found = c, true
			}
		}
		if !found {
			var names []string
			for _, c := range m.PortChains {
				names = append(names, c.Name)
			}
			return nil, fmt.Errorf("find chain %q in lab %s: no such port chain (port chains: %s)", name, p.Lab, strings.Join(names, ", "))
		}
	}
	if len(pc.FlowClassifiers) == 0 {
		return nil, fmt.Errorf("find chain %s in lab %s: it has no flow classifier", pc.Name, p.Lab)
	}
	var fc *struct{ src, dst string }
	c := &Chain{Name: pc.Name}
	for _, f := range m.FlowClassifiers {
		if f.Name != pc.FlowClassifiers[0] {
			continue
		}
		fc = &struct{ src, dst string }{f.LogicalSourcePort, f.LogicalDestinationPort}
		c.Classifier = spec.Classifier{Protocol: f.Protocol}
		if f.DestinationPortRangeMin != 0 && f.DestinationPortRangeMin == f.DestinationPortRangeMax {
			c.Port = uint16(f.DestinationPortRangeMin)
			c.Classifier.DestinationPort = spec.PortRange{From: c.Port, To: c.Port}
		}
	}
	if fc == nil || fc.src == "" || fc.dst == "" {
		return nil, fmt.Errorf("find chain %s in lab %s: a probe needs its first flow classifier to name a logical source and a logical destination port", pc.Name, p.Lab)
	}
	src, _, _ := strings.Cut(fc.src, ".")
	dst, _, _ := strings.Cut(fc.dst, ".")
	c.From, c.To, c.Path = src, dst, []string{src}
	for _, g := range pc.PortPairGroups {
		for _, grp := range m.PortPairGroups {
			if grp.Name != g || len(grp.PortPairs) == 0 {
				continue
			}
			h := Hop{Group: g}
			for _, ppName := range grp.PortPairs {
				for _, pp := range m.PortPairs {
					if pp.Name == ppName {
						node, _, _ := strings.Cut(pp.Ingress, ".")
						h.Instances = append(h.Instances, node)
					}
				}
			}
			if len(h.Instances) > 0 {
				if n := t.Node(h.Instances[0]); n != nil {
					h.Kind = n.Kind
				}
				if !grp.TapEnabled {
					c.Path = append(c.Path, h.Instances[0])
				}
			}
			c.Hops = append(c.Hops, h)
		}
	}
	c.Path = append(c.Path, dst)
	if err := t.target(c, fc.dst); err != nil {
		return nil, fmt.Errorf("find chain %s in lab %s: %w", pc.Name, p.Lab, err)
	}
	return c, nil
}

// direct is the DirectChain of a transparent lab without port chains.
func (t *Transparent) direct(lab string) (*Chain, error) {
	var clients, servers []*TNode
	for _, n := range t.Nodes {
		switch n.Role {
		case RoleClient:
			clients = append(clients, n)
		case RoleServer:
			servers = append(servers, n)
		}
	}
	if len(clients) != 1 || len(servers) != 1 || len(servers[0].Ports) == 0 {
		return nil, fmt.Errorf("find chain %s in lab %s: without port chains a probe needs exactly one client and one server with a port (found %d and %d)",
			DirectChain, lab, len(clients), len(servers))
	}
	c := &Chain{Name: DirectChain, From: clients[0].Name, To: servers[0].Name, Path: []string{clients[0].Name, servers[0].Name}}
	return c, t.target(c, servers[0].Ports[0].Name)
}

// target sets c.Target and c.TargetNode to the address of port (NODE.IFNAME).
func (t *Transparent) target(c *Chain, port string) error {
	node, _, _ := strings.Cut(port, ".")
	if n := t.Node(node); n != nil {
		for _, pt := range n.Ports {
			if pt.Name == port {
				c.Target, c.TargetNode = pt.Address.Addr(), node
				return nil
			}
		}
	}
	return fmt.Errorf("logical destination port %s is no port of the lab", port)
}
