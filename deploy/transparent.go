package deploy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/hosts"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/sfc"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/steer"
	"github.com/vishvananda/netlink"
)

// topology turns a transparent plan into what package hosts builds.
func topology(p *plan.Plan) *hosts.Topology {
	t := p.Transparent
	topo := &hosts.Topology{Lab: p.Lab, NodesExist: true}
	for _, h := range t.Hosts {
		cores, _ := cgroup.ParseCPUs(h.CPUs) // "" gives none
		topo.Hosts = append(topo.Hosts, hosts.Host{Name: h.Name, ID: h.ID, Underlay: h.Underlay, CPUs: cores})
	}
	for _, n := range t.Networks {
		topo.Networks = append(topo.Networks, hosts.Network{Name: n.Name, Bridge: n.Bridge, VNI: n.VNI})
	}
	for _, n := range t.Nodes {
		hn := hosts.Node{Name: n.Name, Host: n.Host}
		for _, pt := range n.Ports {
			hn.Ports = append(hn.Ports, hosts.Port{Ifname: pt.Ifname, HostIf: pt.HostIf, Network: pt.Network, Addr: pt.Address, Addr6: pt.Address6})
		}
		topo.Nodes = append(topo.Nodes, hn)
	}
	return topo
}

// steeringPort is where one port's steering program goes: the host-side end of its veth.
type steeringPort struct {
	name   string // the model's port name, NODE.IFNAME
	nsName string // the namespace of the host-side end ("" = the machine's own)
	hostIf string
	bind   sfc.Binding
}

// steering builds a transparent lab's hosts and ports, makes functions bumps in the wire,
// loads the steering programs, attaches them to every port and fills the maps.
func (b *build) steering(ctx context.Context) error {
	p := b.p
	t := p.Transparent
	var ports []steeringPort
	var err error
	switch {
	case !transparentRuntime(p.Runtime):
		return fmt.Errorf("transparent steering: runtime %s is not supported (use runtime: %s)", p.Runtime, transparentRuntimes())
	case p.HostPorts():
		ports, err = b.hostPorts(ctx)
	default:
		ports, err = b.dockerPorts(ctx)
	}
	if err != nil {
		return err
	}
	a := steer.Attachment{}
	for _, h := range t.Hosts {
		a.Hosts = append(a.Hosts, h.ID)
	}
	if remote(b.rt) == nil { // a remote runtime's undo has its nodes remove the maps
		b.undo.Push("unpin steering maps", func() error { return steer.Unpin(p.Lab) })
	}
	bind := map[string]sfc.Binding{}
	for _, pt := range ports {
		bind[pt.name] = pt.bind
		if pt.nsName == "" {
			// The machine's own namespace outlives the lab: take the program off again when
			// a failed deploy unwinds (destroy removes the containers, and their veths with
			// them).
			hostIf := pt.hostIf
			b.undo.Push("detach steering from "+hostIf, func() error { return steer.Detach("", hostIf) })
		}
		a.Ports = append(a.Ports, steer.PortAttachment{NS: pt.nsName, Host: pt.bind.Host, Ifname: pt.hostIf})
	}
	if len(t.Hosts) > 1 {
		for _, h := range t.Hosts {
			a.Tunnels = append(a.Tunnels, steer.TunnelAttachment{NS: h.Netns, Host: h.ID, Underlay: h.Underlay.Addr(), Ifname: hosts.SteerDev})
		}
	}
	if w, ok := b.rt.(SegmentWirer); ok {
		err = w.AttachSteering(ctx, p, a, b.undo)
	} else {
		err = steer.Install(p.Lab, a)
	}
	if err != nil {
		return err
	}
	dp, err := steeringMaps(ctx, b.rt, p)
	if err != nil {
		return err
	}
	defer dp.Close()
	tab, err := sfc.Compile(t.Model, bind)
	if err != nil {
		return fmt.Errorf("compile chains: %w", err)
	}
	return dp.Apply(tab)
}

