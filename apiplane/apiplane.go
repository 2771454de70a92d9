// Package apiplane is the api.DataPlane of transparent labs: port chains created over the
// networking-sfc REST API are added to the lab file's own resources, the whole model is
// validated with networking-sfc's rules (package sfc), compiled with the ports' bindings and
// written to the lab's pinned BPF maps. A chain change is a map update; nothing is
// redeployed. A chain's correlation (mpls, nsh) is not needed and ignored: the eBPF data
// plane carries the path id and index itself.
package apiplane

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sfclab/sfclab/api"
	"github.com/sfclab/sfclab/hosts"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime/runtimes"
	"github.com/sfclab/sfclab/sfc"
	"github.com/sfclab/sfclab/steer"
)

// ErrNotTransparent says a lab does not use transparent steering.
var ErrNotTransparent = errors.New("lab does not use steering: transparent")

// Plane implements api.DataPlane and api.GraphPlane for transparent labs deployed under
// Journal.
type Plane struct {
	Journal journal.Journal

	mu     sync.Mutex
	chains map[string]map[string]*api.Chain // lab -> chain id -> chain
	graphs map[string]map[string]*api.Graph // lab -> graph id -> graph
	labs   map[string]*deployed             // lab -> its plan and port bindings
}

// deployed is what a chain change needs of a deployed lab and does not change until the lab
// is redeployed: its transparent plan and where its ports are (reading the bindings opens
// two namespaces per port, most of a change's cost).
type deployed struct {
	started time.Time
	plan    *plan.Plan
	t       *plan.Transparent
	bind    map[string]sfc.Binding
}

// lab returns the lab's plan and bindings, read again when the lab was redeployed since.
func (p *Plane) lab(lab string) (*deployed, error) {
	st, err := p.Journal.ReadState(lab)
	if err != nil {
		delete(p.labs, lab)
		return nil, err
	}
	if d := p.labs[lab]; d != nil && d.started.Equal(st.Started) {
		return d, nil
	}
	delete(p.labs, lab)
	pl, err := p.Journal.ReadPlan(lab)
	if err != nil {
		return nil, err
	}
	if pl.Transparent == nil {
		return nil, ErrNotTransparent
	}
	bind, err := Bindings(context.Background(), pl)
	if err != nil {
		return nil, err
	}
	d := &deployed{started: st.Started, plan: pl, t: pl.Transparent, bind: bind}
	if p.labs == nil {
		p.labs = map[string]*deployed{}
	}
	p.labs[lab] = d
	return d, nil
}

var (
	_ api.DataPlane  = (*Plane)(nil)
	_ api.GraphPlane = (*Plane)(nil)
)

// ApplyChain installs or replaces a chain and rewrites the lab's tables.
func (p *Plane) ApplyChain(ctx context.Context, c *api.Chain) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cp := *c
	if err := put(&p.chains, c.Lab, c.ID, &cp, p.sync); err != nil {
		return fmt.Errorf("apply port chain %s to lab %s: %w", c.Name, c.Lab, err)
	}
	return nil
}

// RemoveChain stops steering a chain; an unknown chain is no error.
func (p *Plane) RemoveChain(ctx context.Context, lab, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := drop(p.chains, lab, id, p.sync); err != nil {
		return fmt.Errorf("remove port chain %s from lab %s: %w", id, lab, err)
	}
	return nil
}

// ApplyGraph links a service graph's chains and rewrites the lab's tables.
func (p *Plane) ApplyGraph(ctx context.Context, g *api.Graph) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cp := *g
	if err := put(&p.graphs, g.Lab, g.ID, &cp, p.sync); err != nil {
		return fmt.Errorf("apply service graph %s to lab %s: %w", g.Name, g.Lab, err)
	}
	return nil
}

// RemoveGraph unlinks a service graph's chains; an unknown graph is no error.
func (p *Plane) RemoveGraph(ctx context.Context, lab, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := drop(p.graphs, lab, id, p.sync); err != nil {
		return fmt.Errorf("remove service graph %s from lab %s: %w", id, lab, err)
	}
	return nil
}

var _ api.Checker = (*Plane)(nil)

