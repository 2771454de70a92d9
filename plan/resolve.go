package plan

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/sfclab/sfclab/spec"
)

// Routing tables and rule priorities used at chain ends: chain i uses table TableBase+i,
// selected by a rule of priority RulePriorityBase+i.
const (
	TableBase        = 100
	RulePriorityBase = 1000
)

// Build resolves a validated lab into a plan. Problems only visible once the chains are laid
// out (a load balancer with no port, a pool too small) come back as spec.Errors.
func Build(lab *spec.Lab) (*Plan, error) {
	b := &builder{lab: lab, nodes: map[string]*Node{}, ifCount: map[string]int{}}
	b.build()
	if len(b.errs) > 0 {
		return nil, b.errs
	}
	return b.plan, nil
}

type builder struct {
	lab     *spec.Lab
	plan    *Plan
	nodes   map[string]*Node
	ifCount map[string]int // endpoint node -> interfaces so far
	alloc   *allocator
	errs    spec.Errors
}

func (b *builder) bad(p spec.Pos, format string, args ...any) {
	b.errs = append(b.errs, &spec.Error{File: b.lab.File, Pos: p, Msg: fmt.Sprintf(format, args...)})
}

func (b *builder) build() {
	lab := b.lab
	b.plan = &Plan{Lab: lab.Name, Runtime: lab.Runtime, Steering: lab.Steering, MTU: lab.MTU}
	if lab.Runtime == spec.RuntimeDocker {
		b.plan.Image, b.plan.Attach = lab.Docker.Image, lab.Docker.Attach
	}
	pool, _ := spec.ParsePrefix(lab.Addressing.Pool)
	var pinned []netip.Prefix
	for _, c := range lab.Chains {
		for _, s := range c.Subnets {
			p, _ := spec.ParsePrefix(s)
			pinned = append(pinned, p)
		}
	}
	b.alloc = &allocator{pool: pool, bits: lab.Addressing.Prefix, pinned: pinned}
	for ci, c := range lab.Chains {
		b.chain(ci, c)
	}
	for _, name := range sortedNames(lab.Endpoints) {
		if _, used := b.nodes[instanceName(name, 1, lab.Endpoints[name].Instances)]; !used {
			b.bad(lab.Endpoints[name].Pos, "endpoint %q is in no chain; use it as a chain's from or to, or remove it", name)
		}
	}
	for _, n := range b.plan.Nodes {
		b.sysctls(n)
	}
	for _, s := range b.plan.Segments {
		if s.Bridge != "" && lab.Runtime != spec.RuntimeDocker {
			b.plan.Fabric = FabricName(lab.Name)
		}
	}
}

// instanceName names instance i (1-based) of a group of n.
func instanceName(group string, i, n int) string {
	if n == 1 {
		return group
	}
	return fmt.Sprintf("%s-%d", group, i)
}

// groupNodes returns (creating on first use) the nodes of an endpoint or function.
func (b *builder) groupNodes(name string) []*Node {
	lab := b.lab
	var role, kind string
	var instances int
	var run []string
	var wts []int
	var service *Function
	if e := lab.Endpoints[name]; e != nil {
		role, kind, instances, wts = RoleServer, e.Kind, e.Instances, e.Weights
		if e.Kind == spec.EndpointClient {
			role = RoleClient
		}
		if e.Kind == spec.EndpointHTTPServer {
			service = &Function{Kind: e.Kind, Params: e.HTTP}
		}
		run = e.Run
	} else {
		f := lab.Functions[name]
		role, kind, instances, wts = RoleFunction, f.Kind, f.Instances, f.Weights
	}
	out := make([]*Node, instances)
	for i := range instances {
		nn := instanceName(name, i+1, instances)
		n := b.nodes[nn]
		if n == nil {
			w := 1
			if len(wts) > 0 {
				w = wts[i]
			}
			n = &Node{Name: nn, Role: role, Kind: kind, Group: name, Instance: i + 1, Weight: w,
				Netns: NetnsName(lab.Name, nn), Run: append([]string(nil), run...)}
			if service != nil {
				svc := *service
				n.Function = &svc
			}
			b.nodes[nn] = n
			b.plan.Nodes = append(b.plan.Nodes, n)
		}
		out[i] = n
	}
	return out
}