// hostPorts builds the emulated hosts (a namespace each, a bridge per network, VXLAN between
// them) and the nodes' ports, makes functions bumps in the wire, and returns where each
// port's program goes: its veth's end in its host's namespace. The nodes are namespaces, or
// containers whose namespaces the docker runtime named as a netns node's (Plan.HostPorts).
func (b *build) hostPorts(ctx context.Context) ([]steeringPort, error) {
	t := b.p.Transparent
	nodeNS := func(n *plan.TNode) *netdev.NS { return b.ns[n.Name] }
	var links map[string]hosts.PortAt
	topo := topology(b.p)
	if w, ok := b.rt.(SegmentWirer); ok {
		var err error
		if links, err = w.BuildHosts(ctx, b.p, topo, b.undo); err != nil {
			return nil, err
		}
	} else {
		built, err := hosts.Build(topo, b.undo)
		if built != nil {
			defer built.Close()
		}
		if err != nil {
			return nil, err
		}
		nodeNS = func(n *plan.TNode) *netdev.NS { return built.NS[n.Netns] }
	}
	if err := b.bootOnPorts(ctx); err != nil {
		return nil, err
	}
	if links == nil { // built here: read where the ports are once the guests booted on them
		var err error
		if links, err = topo.PortLinks(); err != nil {
			return nil, err
		}
	}
	var bumps []*plan.TNode
	for _, n := range t.Nodes {
		if !isMachine(b.p, n.Name) { // a VM's guest is its bump in the wire (bootOnPorts)
			bumps = append(bumps, n)
		}
	}
	if r := remote(b.rt); r != nil {
		if err := r.BumpInTheWire(ctx, b.p, bumps); err != nil {
			return nil, err
		}
	} else {
		for _, n := range bumps {
			if err := steer.BumpInTheWire(nodeNS(n), n, steer.FastPathOf(n)); err != nil {
				return nil, err
			}
		}
	}
	var ports []steeringPort
	for _, n := range t.Nodes {
		h := t.Host(n.Host)
		for _, pt := range n.Ports {
			at, ok := links[hosts.PortKey(n.Name, pt.Ifname)]
			if !ok {
				return nil, fmt.Errorf("node %s: port %s was not built", n.Name, pt.Ifname)
			}
			idx, mac := at.Index, at.MAC
			ports = append(ports, steeringPort{name: pt.Name, nsName: h.Netns, hostIf: pt.HostIf,
				bind: t.Binding(n, pt, idx, mac)})
		}
	}
	return ports, nil
}

// dockerPorts makes the functions' containers bumps in the wire and returns where each port's
// program goes: the host-side end of the container interface's veth, which the engine put on
// the network's bridge in the machine's own namespace (the lab's one emulated host). The
// runtime has created the containers on their networks and named their interfaces. A VM
// node's container is its host side: the runtime boots the guest on the container's
// interfaces first (bootOnPorts), and the guest, given the port's IPv6 address, is the bump.
func (b *build) dockerPorts(ctx context.Context) ([]steeringPort, error) {
	t := b.p.Transparent
	if err := b.bootOnPorts(ctx); err != nil {
		return nil, err
	}
	var ports []steeringPort
	for _, n := range t.Nodes {
		ns := b.ns[n.Name]
		if ns == nil {
			return nil, fmt.Errorf("node %s: no namespace handle", n.Name)
		}
		if !isMachine(b.p, n.Name) {
			// The engine's networks are IPv4 (the Docker daemon needs IPv6 configured to give
			// containers IPv6 addresses): the IPv6 addresses are added here, as on netns.
			for _, pt := range n.Ports {
				if pt.Address6.IsValid() {
					if err := hosts.AddAddr6(ns, pt.Ifname, pt.Address6); err != nil {
						return nil, fmt.Errorf("node %s: %w", n.Name, err)
					}
				}
			}
			if err := steer.BumpInTheWire(ns, n, steer.FastPathOf(n)); err != nil {
				return nil, err
			}
		}
		for _, pt := range n.Ports {
			idx, mac, err := hosts.PeerOf(ns, pt.Ifname)
			if err != nil {
				return nil, fmt.Errorf("node %s: %w", n.Name, err)
			}
			peer, err := netlink.LinkByIndex(idx)
			if err != nil {
				return nil, fmt.Errorf("node %s: find the host side of %s (ifindex %d): %w", n.Name, pt.Ifname, idx, err)
			}
			ports = append(ports, steeringPort{name: pt.Name, hostIf: peer.Attrs().Name,
				bind: t.Binding(n, pt, idx, mac)})
		}
	}
	return ports, nil
}

// unpinSteering removes a lab's pinned steering maps (its programs went with its host
// namespaces); nothing pinned is not an error.
func unpinSteering(lab string) error {
	if err := steer.Unpin(lab); err != nil && !errors.Is(err, steer.ErrNotLoaded) {
		return err
	}
	return nil
}