// CheckChain compiles the lab's model with c added (or in place of the chain of its id)
// without writing anything: what the data plane cannot steer is a 400 SfcBadRequest
// saying why. A lab that is not transparent is not steered: nothing to check.
func (p *Plane) CheckChain(ctx context.Context, c *api.Chain) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	chains := maps.Clone(p.chains[c.Lab])
	if chains == nil {
		chains = map[string]*api.Chain{}
	}
	chains[c.ID] = c
	return p.check(c.Lab, chains, p.graphs[c.Lab])
}

// CheckGraph is CheckChain for a service graph.
func (p *Plane) CheckGraph(ctx context.Context, g *api.Graph) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	graphs := maps.Clone(p.graphs[g.Lab])
	if graphs == nil {
		graphs = map[string]*api.Graph{}
	}
	graphs[g.ID] = g
	return p.check(g.Lab, p.chains[g.Lab], graphs)
}

func (p *Plane) check(lab string, chains map[string]*api.Chain, graphs map[string]*api.Graph) error {
	d, err := p.lab(lab)
	if errors.Is(err, ErrNotTransparent) {
		return nil
	}
	if err != nil {
		return err
	}
	m, err := Model(d.t.Model, chains, graphs)
	if err == nil {
		_, err = sfc.Compile(m, d.bind)
	}
	if err != nil {
		return &api.Error{Status: 400, Type: "SfcBadRequest",
			Message: fmt.Sprintf("sfclab's data plane cannot steer this on lab %s: %v", lab, err)}
	}
	return nil
}

// put stores v under lab/id and syncs the lab, restoring the old value if that fails.
func put[V any](m *map[string]map[string]*V, lab, id string, v *V, sync func(string) error) error {
	if *m == nil {
		*m = map[string]map[string]*V{}
	}
	if (*m)[lab] == nil {
		(*m)[lab] = map[string]*V{}
	}
	old, had := (*m)[lab][id]
	(*m)[lab][id] = v
	if err := sync(lab); err != nil {
		if had {
			(*m)[lab][id] = old
		} else {
			delete((*m)[lab], id)
		}
		return err
	}
	return nil
}

// drop forgets lab/id and syncs the lab. A lab that is gone (destroyed, or its maps
// unpinned) has nothing left to steer: the entry is forgotten all the same.
func drop[V any](m map[string]map[string]*V, lab, id string, sync func(string) error) error {
	old, ok := m[lab][id]
	if !ok {
		return nil
	}
	delete(m[lab], id)
	err := sync(lab)
	if err == nil || errors.Is(err, journal.ErrNotDeployed) || errors.Is(err, steer.ErrNotLoaded) || errors.Is(err, ErrNotTransparent) {
		if len(m[lab]) == 0 {
			delete(m, lab)
		}
		return nil
	}
	m[lab][id] = old
	return err
}

// sync rebuilds the lab's model (its file's resources plus the API's chains and graphs),
// compiles it with the live bindings and writes the maps.
func (p *Plane) sync(lab string) error {
	d, err := p.lab(lab)
	if err != nil {
		return err
	}
	m, err := Model(d.t.Model, p.chains[lab], p.graphs[lab])
	if err != nil {
		return err
	}
	tab, err := sfc.Compile(m, d.bind)
	if err != nil {
		return err
	}
	dp, err := openMaps(context.Background(), d.plan)
	if err != nil {
		return err
	}
	defer dp.Close()
	if err := dp.Apply(tab); err != nil {
		return err
	}
	// For sfclab inspect: the paths the maps hold now, by name.
	return p.Journal.WriteSteerModel(lab, m)
}

// ModelName is the name under which the model (and `sfclab inspect`) knows a resource
// created over the API: "api-ID". Resources of the lab file keep their names there.
func ModelName(id string) string { return "api-" + id }