// chain lays out one chain: positions 0 (source) .. H+1 (destination), segment k joins
// position k (egress side) and k+1 (ingress side).
func (b *builder) chain(ci int, c *spec.Chain) {
	H := len(c.Hops)
	pc := &Chain{Name: c.Name, From: c.From.Name, To: c.To.Name, Classifier: c.Classifier, Table: TableBase + ci}
	positions := make([][]*Node, H+2)
	positions[0] = b.groupNodes(c.From.Name)
	for k, h := range c.Hops {
		positions[k+1] = b.groupNodes(h.Name)
		f := b.lab.Functions[h.Name]
		hop := Hop{Group: h.Name, Kind: f.Kind}
		for _, n := range positions[k+1] {
			n.Chain = c.Name
			hop.Instances = append(hop.Instances, n.Name)
		}
		pc.Hops = append(pc.Hops, hop)
	}
	positions[H+1] = b.groupNodes(c.To.Name)
	for _, nodes := range positions {
		pc.Path = append(pc.Path, nodes[0].Name)
	}

	// Segments and interfaces.
	segs := make([]*Segment, H+1)
	ifaceOn := make([]map[string]*Interface, H+1) // per segment: node -> interface
	for k := 0; k <= H; k++ {
		var subnet netip.Prefix
		var err error
		if len(c.Subnets) > 0 {
			subnet, _ = spec.ParsePrefix(c.Subnets[k])
		} else if subnet, err = b.alloc.next(); err != nil {
			b.bad(c.Pos, "chain %q: %v", c.Name, err)
			return
		}
		g := len(b.plan.Segments)
		s := &Segment{Name: fmt.Sprintf("%s.%d", c.Name, k), Chain: c.Name, Index: k, Subnet: subnet}
		members := append(append([]*Node(nil), positions[k]...), positions[k+1]...)
		docker := b.lab.Runtime == spec.RuntimeDocker
		if len(members) > 2 || b.lab.Links == "bridge" || docker {
			s.Bridge = fmt.Sprintf("br%d", g)
		}
		if docker {
			s.Gateway = lastHost(subnet)
			if len(members)+1 >= 1<<(32-subnet.Bits())-1 {
				b.bad(c.Pos, "chain %q: subnet %s has no room for the Docker gateway beside %d members", c.Name, subnet, len(members))
				return
			}
		}
		ifaceOn[k] = map[string]*Interface{}
		host := subnet.Addr()
		for mi, n := range members {
			host = host.Next()
			if !subnet.Contains(host.Next()) { // keep the broadcast address free
				b.bad(c.Pos, "chain %q: subnet %s is too small for %d members", c.Name, subnet, len(members))
				return
			}
			iface := &Interface{Segment: s.Name, Address: netip.PrefixFrom(host, subnet.Bits())}
			switch {
			case n.Role != RoleFunction:
			case mi < len(positions[k]):
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
			ifaceOn[k][n.Name] = iface
			s.Members = append(s.Members, n.Name+"/"+iface.Name)
			if s.Bridge != "" {
				port := fmt.Sprintf("s%dp%d", g, mi)
				s.Ports = append(s.Ports, port)
				iface.Peer = "fabric/" + port
			}
		}
		if s.Bridge == "" {
			a, z := members[0], members[1]
			ifaceOn[k][a.Name].Peer = z.Name + "/" + ifaceOn[k][z.Name].Name
			ifaceOn[k][z.Name].Peer = a.Name + "/" + ifaceOn[k][a.Name].Name
		}
		segs[k] = s
		b.plan.Segments = append(b.plan.Segments, s)
		pc.Segments = append(pc.Segments, s.Name)
	}

	// Routes: towards every segment beyond the neighbours, through them (aggregated).
	for p, nodes := range positions {
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
				hops := nextHops(positions[p+1], ifaceOn[p], ifaceOn[p][n.Name].Name)
				for _, dst := range aggregate(beyond) {
					n.Routes = append(n.Routes, Route{Dst: dst, Table: table, NextHops: hops})
				}
			}
			if p >= 2 {
				var behind []netip.Prefix
				for j := 0; j <= p-2; j++ {
					behind = append(behind, segs[j].Subnet)
				}
				hops := nextHops(positions[p-1], ifaceOn[p-1], ifaceOn[p-1][n.Name].Name)
				for _, dst := range aggregate(behind) {
					n.Routes = append(n.Routes, Route{Dst: dst, Table: table, NextHops: hops})
				}
			}
		}
	}

	// The classifier at the chain's ends, as policy routing rules.
	cl := c.Classifier
	fwd := Rule{Priority: RulePriorityBase + ci, Table: pc.Table, Protocol: cl.Protocol,
		SrcPort: cl.SourcePort, DstPort: cl.DestinationPort}
	if cl.SourcePrefix != "" {
		fwd.Src, _ = spec.ParsePrefix(cl.SourcePrefix)
	}
	if cl.DestinationPrefix != "" {
		fwd.Dst, _ = spec.ParsePrefix(cl.DestinationPrefix)
	}
	positions[0][0].Rules = append(positions[0][0].Rules, fwd)
	rev := Rule{Priority: fwd.Priority, Table: fwd.Table, Protocol: fwd.Protocol,
		SrcPort: fwd.DstPort, DstPort: fwd.SrcPort, Src: fwd.Dst, Dst: fwd.Src}
	for _, n := range positions[H+1] {
		n.Rules = append(n.Rules, rev)
	}

	// Functions: their port pairs and what their kind needs.
	pc.TargetNode = positions[H+1][0].Name
	pc.Target = ifaceOn[H][pc.TargetNode].Address.Addr()
	for k := 1; k <= H; k++ {
		f := b.lab.Functions[c.Hops[k-1].Name]
		for _, n := range positions[k] {
			in, out := ifaceOn[k-1][n.Name], ifaceOn[k][n.Name]
			n.Function = &Function{Kind: f.Kind, Params: f.Params, Ingress: in.Name, Egress: out.Name,
				IngressAddr: in.Address.Addr(), EgressAddr: out.Address.Addr()}
			b.function(c, f, n, positions[H+1], ifaceOn[H], positions[0][0], ifaceOn[0])
		}
		if IsProxy(f.Kind) && pc.TargetNode == positions[H+1][0].Name {
			pc.TargetNode = positions[k][0].Name
			pc.Target = ifaceOn[k-1][pc.TargetNode].Address.Addr()
			pc.Port = positions[k][0].Function.Port
		}
	}
	if pc.Port == 0 && c.Classifier.DestinationPort.Single() {
		pc.Port = c.Classifier.DestinationPort.From
	}
	if b.lab.Runtime == spec.RuntimeDocker && b.lab.Docker.Attach == spec.AttachNAT {
		// The source reaches the target through the port Docker publishes on the host's
		// address on the source's network.
		if pc.TargetNode != positions[1][0].Name {
			b.bad(c.Pos, "chain %q: docker attach nat publishes the service on the source's network: the target %s must be the chain's first hop (a proxy) or its destination", c.Name, pc.TargetNode)
			return
		}
		if pc.Port == 0 {
			b.bad(c.Pos, "chain %q: docker attach nat needs a port to publish: a proxy's port or a single destination_port in the classifier", c.Name)
			return
		}
		b.plan.Publish = append(b.plan.Publish, Publish{Node: pc.TargetNode, Protocol: "tcp", Port: pc.Port, HostIP: segs[0].Gateway, HostPort: pc.Port})
		pc.Target = segs[0].Gateway
	}
	b.plan.Chains = append(b.plan.Chains, pc)
}

