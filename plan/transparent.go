package plan

import (
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/sfclab/sfclab/sfc"
	"github.com/sfclab/sfclab/spec"
)

// UnderlayPool is where emulated hosts' underlay addresses come from (inside 198.18.0.0/15,
// above the default segment pool's usual range).
var UnderlayPool = netip.MustParsePrefix("198.19.254.0/24")

// Pool6 is where transparent labs' IPv6 subnets come from: 2001:2::/48, RFC 5180's
// benchmarking range (the IPv6 twin of 198.18.0.0/15), a /64 per network in order
// (2001:2:0:N::/64 for the lab's network N, from 0); a port's IPv6 address has the same host
// number as its IPv4 one. Transparent labs are dual-stack; routed labs stay IPv4.
var Pool6 = netip.MustParsePrefix("2001:2::/48")

// subnet6 is the IPv6 subnet of a transparent lab's network i.
func subnet6(i int) netip.Prefix {
	b := Pool6.Addr().As16()
	b[6], b[7] = byte(i>>8), byte(i)
	return netip.PrefixFrom(netip.AddrFrom16(b), 64)
}

// addr6 is the address with host number n (counted from the subnet's first address) in
// subnet6 s.
func addr6(s netip.Prefix, n uint32) netip.Addr {
	b := s.Addr().As16()
	b[12], b[13], b[14], b[15] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return netip.AddrFrom16(b)
}

// hostNumber is a's offset from subnet s's first address (IPv4).
func hostNumber(s netip.Prefix, a netip.Addr) uint32 {
	x, y := s.Masked().Addr().As4(), a.As4()
	return (uint32(y[0])<<24 | uint32(y[1])<<16 | uint32(y[2])<<8 | uint32(y[3])) -
		(uint32(x[0])<<24 | uint32(x[1])<<16 | uint32(x[2])<<8 | uint32(x[3]))
}

// Transparent is the plan of a transparent-steering lab: emulated hosts, networks, nodes with
// their ports, and the networking-sfc model compiled to data plane tables.
type Transparent struct {
	Hosts []*Host `json:"hosts"`
	// Underlay is the namespace of the bridge joining the hosts ("" with one host).
	Underlay string       `json:"underlay,omitempty"`
	Networks []*TNetwork  `json:"networks"`
	Nodes    []*TNode     `json:"nodes"`
	Model    *sfc.Model   `json:"model"`
	Tables   *sfc.Tables  `json:"-"`
	Paths    []TPathShown `json:"paths"`
}

// THost is the emulated host of a transparent plan (see Host).
type THost = Host

// TNetwork is an L2 network present on every host.
type TNetwork struct {
	Name   string       `json:"name"`
	Bridge string       `json:"bridge"`
	VNI    uint32       `json:"vni"`
	Subnet netip.Prefix `json:"subnet"`
	// Subnet6 is the network's IPv6 subnet (from Pool6).
	Subnet6 netip.Prefix `json:"subnet6"`
}

// TNode is an endpoint or a function instance.
type TNode struct {
	Name  string   `json:"name"`
	Role  string   `json:"role"`
	Kind  string   `json:"kind"`
	Host  string   `json:"host"`
	Netns string   `json:"netns"`
	Ports []*TPort `json:"ports"`
	// Ways are a function's ways through (ingress ifname, egress ifname) from its port pairs.
	Ways [][2]string `json:"ways,omitempty"`
	Run  []string    `json:"run,omitempty"`
	// Function is what the kind needs to set itself up (its first port pair's ports).
	Function *Function `json:"function,omitempty"`
	// Of and Instance say which instance of which lab file function this node is, for a
	// function with instances: (Of is "" otherwise).
	Of       string `json:"of,omitempty"`
	Instance int    `json:"instance,omitempty"`
}

// TPort is one port: a veth whose host-side end sits on its network's bridge.
type TPort struct {
	Name    string       `json:"name"` // NODE.IFNAME, the model's port name
	Ifname  string       `json:"ifname"`
	HostIf  string       `json:"host_if"` // "" on docker: the engine's veth, found at deploy
	Network string       `json:"network"`
	Address netip.Prefix `json:"address"`
	// Address6 is the port's IPv6 address in its network's Subnet6.
	Address6 netip.Prefix `json:"address6"`
}

