package plan

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/sfclab/sfclab/spec"
)

// chainLayout is one chain while it is laid out: the nodes at every position, 0 (source) ..
// H+1 (destination), and segment k joining position k (egress side) and k+1 (ingress side).
type chainLayout struct {
	c    *spec.Chain
	ci   int
	pc   *Chain
	pos  [][]*Node
	segs []*Segment
	on   []map[string]*Interface // per segment: node -> interface
}

// chain lays out one chain, step by step: its positions, its segments and interfaces, the
// routes along it, the classifier at its ends, its functions, and on docker NAT what it
// publishes.
func (b *builder) chain(ci int, c *spec.Chain) {
	l := &chainLayout{c: c, ci: ci, pc: &Chain{Name: c.Name, From: c.From.Name, To: c.To.Name, Classifier: c.Classifier, Table: TableBase + ci}}
	b.chainPositions(l)
	if !b.chainSegments(l) {
		return
	}
	b.chainRoutes(l)
	b.chainClassifier(l)
	b.chainFunctions(l)
	if !b.chainPublish(l) {
		return
	}
	b.plan.Chains = append(b.plan.Chains, l.pc)
}

// chainPositions creates (or finds) the nodes of every position and the chain's hops and path.
func (b *builder) chainPositions(l *chainLayout) {
	c, pc := l.c, l.pc
	H := len(c.Hops)
	l.pos = make([][]*Node, H+2)
	l.pos[0] = b.groupNodes(c.From.Name)
	for k, h := range c.Hops {
		l.pos[k+1] = b.groupNodes(h.Name)
		f := b.lab.Functions[h.Name]
		hop := Hop{Group: h.Name, Kind: f.Kind}
		for _, n := range l.pos[k+1] {
			n.Chain = c.Name
			hop.Instances = append(hop.Instances, n.Name)
		}
		pc.Hops = append(pc.Hops, hop)
	}
	l.pos[H+1] = b.groupNodes(c.To.Name)
	for _, nodes := range l.pos {
		pc.Path = append(pc.Path, nodes[0].Name)
	}
}

// chainSegments gives every segment its subnet, bridge or veth pair, and every member its
// interface and address; false when the chain cannot be laid out (reported).
func (b *builder) chainSegments(l *chainLayout) bool {
	c, pc := l.c, l.pc
	H := len(c.Hops)
	l.segs = make([]*Segment, H+1)
	l.on = make([]map[string]*Interface, H+1) // per segment: node -> interface
	for k := 0; k <= H; k++ {
		var subnet netip.Prefix
		var err error
		if len(c.Subnets) > 0 {
			subnet, _ = spec.ParsePrefix(c.Subnets[k])
		} else if subnet, err = b.alloc.next(); err != nil {
			b.poolFull = b.poolFull || errors.Is(err, errPoolFull)
			b.bad(c.Pos, "chain %q: %v", c.Name, err)
			return false
		}
		g := len(b.plan.Segments)
		s := &Segment{Name: fmt.Sprintf("%s.%d", c.Name, k), Chain: c.Name, Index: k, Subnet: subnet, Shape: shapeOf(c, k)}
		members := append(append([]*Node(nil), l.pos[k]...), l.pos[k+1]...)
		docker := b.lab.Traits().Containers
		// A segment with a member attached by another driver than veth is a bridge: the
		// macvlan's (or a VM's macvtap's) parent, or where the moved device's far end is
		// reached.
		// On emulated hosts every segment is a bridge per host (joined by VXLAN when its
		// members are on several).
		if len(members) > 2 || b.lab.Links == "bridge" || docker || hasDriver(members) || len(b.lab.Hosts) > 0 {
			s.Bridge = fmt.Sprintf("br%d", g)
		}
		if docker && len(b.lab.Hosts) == 0 { // a Docker network (on hosts: sfclab's bridges)
			s.Gateway = lastHost(subnet)
			if len(members)+1 >= 1<<(32-subnet.Bits())-1 {
				b.bad(c.Pos, "chain %q: subnet %s has no room for the Docker gateway beside %d members", c.Name, subnet, len(members))
				return false
			}
		}
		l.on[k] = map[string]*Interface{}
		host := subnet.Addr()
		for mi, n := range members {
			host = host.Next()
			if !subnet.Contains(host.Next()) { // keep the broadcast address free
				b.bad(c.Pos, "chain %q: subnet %s is too small for %d members", c.Name, subnet, len(members))
				return false
			}
			iface := &Interface{Segment: s.Name, Address: netip.PrefixFrom(host, subnet.Bits())}
			switch {
			case n.Role != RoleFunction:
			case mi < len(l.pos[k]):
				iface.Name, iface.Side = "egress", "egress"
			default:
				iface.Name, iface.Side = "ingress", "ingress"
			}
			// Endpoints name their interfaces eth0, eth1, ... per chain; so do containers
			// (docker): the engine names them so in attach order, and its stats collector
			// finds them only under those names.
			if iface.Name == "" || docker {
				iface.Name = fmt.Sprintf("eth%d", b.ifCount[n.Name])
				b.ifCount[n.Name]++
			}
			n.Interfaces = append(n.Interfaces, iface)
			l.on[k][n.Name] = iface
			s.Members = append(s.Members, n.Name+"/"+iface.Name)
			if s.Bridge != "" {
				port := fmt.Sprintf("s%dp%d", g, mi)
				s.Ports = append(s.Ports, port)
				where := "fabric/"
				if n.Host != "" {
					where = "host-" + n.Host + "/"
				}
				iface.Peer = where + port
				if (n.Driver != nil && n.Driver.Type != spec.DriverEBPFRedirect) || n.VM.Macvtap() { // no port of its own: on the bridge itself (macvlan, macvtap), or a moved device
					iface.Peer = where + s.Bridge
				}
			}
		}
		if s.Bridge == "" {
			a, z := members[0], members[1]
			l.on[k][a.Name].Peer = z.Name + "/" + l.on[k][z.Name].Name
			l.on[k][z.Name].Peer = a.Name + "/" + l.on[k][a.Name].Name
		}
		l.segs[k] = s
		b.plan.Segments = append(b.plan.Segments, s)
		pc.Segments = append(pc.Segments, s.Name)
	}

	return true
}