// lastHost is the last usable address of a subnet (the one before broadcast).
func lastHost(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v |= 1<<(32-p.Bits()) - 1
	v--
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// nextHops lists the gateways of a route through the nodes of one position.
func nextHops(via []*Node, on map[string]*Interface, dev string) []NextHop {
	out := make([]NextHop, 0, len(via))
	for _, v := range via {
		out = append(out, NextHop{Via: on[v.Name].Address.Addr(), Dev: dev, Weight: v.Weight})
	}
	return out
}

// function resolves what a function kind needs beyond its port pair.
func (b *builder) function(c *spec.Chain, f *spec.Function, n *Node, dst []*Node, dstOn map[string]*Interface, src *Node, srcOn map[string]*Interface) {
	switch p := f.Params.(type) {
	case *spec.L4LBParams:
		port := p.Port
		if port == 0 {
			if !c.Classifier.DestinationPort.Single() {
				b.bad(f.Pos, "function %q: l4lb needs a port: set params.port, or a single destination_port in chain %q's classifier", f.Name, c.Name)
				return
			}
			port = c.Classifier.DestinationPort.From
		}
		bport := p.BackendPort
		if bport == 0 {
			bport = port
		}
		n.Function.Port = port
		for _, d := range dst {
			n.Function.Backends = append(n.Function.Backends, Backend{Name: d.Name, Addr: dstOn[d.Name].Address.Addr(), Port: bport, Weight: d.Weight})
		}
	case *spec.HTTPProxyParams:
		n.Function.Port = p.Port
		for _, d := range dst {
			port := uint16(80)
			if d.Function != nil {
				if h, ok := d.Function.Params.(*spec.HTTPServer); ok {
					port = h.Port
				}
			}
			n.Function.Backends = append(n.Function.Backends, Backend{Name: d.Name, Addr: dstOn[d.Name].Address.Addr(), Port: port, Weight: d.Weight})
		}
	case *spec.NATParams:
		for _, d := range p.DNAT {
			var to netip.Addr
			switch d.To {
			case c.To.Name:
				to = dstOn[dst[0].Name].Address.Addr()
			case c.From.Name:
				to = srcOn[src.Name].Address.Addr()
			default:
				a, err := netip.ParseAddr(d.To)
				if err != nil || !a.Is4() {
					b.bad(f.Pos, "function %q: dnat to %q is neither chain %q's from/to endpoint nor an IPv4 address", f.Name, d.To, c.Name)
					continue
				}
				to = a
			}
			n.Function.DNAT = append(n.Function.DNAT, DNAT{Protocol: d.Protocol, Port: d.Port, To: to, ToPort: d.ToPort})
		}
	}
}

// sysctls sets what every node needs: forwarding in functions, no reverse-path filter on
// multi-homed nodes, and L4 hashing where a route has several next hops.
func (b *builder) sysctls(n *Node) {
	set := func(k, v string) { n.Sysctls = append(n.Sysctls, Sysctl{Key: k, Value: v}) }
	forward := n.Role == RoleFunction
	if p, ok := n.paramsCustom(); ok && p.Forward != nil {
		forward = *p.Forward
	}
	if forward {
		set("net.ipv4.ip_forward", "1")
	}
	// Labs are IPv4: no IPv6 link-local chatter in the counters.
	set("net.ipv6.conf.all.disable_ipv6", "1")
	set("net.ipv6.conf.default.disable_ipv6", "1")
	set("net.ipv4.conf.all.rp_filter", "0")
	set("net.ipv4.conf.default.rp_filter", "0")
	for _, r := range n.Routes {
		if len(r.NextHops) > 1 {
			set("net.ipv4.fib_multipath_hash_policy", "1")
			break
		}
	}
}

func (n *Node) paramsCustom() (*spec.CustomParams, bool) {
	if n.Function == nil {
		return nil, false
	}
	p, ok := n.Function.Params.(*spec.CustomParams)
	return p, ok
}

func sortedNames[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// allocator hands out segment subnets from the pool in order, skipping pinned ones.
type allocator struct {
	pool   netip.Prefix
	bits   int
	pinned []netip.Prefix
	cur    netip.Addr
	done   bool
}

func (a *allocator) next() (netip.Prefix, error) {
	if !a.cur.IsValid() && !a.done {
		a.cur = a.pool.Addr()
	}
	for !a.done {
		p := netip.PrefixFrom(a.cur, a.bits)
		a.advance()
		clash := false
		for _, q := range a.pinned {
			if p.Overlaps(q) {
				clash = true
			}
		}
		if !clash {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("address pool %s has no free /%d left; give a larger addressing.pool", a.pool, a.bits)
}

func (a *allocator) advance() {
	b := a.cur.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += 1 << (32 - a.bits)
	next := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	if v == 0 || !a.pool.Contains(next) {
		a.done = true
		return
	}
	a.cur = next
}