// Model returns base (the lab file's resources) with the API's chains and graphs added,
// chains in chain_id order with their path fixed by their chain_id. A chain that uses a
// resource of the lab file (LabFile set) uses the file's resource itself, not a copy.
func Model(base *sfc.Model, chains map[string]*api.Chain, graphs map[string]*api.Graph) (*sfc.Model, error) {
	m := *base
	m.FlowClassifiers = append([]sfc.FlowClassifier(nil), base.FlowClassifiers...)
	m.PortPairs = append([]sfc.PortPair(nil), base.PortPairs...)
	m.PortPairGroups = append([]sfc.PortPairGroup(nil), base.PortPairGroups...)
	m.PortChains = append([]sfc.PortChain(nil), base.PortChains...)
	m.ServiceGraphs = append([]sfc.ServiceGraph(nil), base.ServiceGraphs...)
	port := func(r api.PortRef) string { return r.Node + "." + r.Iface }
	named := func(labFile, id string) string {
		if labFile != "" {
			return labFile
		}
		return ModelName(id)
	}
	pairs, groups := map[string]bool{}, map[string]bool{}
	cs := make([]*api.Chain, 0, len(chains))
	for _, c := range chains {
		cs = append(cs, c)
	}
	slices.SortFunc(cs, func(a, b *api.Chain) int {
		if a.ChainID != b.ChainID {
			return a.ChainID - b.ChainID
		}
		return strings.Compare(a.ID, b.ID)
	})
	steered := map[string]bool{}
	for _, c := range cs {
		// A chain without classifiers classifies nothing: networking-sfc accepts it, the
		// data plane has nothing to program for it (nor for graph edges to or from it).
		if len(c.Classifiers) == 0 {
			continue
		}
		steered[c.ID] = true
		pc := sfc.PortChain{Name: named(c.LabFile, c.ID), ChainID: c.ChainID, ChainParameters: sfc.ChainParameters{Symmetric: c.Symmetric}}
		for _, cl := range c.Classifiers {
			if cl.LabFile != "" {
				pc.FlowClassifiers = append(pc.FlowClassifiers, cl.LabFile)
				continue
			}
			if cl.PortZero {
				return nil, fmt.Errorf("flow classifier %s: a port range of exactly port 0 cannot be matched (the data plane reads port 0 as any port)", cl.ID)
			}
			fc := sfc.FlowClassifier{Name: ModelName(c.ID) + "-" + cl.ID, Ethertype: cl.Ethertype, Protocol: cl.Protocol,
				SourcePortRangeMin: portFloor(cl.SourcePortRangeMin, cl.SourcePortRangeMax), SourcePortRangeMax: cl.SourcePortRangeMax,
				DestinationPortRangeMin: portFloor(cl.DestinationPortRangeMin, cl.DestinationPortRangeMax), DestinationPortRangeMax: cl.DestinationPortRangeMax}
			var err error
			if fc.SourceIPPrefix, err = parsePrefix(cl.SourceIPPrefix); err != nil {
				return nil, fmt.Errorf("flow classifier %s: source_ip_prefix: %w", cl.ID, err)
			}
			if fc.DestinationIPPrefix, err = parsePrefix(cl.DestinationIPPrefix); err != nil {
				return nil, fmt.Errorf("flow classifier %s: destination_ip_prefix: %w", cl.ID, err)
			}
			if cl.LogicalSource != nil {
				fc.LogicalSourcePort = port(*cl.LogicalSource)
			}
			if cl.LogicalDestination != nil {
				fc.LogicalDestinationPort = port(*cl.LogicalDestination)
			}
			// The destination port only classifies a symmetric chain's replies; an
			// asymmetric chain's classifier may name its source port there too.
			if !c.Symmetric && fc.LogicalDestinationPort == fc.LogicalSourcePort {
				fc.LogicalDestinationPort = ""
			}
			m.FlowClassifiers = append(m.FlowClassifiers, fc)
			pc.FlowClassifiers = append(pc.FlowClassifiers, fc.Name)
		}
		for _, g := range c.Groups {
			name := named(g.LabFile, g.ID)
			pc.PortPairGroups = append(pc.PortPairGroups, name)
			if g.LabFile != "" || groups[name] {
				continue
			}
			groups[name] = true
			ppg := sfc.PortPairGroup{Name: name, LBFields: g.LBFields, TapEnabled: g.Tap}
			weights := scaledWeights(g.Pairs)
			for i, pp := range g.Pairs {
				pn := named(pp.LabFile, pp.ID)
				ppg.PortPairs = append(ppg.PortPairs, pn)
				if pp.LabFile == "" && !pairs[pn] {
					pairs[pn] = true
					m.PortPairs = append(m.PortPairs, sfc.PortPair{Name: pn, Ingress: port(pp.Ingress), Egress: port(pp.Egress), Weight: weights[i]})
				}
			}
			m.PortPairGroups = append(m.PortPairGroups, ppg)
		}
		m.PortChains = append(m.PortChains, pc)
	}
	gids := make([]string, 0, len(graphs))
	for id := range graphs {
		gids = append(gids, id)
	}
	slices.Sort(gids)
	for _, id := range gids {
		g := graphs[id]
		sg := sfc.ServiceGraph{Name: ModelName(g.ID), PortChains: map[string][]string{}}
		for src, dsts := range g.Edges {
			if g.LabFile[src] == "" && !steered[src] {
				continue
			}
			s := named(g.LabFile[src], src)
			for _, d := range dsts {
				if g.LabFile[d] == "" && !steered[d] {
					continue
				}
				sg.PortChains[s] = append(sg.PortChains[s], named(g.LabFile[d], d))
			}
		}
		m.ServiceGraphs = append(m.ServiceGraphs, sg)
	}
	return &m, nil
}