// chainRoutes routes every node towards every segment beyond its neighbours, through them
// (aggregated).
func (b *builder) chainRoutes(l *chainLayout) {
	pc, segs := l.pc, l.segs
	H := len(l.c.Hops)
	for p, nodes := range l.pos {
		for _, n := range nodes {
			table := 0
			if n.Role != RoleFunction {
				table = pc.Table
			}
			if p < H {
				var beyond []netip.Prefix
				for j := p + 1; j <= H; j++ {
					beyond = append(beyond, segs[j].Subnet)
				}
				hops := nextHops(l.pos[p+1], l.on[p], l.on[p][n.Name].Name)
				for _, dst := range aggregate(beyond) {
					n.Routes = append(n.Routes, Route{Dst: dst, Table: table, NextHops: hops})
				}
			}
			if p >= 2 {
				var behind []netip.Prefix
				for j := 0; j <= p-2; j++ {
					behind = append(behind, segs[j].Subnet)
				}
				hops := nextHops(l.pos[p-1], l.on[p-1], l.on[p-1][n.Name].Name)
				for _, dst := range aggregate(behind) {
					n.Routes = append(n.Routes, Route{Dst: dst, Table: table, NextHops: hops})
				}
			}
		}
	}

}

// chainClassifier installs the classifier at the chain's ends, as policy routing rules.
func (b *builder) chainClassifier(l *chainLayout) {
	c, pc, ci := l.c, l.pc, l.ci
	H := len(c.Hops)
	cl := c.Classifier
	fwd := Rule{Priority: RulePriorityBase + ci, Table: pc.Table, Protocol: cl.Protocol,
		SrcPort: cl.SourcePort, DstPort: cl.DestinationPort}
	if cl.SourcePrefix != "" {
		fwd.Src, _ = spec.ParsePrefix(cl.SourcePrefix)
	}
	if cl.DestinationPrefix != "" {
		fwd.Dst, _ = spec.ParsePrefix(cl.DestinationPrefix)
	}
	l.pos[0][0].Rules = append(l.pos[0][0].Rules, fwd)
	rev := Rule{Priority: fwd.Priority, Table: fwd.Table, Protocol: fwd.Protocol,
		SrcPort: fwd.DstPort, DstPort: fwd.SrcPort, Src: fwd.Dst, Dst: fwd.Src}
	for _, n := range l.pos[H+1] {
		n.Rules = append(n.Rules, rev)
	}

}

// chainFunctions gives every function instance its port pair and what its kind needs, and
// finds the chain's target (the first proxy, or the destination).
func (b *builder) chainFunctions(l *chainLayout) {
	c, pc := l.c, l.pc
	H := len(c.Hops)
	pc.TargetNode = l.pos[H+1][0].Name
	pc.Target = l.on[H][pc.TargetNode].Address.Addr()
	for k := 1; k <= H; k++ {
		f := b.lab.Functions[c.Hops[k-1].Name]
		for _, n := range l.pos[k] {
			in, out := l.on[k-1][n.Name], l.on[k][n.Name]
			n.Function = &Function{Kind: f.Kind, Params: f.Params, Ingress: in.Name, Egress: out.Name,
				IngressAddr: in.Address.Addr(), EgressAddr: out.Address.Addr()}
			b.function(c, f, n, l.pos[H+1], l.on[H], l.pos[0][0], l.on[0])
		}
		if _, proxy := f.Params.(spec.Proxy); proxy && pc.TargetNode == l.pos[H+1][0].Name {
			pc.TargetNode = l.pos[k][0].Name
			pc.Target = l.on[k-1][pc.TargetNode].Address.Addr()
			pc.Port = l.pos[k][0].Function.Port
		}
	}
	if pc.Port == 0 && c.Classifier.DestinationPort.Single() {
		pc.Port = c.Classifier.DestinationPort.From
	}
}

// chainPublish makes the source reach the target through the port Docker publishes (attach
// nat); false when the chain cannot be published (reported).
func (b *builder) chainPublish(l *chainLayout) bool {
	c, pc := l.c, l.pc
	if b.lab.Traits().Containers && b.lab.Docker.Attach == spec.AttachNAT {
		// The source reaches the target through the port Docker publishes on the host's
		// address on the source's network.
		if pc.TargetNode != l.pos[1][0].Name {
			b.bad(c.Pos, "chain %q: docker attach nat publishes the service on the source's network: the target %s must be the chain's first hop (a proxy) or its destination", c.Name, pc.TargetNode)
			return false
		}
		if pc.Port == 0 {
			b.bad(c.Pos, "chain %q: docker attach nat needs a port to publish: a proxy's port or a single destination_port in the classifier", c.Name)
			return false
		}
		b.plan.Publish = append(b.plan.Publish, Publish{Node: pc.TargetNode, Protocol: "tcp", Port: pc.Port, HostIP: l.segs[0].Gateway, HostPort: pc.Port})
		pc.Target = l.segs[0].Gateway
	}
	return true
}