// TPathShown is a compiled path for people: chain, direction, hops by group.
type TPathShown struct {
	ID     uint32   `json:"id"`
	Chain  string   `json:"chain"`
	Dir    string   `json:"direction"`
	Groups []string `json:"groups"`
}

// MTU is the MTU of node interfaces: 1450 when VXLAN joins several hosts (50 bytes of
// overhead on a 1500-byte underlay), else the lab's.
func (t *Transparent) MTU(labMTU int) int {
	if len(t.Hosts) > 1 {
		return min(labMTU, 1450)
	}
	return labMTU
}

// Node returns the named node, nil if none.
func (t *Transparent) Node(name string) *TNode {
	for _, n := range t.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Binding is where port pt of node n is for the steering tables (sfc.Compile): its host's
// ID, the ifindex and MAC of its veth's host-side end (found at deploy: hosts.PortLink, or
// hosts.PeerOf for a container's), and its addresses. Deploy and the API's data plane both
// bind ports with it.
func (t *Transparent) Binding(n *TNode, pt *TPort, ifindex int, mac net.HardwareAddr) sfc.Binding {
	var id uint32
	if h := t.Host(n.Host); h != nil {
		id = h.ID
	}
	return sfc.Binding{Host: id, Ifindex: uint32(ifindex), MAC: mac, IP: pt.Address.Addr(), IP6: pt.Address6.Addr()}
}

// Host returns the named host, nil if none.
func (t *Transparent) Host(name string) *Host {
	for _, h := range t.Hosts {
		if h.Name == name {
			return h
		}
	}
	return nil
}

func (b *builder) transparent() {
	lab := b.lab
	t := &Transparent{}
	b.plan.Transparent = t
	t.Hosts = b.hosts()
	if len(lab.Hosts) > 1 {
		t.Underlay = NetnsName(lab.Name, "underlay")
	}
	// On docker with one emulated host, the host is the machine itself: the Docker networks'
	// bridges and the host-side ends of the containers' veths are in its namespace. With
	// several hosts the containers have no network of the engine's: package hosts gives them
	// their ports, as it does netns nodes (see Plan.HostPorts).
	docker := lab.Traits().Containers && len(lab.Hosts) <= 1
	if docker {
		for _, h := range t.Hosts {
			h.Netns = ""
		}
	}
	pool, _ := spec.ParsePrefix(lab.Addressing.Pool)
	b.alloc = &allocator{pool: pool, bits: lab.Addressing.Prefix}
	if docker {
		b.alloc.pinned = b.taken // the engine refuses overlapping networks
	}
	next := map[string]netip.Addr{}
	for i, n := range lab.Networks {
		subnet, err := b.alloc.next()
		if err != nil {
			b.bad(spec.Pos{}, "%v", err)
			return
		}
		t.Networks = append(t.Networks, &TNetwork{Name: n, Bridge: "br-" + n, VNI: uint32(100 + i), Subnet: subnet, Subnet6: subnet6(i)})
		next[n] = subnet.Addr().Next()
	}
	m, err := lab.SFCModel()
	if err != nil {
		b.bad(spec.Pos{}, "%v", err)
		return
	}
	if docker {
		for _, n := range t.Networks {
			b.plan.Segments = append(b.plan.Segments, &Segment{Name: n.Name, Subnet: n.Subnet, Gateway: lastHost(n.Subnet)})
		}
	}
	portNo := 0
	addNode := func(name, role, kind, host string, ports map[string]string, run []string, group string, instance, weight int, vm *spec.VM) *TNode {
		n := &TNode{Name: name, Role: role, Kind: kind, Host: host, Netns: NetnsName(lab.Name, name), Run: run}
		for _, ifn := range slices.Sorted(maps.Keys(ports)) {
			portNo++
			net := ports[ifn]
			var subnet, sub6 netip.Prefix
			for _, tn := range t.Networks {
				if tn.Name == net {
					subnet, sub6 = tn.Subnet, tn.Subnet6
				}
			}
			addr := next[net]
			if !subnet.Contains(addr) || addr == lastHost(subnet) {
				b.bad(spec.Pos{}, "network %s (%s) has no address left for %s.%s; use a larger addressing.prefix", net, subnet, name, ifn)
				return n
			}
			next[net] = addr.Next()
			hostIf := fmt.Sprintf("p%d", portNo)
			if docker {
				hostIf = "" // the engine names it; steering finds it through the container
			}
			n.Ports = append(n.Ports, &TPort{Name: name + "." + ifn, Ifname: ifn, HostIf: hostIf,
				Network: net, Address: netip.PrefixFrom(addr, subnet.Bits()),
				Address6: netip.PrefixFrom(addr6(sub6, hostNumber(subnet, addr)), sub6.Bits())})
		}
		t.Nodes = append(t.Nodes, n)
		// The runtime creates a namespace (and cgroup) per plan node; ports come from hosts,
		// or on docker from the runtime: a container per node on a Docker network per network
		// (the plan's segments), an interface per port.
		pn := &Node{Name: name, Role: role, Kind: kind, Group: group, Instance: instance,
			Weight: weight, Netns: n.Netns, Run: run, Host: host}
		if vm != nil {
			pn.VM = planVM(lab, vm)
			if !lab.Traits().Containers { // a docker lab's runtime boots its VMs
				b.plan.Runtime = spec.RuntimeVM
			}
		}
		if docker {
			for _, pt := range n.Ports {
				pn.Interfaces = append(pn.Interfaces, &Interface{Name: pt.Ifname, Segment: pt.Network, Address: pt.Address})
				seg := b.plan.Segment(pt.Network)
				seg.Members = append(seg.Members, name+"/"+pt.Ifname)
			}
		}
		b.plan.Nodes = append(b.plan.Nodes, pn)
		return n
	}
	for _, name := range slices.Sorted(maps.Keys(lab.Endpoints)) {
		e := lab.Endpoints[name]
		role := RoleServer
		if e.Kind == spec.EndpointClient {
			role = RoleClient
		}
		n := addNode(name, role, e.Kind, e.Host, e.Ports, e.Run, name, 1, 1, e.VM)
		if e.HTTP != nil && len(n.Ports) > 0 { // an endpoint that runs a service
			n.Function = &Function{Kind: e.Kind, Params: e.HTTP, Ingress: n.Ports[0].Ifname, Egress: n.Ports[0].Ifname,
				IngressAddr: n.Ports[0].Address.Addr(), EgressAddr: n.Ports[0].Address.Addr()}
			b.plan.Node(name).Function = n.Function
		}
	}
	for _, fname := range slices.Sorted(maps.Keys(lab.Functions)) {
		f := lab.Functions[fname]
		for i, name := range spec.InstanceNames(fname, f.Instances) {
			weight := 1
			if len(f.Weights) > i {
				weight = f.Weights[i]
			}
			n := addNode(name, RoleFunction, f.Kind, f.Host, f.Ports, nil, fname, i+1, weight, f.VM)
			if f.Instances > 1 {
				n.Of, n.Instance = fname, i+1
			}
			b.transparentFunction(m, f, n)
		}
	}
	for i := range m.Ports {
		for _, n := range t.Nodes {
			for _, p := range n.Ports {
				if p.Name == m.Ports[i].Name {
					m.Ports[i].IP = p.Address.Addr()
					m.Ports[i].IP6 = p.Address6.Addr()
				}
			}
		}
	}
	t.Model = m
	tab, err := sfc.Compile(m, nil)
	if err != nil {
		b.bad(spec.Pos{}, "%v", err)
		return
	}
	t.Tables = tab
	groupName := map[uint32]string{}
	for _, g := range tab.Groups {
		groupName[g.ID] = g.Name
	}
	for _, p := range tab.Paths {
		dir := "forward"
		if p.Flags&sfc.PathReverse != 0 {
			dir = "reverse"
		}
		var gs []string
		for _, g := range p.Groups {
			gs = append(gs, groupName[g])
		}
		t.Paths = append(t.Paths, TPathShown{ID: p.ID, Chain: p.Chain, Dir: dir, Groups: gs})
	}
}

// transparentFunction gives a function instance's node its ways through (from the port pairs
// on its ports, or defaultWays) and what its kind needs to set itself up.
func (b *builder) transparentFunction(m *sfc.Model, f *spec.Function, n *TNode) {
	for _, pp := range m.PortPairs {
		in, inIf, _ := strings.Cut(pp.Ingress, ".")
		_, outIf, _ := strings.Cut(pp.Egress, ".")
		if in == n.Name && !spec.IsTap(f.Params) {
			n.Ways = append(n.Ways, [2]string{inIf, outIf})
		}
	}
	if len(n.Ways) == 0 && !spec.IsTap(f.Params) {
		n.Ways = defaultWays(n.Ports)
	}
	if len(n.Ports) > 0 {
		in, out := n.Ports[0], n.Ports[len(n.Ports)-1]
		if len(n.Ways) > 0 {
			for _, p := range n.Ports {
				if p.Ifname == n.Ways[0][0] {
					in = p
				}
				if p.Ifname == n.Ways[0][1] {
					out = p
				}
			}
		}
		n.Function = &Function{Kind: f.Kind, Params: f.Params, Ingress: in.Ifname, Egress: out.Ifname,
			IngressAddr: in.Address.Addr(), EgressAddr: out.Address.Addr(), IPv6: in.Address6.IsValid()}
		b.plan.Node(n.Name).Function = n.Function
	}
}

// defaultWays is the way through a function that no port pair of the lab file names, so
// port pairs created later over the API find it forwarding: its only port both ways, or from
// its port named ingress (or in) to its port named egress (or out); none otherwise.
func defaultWays(ports []*TPort) [][2]string {
	if len(ports) == 1 {
		return [][2]string{{ports[0].Ifname, ports[0].Ifname}}
	}
	has := map[string]bool{}
	for _, p := range ports {
		has[p.Ifname] = true
	}
	for _, w := range [][2]string{{"ingress", "egress"}, {"in", "out"}} {
		if has[w[0]] && has[w[1]] {
			return [][2]string{w}
		}
	}
	return nil
}

// writeTransparent prints a transparent plan's hosts, networks, nodes, model and paths.
func (t *Transparent) writeText(w io.Writer, pl *Plan) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	container := pl.Containers()
	docker := container && !pl.HostPorts() // the engine's networks on the machine itself
	fmt.Fprintf(tw, "\nhosts (%d), node mtu %d:\n", len(t.Hosts), t.MTU(pl.MTU))
	for _, h := range t.Hosts {
		ul := ""
		if h.Underlay.IsValid() {
			ul = "underlay " + h.Underlay.String()
		}
		where := "netns " + h.Netns
		if docker {
			where = "the machine itself (docker)"
		}
		fmt.Fprintf(tw, "  %s\tid %d\t%s\t%s%s\n", h.Name, h.ID, where, ul, h.extraText())
	}
	if t.Underlay != "" {
		fmt.Fprintf(tw, "  underlay netns %s, vxlan per network (udp 4789) + steering vxlan (collect_md, udp 4790)\n", t.Underlay)
	}
	fmt.Fprintf(tw, "\nnetworks (%d):\n", len(t.Networks))
	for _, n := range t.Networks {
		if s := pl.Segment(n.Name); docker && s != nil {
			fmt.Fprintf(tw, "  %s\t%s %s\tdocker network %s\tgateway %s\n", n.Name, n.Subnet, n.Subnet6, NetnsName(pl.Lab, n.Name), s.Gateway)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s %s\tbridge %s\tvni %d\n", n.Name, n.Subnet, n.Subnet6, n.Bridge, n.VNI)
	}
	fmt.Fprintf(tw, "\nnodes (%d):\n", len(t.Nodes))
	for _, n := range t.Nodes {
		where := "netns " + n.Netns
		switch {
		case docker:
			where = "container " + NetnsName(pl.Lab, n.Name)
		case container:
			where = "container " + NetnsName(pl.Lab, n.Name) + ", netns " + n.Netns
		}
		of := ""
		if n.Of != "" {
			of = fmt.Sprintf("\tinstance %d of %s", n.Instance, n.Of)
		}
		fmt.Fprintf(tw, "  %s\t%s %s\thost %s\t%s%s\n", n.Name, n.Role, n.Kind, n.Host, where, of)
		for _, p := range n.Ports {
			side := p.HostIf
			if docker {
				side = "its veth's peer on the network's bridge"
			}
			fmt.Fprintf(tw, "    port %s\t%s %s\tnetwork %s, host side %s\n", p.Ifname, p.Address, p.Address6, p.Network, side)
		}
		for _, w := range n.Ways {
			fmt.Fprintf(tw, "    forwards %s -> %s (and back)\n", w[0], w[1])
		}
		for _, r := range n.Run {
			fmt.Fprintf(tw, "    run %s\n", r)
		}
		if pn := pl.Node(n.Name); pn != nil && pn.VM != nil {
			fmt.Fprintf(tw, "    vm %s\n", pn.VM.Text())
		}
	}
	m := t.Model
	fmt.Fprintf(tw, "\nflow classifiers (%d):\n", len(m.FlowClassifiers))
	for _, fc := range m.FlowClassifiers {
		fmt.Fprintf(tw, "  %s\t%s\n", fc.Name, ClassifierText(fc))
	}
	fmt.Fprintf(tw, "\nport pairs (%d):\n", len(m.PortPairs))
	for _, pp := range m.PortPairs {
		fmt.Fprintf(tw, "  %s\t%s -> %s\tweight %d\n", pp.Name, pp.Ingress, pp.Egress, pp.Weight)
	}
	fmt.Fprintf(tw, "\nport pair groups (%d):\n", len(m.PortPairGroups))
	for _, g := range m.PortPairGroups {
		lb := g.LBFields
		if len(lb) == 0 {
			lb = sfc.DefaultLBFields
		}
		tap := ""
		if g.TapEnabled {
			tap = "\ttap"
		}
		fmt.Fprintf(tw, "  %s\t[%s]\tlb_fields %s%s\n", g.Name, strings.Join(g.PortPairs, " "), strings.Join(lb, "&"), tap)
	}
	fmt.Fprintf(tw, "\nport chains (%d), data plane paths:\n", len(m.PortChains))
	for _, p := range t.Paths {
		fmt.Fprintf(tw, "  %s\tpath %d %s\t%s\n", p.Chain, p.ID, p.Dir, strings.Join(p.Groups, " -> "))
	}
	for _, g := range m.ServiceGraphs {
		for _, src := range slices.Sorted(maps.Keys(g.PortChains)) {
			fmt.Fprintf(tw, "  graph %s\t%s -> %s\n", g.Name, src, strings.Join(g.PortChains[src], ", "))
		}
	}
	return tw.Flush()
}

// ClassifierText renders a flow classifier on one line, as plans and inspect show it.
func ClassifierText(fc sfc.FlowClassifier) string {
	var s []string
	et := fc.Ethertype
	if et == "" {
		et = "IPv4"
	}
	s = append(s, et)
	if fc.Protocol != "" {
		s = append(s, fc.Protocol)
	}
	if fc.SourceIPPrefix.IsValid() {
		s = append(s, "from "+fc.SourceIPPrefix.String())
	}
	if fc.DestinationIPPrefix.IsValid() {
		s = append(s, "to "+fc.DestinationIPPrefix.String())
	}
	if fc.SourcePortRangeMin != 0 {
		s = append(s, fmt.Sprintf("sport %d-%d", fc.SourcePortRangeMin, fc.SourcePortRangeMax))
	}
	if fc.DestinationPortRangeMin != 0 {
		s = append(s, fmt.Sprintf("dport %d-%d", fc.DestinationPortRangeMin, fc.DestinationPortRangeMax))
	}
	s = append(s, "at "+fc.LogicalSourcePort)
	if fc.LogicalDestinationPort != "" {
		s = append(s, "to port "+fc.LogicalDestinationPort)
	}
	return strings.Join(s, " ")
}
