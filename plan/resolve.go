package plan

import (
	"errors"
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
func Build(lab *spec.Lab) (*Plan, error) { return BuildAvoiding(lab, nil) }

// BuildAvoiding is Build with segment subnets allocated around taken prefixes (those another
// lab's Docker networks hold on this engine): the allocator skips them as it skips pinned ones.
// Subnets the file pins are kept as they are; a runtime's preflight reports their overlaps.
//
// When the file set no addressing.prefix and the lab's segments do not fit the pool at the
// default /24, the shortest longer prefix (the largest subnets) with which every segment fits
// is taken, so small labs keep /24 and 1,000-node labs still deploy.
func BuildAvoiding(lab *spec.Lab, taken []netip.Prefix) (*Plan, error) {
	bits := lab.Addressing.Prefix
	for {
		b := &builder{lab: lab, nodes: map[string]*Node{}, ifCount: map[string]int{}, taken: taken, bits: bits}
		b.build()
		if len(b.errs) == 0 {
			return b.plan, nil
		}
		if !lab.Addressing.Auto || !b.poolFull || bits >= maxAutoPrefix {
			return nil, b.errs
		}
		bits++
	}
}

// maxAutoPrefix is the longest segment prefix Build picks by itself: /30 holds two hosts.
const maxAutoPrefix = 30

// errPoolFull is the allocator's error when the pool has no subnet left.
var errPoolFull = errors.New("address pool full")

type builder struct {
	lab     *spec.Lab
	plan    *Plan
	nodes   map[string]*Node
	ifCount map[string]int // endpoint node -> interfaces so far
	alloc   *allocator
	taken   []netip.Prefix
	errs    spec.Errors
	// bits is the segment prefix length; poolFull is set when the pool ran out.
	bits     int
	poolFull bool
}

func (b *builder) bad(p spec.Pos, format string, args ...any) {
	b.errs = append(b.errs, &spec.Error{File: b.lab.File, Pos: p, Msg: fmt.Sprintf(format, args...)})
}

func (b *builder) build() {
	lab := b.lab
	b.plan = &Plan{Lab: lab.Name, Runtime: lab.Runtime, Steering: lab.Steering, MTU: lab.MTU}
	if lab.Traits().Images {
		b.plan.Image = lab.Docker.Image
	}
	if lab.Traits().Containers {
		b.plan.Attach = lab.Docker.Attach
	}
	if lab.Steering == spec.SteeringTransparent {
		b.transparent()
		return
	}
	pool, _ := spec.ParsePrefix(lab.Addressing.Pool)
	var pinned []netip.Prefix
	for _, c := range lab.Chains {
		for _, s := range c.Subnets {
			p, _ := spec.ParsePrefix(s)
			pinned = append(pinned, p)
		}
	}
	b.alloc = &allocator{pool: pool, bits: b.bits, pinned: append(pinned, b.taken...)}
	for ci, c := range lab.Chains {
		b.chain(ci, c)
	}
	for _, name := range slices.Sorted(maps.Keys(lab.Endpoints)) {
		if _, used := b.nodes[instanceName(name, 1, lab.Endpoints[name].Instances)]; !used {
			b.bad(lab.Endpoints[name].Pos, "endpoint %q is in no chain; use it as a chain's from or to, or remove it", name)
		}
	}
	for _, n := range b.plan.Nodes {
		b.sysctls(n)
	}
	b.checkDrivers()
	if len(lab.Hosts) > 0 {
		b.routedHosts()
		return
	}
	for _, s := range b.plan.Segments {
		if s.Bridge != "" && !lab.Traits().Containers {
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
	var driver *spec.Driver
	var host string
	var vm *spec.VM
	if e := lab.Endpoints[name]; e != nil {
		vm = e.VM
	} else if f := lab.Functions[name]; f != nil {
		vm = f.VM
	}
	if e := lab.Endpoints[name]; e != nil && e.DriverType() != spec.DriverVeth {
		driver = e.Driver
	}
	if e := lab.Endpoints[name]; e != nil {
		host = e.Host
	} else if f := lab.Functions[name]; f != nil {
		host = f.Host
	}
	if e := lab.Endpoints[name]; e != nil {
		role, kind, instances, wts = RoleServer, e.Kind, e.Instances, e.Weights
		if e.Kind == spec.EndpointClient {
			role = RoleClient
		}
		if e.HTTP != nil { // an endpoint that runs a service (validation: kind http-server)
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
				Netns: NetnsName(lab.Name, nn), Run: append([]string(nil), run...), Driver: driver, Host: host}
			if service != nil {
				svc := *service
				n.Function = &svc
			}
			if vm != nil {
				n.VM = planVM(lab, vm)
				if !lab.Traits().Containers {
					// a namespace lab with a VM: runtime vm builds on netns; a docker lab
					// stays docker, its runtime boots the VMs in their containers
					b.plan.Runtime = spec.RuntimeVM
				}
			}
			b.nodes[nn] = n
			b.plan.Nodes = append(b.plan.Nodes, n)
		}
		out[i] = n
	}
	return out
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
	if p, ok := f.Params.(spec.Proxy); ok {
		port := p.ListenPort()
		if port == 0 {
			if !c.Classifier.DestinationPort.Single() {
				b.bad(f.Pos, "function %q: %s needs a port: set params.port, or a single destination_port in chain %q's classifier", f.Name, f.Kind, c.Name)
				return
			}
			port = c.Classifier.DestinationPort.From
		}
		n.Function.Port = port
		for _, d := range dst {
			var listens uint16
			if d.Function != nil {
				if l, ok := d.Function.Params.(spec.Listener); ok {
					listens = l.ListenPort()
				}
			}
			n.Function.Backends = append(n.Function.Backends, Backend{Name: d.Name, Addr: dstOn[d.Name].Address.Addr(),
				Port: p.ConnectPort(port, listens), Weight: d.Weight})
		}
	}
	if p, ok := f.Params.(spec.Rewriter); ok {
		for _, d := range p.DNATRules() {
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
	if n.Function != nil {
		if p, ok := n.Function.Params.(spec.IPForwarding); ok {
			if fw, set := p.ForwardsIP(); set {
				forward = fw
			}
		}
	}
	if forward {
		set("net.ipv4.ip_forward", "1")
	}
	// IPv6 off by default: routed labs are IPv4 (no IPv6 link-local chatter in the counters);
	// a transparent lab's dual-stack ports turn it on for themselves (hosts.AddAddr6).
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
	return netip.Prefix{}, fmt.Errorf("%w: %s has no free /%d left; give a larger addressing.pool or a longer addressing.prefix", errPoolFull, a.pool, a.bits)
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

// hasDriver reports whether any node has an attachment driver other than veth.
func hasDriver(nodes []*Node) bool {
	for _, n := range nodes {
		if n.Driver != nil || n.VM.Macvtap() {
			return true
		}
	}
	return false
}

// checkDrivers refuses what a driver cannot do with the resolved plan: on docker, a driver
// needs emulated hosts (package hosts makes the macvlan or the redirect; Docker's networks
// are not used then); host-device and sriov give a node one device, so the node must have
// exactly one interface.
func (b *builder) checkDrivers() {
	for _, n := range b.plan.Nodes {
		if n.Driver != nil && b.lab.Traits().Containers && len(b.lab.Hosts) == 0 {
			b.bad(n.Driver.Pos, "endpoint %q: driver %s on runtime docker needs emulated hosts (hosts: [h1] places every node on one): their bridges are sfclab's, where it makes the macvlan or the redirect; Docker's own macvlan network driver answers \"operation not supported\" on this engine for an internal parent", n.Group, n.Driver.Type)
			continue
		}
		if n.Driver == nil || n.Driver.Type == spec.DriverMacvlan || n.Driver.Type == spec.DriverMacvtap || n.Driver.Type == spec.DriverEBPFRedirect {
			continue
		}
		if len(n.Interfaces) != 1 {
			b.bad(n.Driver.Pos, "endpoint %q: driver %s gives the node one device, but it is on %d networks (chains); use veth or macvlan", n.Group, n.Driver.Type, len(n.Interfaces))
		}
	}
}