// Bindings reads where every port of a deployed transparent lab is: host, host-side
// ifindex, MAC, address. On docker with one host a port is a container's interface and its
// host-side end is the other end of its veth, in the machine's own namespace; on hosts of
// their own (Plan.HostPorts) it is in its host's namespace, on either runtime.
func Bindings(ctx context.Context, p *plan.Plan) (map[string]sfc.Binding, error) {
	t := p.Transparent
	bind := map[string]sfc.Binding{}
	if r, ok := runtimes.All(runtimes.Options{})[p.Runtime].(remotePorts); ok {
		// The ports are on the machines the runtime's nodes run on (kubernetes: read by
		// the sfclab agent there).
		at, err := r.PortsAt(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, n := range t.Nodes {
			for _, pt := range n.Ports {
				a, ok := at[hosts.PortKey(n.Name, pt.Ifname)]
				if !ok {
					return nil, fmt.Errorf("node %s: port %s was not found", n.Name, pt.Ifname)
				}
				bind[pt.Name] = t.Binding(n, pt, a.Index, a.MAC)
			}
		}
		return bind, nil
	}
	for _, n := range t.Nodes {
		h := t.Host(n.Host)
		if p.Containers() && !p.HostPorts() {
			ns, err := openContainerNS(ctx, p, n.Name)
			if err != nil {
				return nil, err
			}
			for _, pt := range n.Ports {
				idx, mac, err := hosts.PeerOf(ns, pt.Ifname)
				if err != nil {
					ns.Close()
					return nil, err
				}
				bind[pt.Name] = t.Binding(n, pt, idx, mac)
			}
			ns.Close()
			continue
		}
		for _, pt := range n.Ports {
			idx, mac, err := hosts.PortLink(h.Netns, pt.HostIf, n.Netns, pt.Ifname)
			if err != nil {
				return nil, err
			}
			bind[pt.Name] = t.Binding(n, pt, idx, mac)
		}
	}
	return bind, nil
}

// remotePorts is a runtime whose lab's ports and steering maps are on the machines its nodes
// run on, reached through it (kubernetes: the sfclab agent on every node).
type remotePorts interface {
	PortsAt(ctx context.Context, p *plan.Plan) (map[string]hosts.PortAt, error)
	SteeringMaps(ctx context.Context, p *plan.Plan) (steer.Maps, error)
}

// openMaps opens a lab's steering maps: through its runtime when they are on its nodes'
// machines, else on this machine.
func openMaps(ctx context.Context, p *plan.Plan) (steer.Maps, error) {
	if r, ok := runtimes.All(runtimes.Options{})[p.Runtime].(remotePorts); ok {
		return r.SteeringMaps(ctx, p)
	}
	return steer.Open(p.Lab)
}

// openContainerNS opens the network namespace of a container node (which has no name)
// through its runtime in the register.
func openContainerNS(ctx context.Context, p *plan.Plan, name string) (*netdev.NS, error) {
	rt, ok := runtimes.All(runtimes.Options{})[p.Runtime]
	if !ok {
		return nil, fmt.Errorf("open namespace of node %s: unknown runtime %q", name, p.Runtime)
	}
	node, err := rt.Node(ctx, p, name)
	if err != nil {
		return nil, err
	}
	o, ok := node.(interface{ OpenNS() (*netdev.NS, error) })
	if !ok {
		return nil, fmt.Errorf("open namespace of node %s: runtime %s cannot", name, p.Runtime)
	}
	return o.OpenNS()
}

// portFloor is a range's lower bound for the data plane, which reads 0 as "any port": a
// range from 0 starts at 1 (port 0 itself is not matched; a range of only port 0 is refused
// before, see api.Classifier.PortZero).
func portFloor(lo, hi int) int {
	if hi != 0 && lo == 0 {
		return 1
	}
	return lo
}

// scaledWeights are a group's pair weights as the data plane takes them (1-64, one slot
// per unit): networking-sfc takes any non-negative weight, so a group with a larger one is
// scaled down to 64, each pair keeping about its share and at least 1 (0 stays 0).
func scaledWeights(pairs []api.Pair) []int {
	top := 0
	for _, p := range pairs {
		top = max(top, p.Weight)
	}
	out := make([]int, len(pairs))
	for i, p := range pairs {
		out[i] = p.Weight
		if top > sfc.MaxWeight && p.Weight > 0 {
			out[i] = max(1, (p.Weight*sfc.MaxWeight+top/2)/top)
		}
	}
	return out
}

func parsePrefix(s string) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, nil
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Switch is the data plane `sfclab serve` uses: chains of transparent labs go to Plane (and
// are steered), every call is then passed to Other (the api.Recorder, which records it);
// chains of routed labs only reach Other, since routed steering cannot take chains at run
// time.
type Switch struct {
	Plane *Plane
	Other api.DataPlane
}

var _ api.DataPlane = (*Switch)(nil)

// ApplyChain steers the chain if its lab is transparent, then passes the call on.
func (s *Switch) ApplyChain(ctx context.Context, c *api.Chain) error {
	if err := s.Plane.ApplyChain(ctx, c); err != nil && !errors.Is(err, ErrNotTransparent) {
		return err
	}
	return s.Other.ApplyChain(ctx, c)
}

// RemoveChain stops steering the chain (if it was) and passes the call on.
func (s *Switch) RemoveChain(ctx context.Context, lab, id string) error {
	if err := s.Plane.RemoveChain(ctx, lab, id); err != nil && !errors.Is(err, ErrNotTransparent) {
		return err
	}
	return s.Other.RemoveChain(ctx, lab, id)
}

var _ api.Checker = (*Switch)(nil)

// CheckChain asks Plane (transparent labs) and then Other, when it checks, whether the
// chain can be steered.
func (s *Switch) CheckChain(ctx context.Context, c *api.Chain) error {
	if err := s.Plane.CheckChain(ctx, c); err != nil {
		return err
	}
	if ck, ok := s.Other.(api.Checker); ok {
		return ck.CheckChain(ctx, c)
	}
	return nil
}

// CheckGraph is CheckChain for a service graph.
func (s *Switch) CheckGraph(ctx context.Context, g *api.Graph) error {
	if err := s.Plane.CheckGraph(ctx, g); err != nil {
		return err
	}
	if ck, ok := s.Other.(api.Checker); ok {
		return ck.CheckGraph(ctx, g)
	}
	return nil
}

var _ api.GraphPlane = (*Switch)(nil)

// ApplyGraph links the graph's chains if its lab is transparent, then passes the call on
// (when Other takes graphs).
func (s *Switch) ApplyGraph(ctx context.Context, g *api.Graph) error {
	if err := s.Plane.ApplyGraph(ctx, g); err != nil && !errors.Is(err, ErrNotTransparent) {
		return err
	}
	if gp, ok := s.Other.(api.GraphPlane); ok {
		return gp.ApplyGraph(ctx, g)
	}
	return nil
}

// RemoveGraph unlinks the graph's chains (if they were) and passes the call on.
func (s *Switch) RemoveGraph(ctx context.Context, lab, id string) error {
	if err := s.Plane.RemoveGraph(ctx, lab, id); err != nil && !errors.Is(err, ErrNotTransparent) {
		return err
	}
	if gp, ok := s.Other.(api.GraphPlane); ok {
		return gp.RemoveGraph(ctx, lab, id)
	}
	return nil
}