// SteeringInfo is a transparent lab's data plane as `sfclab inspect` shows it.
type SteeringInfo struct {
	Classifiers []string   `json:"classifiers"`
	Paths       []PathInfo `json:"paths"`
	// Picks are the instances groups chose for the flows they saw last (newest few thousand
	// kept by an LRU map; at most MaxPicksShown listed).
	Picks []PickInfo `json:"picks"`
	Error string     `json:"error,omitempty"`
}

// PathInfo is one direction of a chain with per-hop packet counters: Packets[i] went into
// hop i, the last entry left the path to its destination.
type PathInfo struct {
	ID      uint32   `json:"id"`
	Chain   string   `json:"chain"`
	Dir     string   `json:"direction"`
	Hops    []string `json:"hops"`
	Packets []uint64 `json:"packets"`
	Bytes   []uint64 `json:"bytes"`
}

// PickInfo is one group's choice for one flow.
type PickInfo struct {
	Group    string `json:"group"`
	Flow     string `json:"flow"`
	Instance string `json:"instance"`
}

// MaxPicksShown bounds the picks inspect lists.
const MaxPicksShown = 20

// inspectSteering reads a transparent lab's counters and picks, naming paths, groups and
// instances by m: the plan's model, or the one sfclab serve last wrote the maps from (with
// the chains created over the API, named api-ID).
func inspectSteering(ctx context.Context, rt runtime.Runtime, p *plan.Plan, m *sfc.Model) *SteeringInfo {
	si := &SteeringInfo{}
	for _, fc := range m.FlowClassifiers {
		si.Classifiers = append(si.Classifiers, fmt.Sprintf("%s: %s", fc.Name, plan.ClassifierText(fc)))
	}
	tab, err := sfc.Compile(m, nil) // ids depend on the model only
	if err != nil {
		si.Error = err.Error()
		return si
	}
	dp, err := steeringMaps(ctx, rt, p)
	if err != nil {
		si.Error = err.Error()
		return si
	}
	defer dp.Close()
	cs, err := dp.Counters()
	if err != nil {
		si.Error = err.Error()
		return si
	}
	type key struct{ path, hop uint32 }
	pk, by := map[key]uint64{}, map[key]uint64{}
	for _, c := range cs {
		pk[key{c.Path, c.Hop}], by[key{c.Path, c.Hop}] = c.Packets, c.Bytes
	}
	groupName, pairName := map[uint32]string{}, map[uint32]string{}
	for _, g := range tab.Groups {
		groupName[g.ID] = g.Name
	}
	for _, pp := range tab.Pairs {
		pairName[pp.ID] = pp.Name
	}
	for _, pa := range tab.Paths {
		pi := PathInfo{ID: pa.ID, Chain: pa.Chain, Dir: "forward"}
		if pa.Flags&sfc.PathReverse != 0 {
			pi.Dir = "reverse"
		}
		for i := 0; i <= len(pa.Groups); i++ {
			if i < len(pa.Groups) {
				pi.Hops = append(pi.Hops, groupName[pa.Groups[i]])
			} else {
				pi.Hops = append(pi.Hops, "(out)")
			}
			pi.Packets = append(pi.Packets, pk[key{pa.ID, uint32(i)}])
			pi.Bytes = append(pi.Bytes, by[key{pa.ID, uint32(i)}])
		}
		si.Paths = append(si.Paths, pi)
	}
	picks, err := dp.Picks()
	if err != nil {
		si.Error = err.Error()
		return si
	}
	for _, pk := range picks {
		if len(si.Picks) >= MaxPicksShown {
			break
		}
		si.Picks = append(si.Picks, PickInfo{Group: groupName[pk.Group], Flow: pk.Flow.String(), Instance: pairName[pk.Pair]})
	}
	return si
}

// transparentRuntime reports whether the runtime called name ("" is the default) can carry
// transparent steering: every known runtime (a VM's ports are veths spliced to its taps, the
// steering programs on the host ends as for namespaces).
func transparentRuntime(name string) bool {
	_, ok := spec.TraitsOf(name)
	return ok
}

// transparentRuntimes lists the runtimes that can carry transparent steering, for a message:
// "a, b or c".
func transparentRuntimes() string {
	var names []string
	for _, n := range spec.RuntimeNames() {
		if transparentRuntime(n) {
			names = append(names, n)
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
