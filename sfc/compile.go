package sfc

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
)

// GraphKey marks a classifier key that is a path id (a service graph's continuation) rather
// than a logical source port's id.
const GraphKey uint32 = 0x80000000

// MaxRules is how many classifier rules one logical source port (or one graph branching
// point) may carry in the data plane.
const MaxRules = 16

// MaxPaths bounds the path ids: the VNI carries path << 8 | index in 24 bits.
const MaxPaths = 1 << 15

// MaxWeight is the largest weight of a port pair: a group's slot table holds one slot per
// unit of weight.
const MaxWeight = 64

// MaxHops bounds a chain's length: the VNI's index byte keeps its top bit for tap copies.
const MaxHops = 64

// Path flags as the data plane reads them.
const (
	PathReverse   uint32 = 1 // the reverse direction of a symmetric chain (id = forward | 1)
	PathGraph     uint32 = 2 // classify again at the end (service graph)
	PathSymmetric uint32 = 4 // a forward path whose reverse is id | 1
)

// ErrTooMany says a table outgrew what the data plane holds.
var ErrTooMany = errors.New("too many entries for the data plane")

// Binding is where a port ended up once deployed: its host, its host-side interface and its
// addresses. Compile without bindings gives tables with zero ifindexes and MACs (for plans).
type Binding struct {
	Host    uint32
	Ifindex uint32
	MAC     net.HardwareAddr
	IP      netip.Addr // IPv4
	IP6     netip.Addr // IPv6 (dual-stack ports)
}

// PortEntry is a port as the data plane knows it.
type PortEntry struct {
	ID      uint32
	Name    string
	Host    uint32
	Ifindex uint32
	MAC     net.HardwareAddr
	IP      netip.Addr // IPv4: traffic to it is delivered to this port
	IP6     netip.Addr // IPv6, the same
	// Tap: the port belongs to a tap instance; whatever it sends is dropped.
	Tap bool
}

// Rule is one flow classifier compiled for one classification point.
type Rule struct {
	Path       uint32
	Classifier string
	Proto      uint8
	IPv6       bool         // the rule matches IPv6 flows (ethertype IPv6), else IPv4 flows
	Src, Dst   netip.Prefix // zero: any
	SportMin   uint16
	SportMax   uint16
	DportMin   uint16
	DportMax   uint16
}

// PathEntry is one direction of a port chain: its groups in the order traversed.
type PathEntry struct {
	ID     uint32
	Chain  string
	Flags  uint32
	Groups []uint32
}

// GroupEntry is a port pair group with its weight table: Slots holds port pair ids, each
// repeated as often as its weight; a flow takes Slots[hash(lb_fields) % len(Slots)].
type GroupEntry struct {
	ID       uint32
	Name     string
	LBFields uint32
	Tap      bool
	Slots    []uint32
}

// PairEntry is a port pair by port ids.
type PairEntry struct {
	ID      uint32
	Name    string
	Ingress uint32
	Egress  uint32
}

// PathPort keys HopOf.
type PathPort struct{ Path, Port uint32 }

// Tables is the data plane's content: package steer writes it into BPF maps.
type Tables struct {
	Ports  []PortEntry
	Rules  map[uint32][]Rule // key: logical source port id, or GraphKey | path id
	Paths  []PathEntry
	Groups []GroupEntry
	Pairs  []PairEntry
	// HopOf says, for a packet leaving a function instance by a port, which hop of the
	// path it just finished.
	HopOf map[PathPort]uint32
}

// PortID returns the id of the named port, 0 if unknown.
func (t *Tables) PortID(name string) uint32 {
	for _, p := range t.Ports {
		if p.Name == name {
			return p.ID
		}
	}
	return 0
}

// ChainPath returns the forward path id of the named chain, 0 if unknown.
func (t *Tables) ChainPath(chain string) uint32 {
	for _, p := range t.Paths {
		if p.Chain == chain && p.Flags&PathReverse == 0 {
			return p.ID
		}
	}
	return 0
}

// Compile turns a valid model into data plane tables. Ids are positions in the model (ports,
// groups and pairs from 1; chain i has forward path 2(i+1) and reverse path 2(i+1)+1, or
// 2*ChainID and 2*ChainID+1 when its ChainID is set), so the same model always compiles to the
// same tables and a changed chain changes only its entries.
func Compile(m *Model, bind map[string]Binding) (*Tables, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if 2*(len(m.PortChains)+1) >= MaxPaths { // positions; explicit chain ids are checked below
		return nil, fmt.Errorf("compile chains: %d chains: %w", len(m.PortChains), ErrTooMany)
	}
	t := &Tables{Rules: map[uint32][]Rule{}, HopOf: map[PathPort]uint32{}}
	portID := map[string]uint32{}
	for i, p := range m.Ports {
		id := uint32(i + 1)
		portID[p.Name] = id
		b := bind[p.Name]
		ip, ip6 := b.IP, b.IP6
		if !ip.IsValid() {
			ip = p.IP
		}
		if !ip6.IsValid() {
			ip6 = p.IP6
		}
		t.Ports = append(t.Ports, PortEntry{ID: id, Name: p.Name, Host: b.Host, Ifindex: b.Ifindex, MAC: b.MAC, IP: ip, IP6: ip6})
	}
	pairID := map[string]uint32{}
	pairs := map[string]PortPair{}
	for i, pp := range m.PortPairs {
		id := uint32(i + 1)
		pairID[pp.Name] = id
		pairs[pp.Name] = pp
		t.Pairs = append(t.Pairs, PairEntry{ID: id, Name: pp.Name, Ingress: portID[pp.Ingress], Egress: portID[pp.Egress]})
	}
	groupID := map[string]uint32{}
	groups := map[string]PortPairGroup{}
	for i, g := range m.PortPairGroups {
		id := uint32(i + 1)
		groupID[g.Name] = id
		groups[g.Name] = g
		fields := g.LBFields
		if len(fields) == 0 {
			fields = DefaultLBFields
		}
		ge := GroupEntry{ID: id, Name: g.Name, Tap: g.TapEnabled}
		for _, f := range fields {
			ge.LBFields |= lbFieldBits[f]
		}
		for _, name := range g.PortPairs {
			for range pairs[name].Weight {
				ge.Slots = append(ge.Slots, pairID[name])
			}
			if g.TapEnabled {
				t.Ports[portID[pairs[name].Ingress]-1].Tap = true
				t.Ports[portID[pairs[name].Egress]-1].Tap = true
			}
		}
		if len(ge.Slots) == 0 { // every pair weighs 0: no pair is preferred, flows spread evenly
			for _, name := range g.PortPairs {
				ge.Slots = append(ge.Slots, pairID[name])
			}
		}
		t.Groups = append(t.Groups, ge)
	}
	fcs := map[string]FlowClassifier{}
	for _, fc := range m.FlowClassifiers {
		fcs[fc.Name] = fc
	}
	chainPath := map[string]uint32{}
	pathChain := map[uint32]string{}
	for i, c := range m.PortChains {
		fwd := uint32(2 * (i + 1))
		if c.ChainID > 0 {
			if c.ChainID >= MaxPaths/2 {
				return nil, fmt.Errorf("compile port chain %s: chain id %d, the data plane holds chain ids below %d: %w", c.Name, c.ChainID, MaxPaths/2, ErrTooMany)
			}
			fwd = uint32(2 * c.ChainID)
		}
		if other, dup := pathChain[fwd]; dup {
			return nil, fmt.Errorf("compile port chain %s: path %d is port chain %s's already (chain ids must differ): %w", c.Name, fwd, other, ErrDuplicate)
		}
		pathChain[fwd] = c.Name
		if len(c.PortPairGroups) > MaxHops {
			return nil, fmt.Errorf("compile port chain %s: %d groups, at most %d: %w", c.Name, len(c.PortPairGroups), MaxHops, ErrTooMany)
		}
		chainPath[c.Name] = fwd
		ids := make([]uint32, len(c.PortPairGroups))
		for j, g := range c.PortPairGroups {
			ids[j] = groupID[g]
		}
		pe := PathEntry{ID: fwd, Chain: c.Name, Groups: ids}
		if c.ChainParameters.Symmetric {
			pe.Flags |= PathSymmetric
		}
		t.Paths = append(t.Paths, pe)
		if err := t.hopOf(fwd, c, groups, pairs, portID, false); err != nil {
			return nil, err
		}
		for _, name := range c.FlowClassifiers {
			fc := fcs[name]
			if err := t.addRule(portID[fc.LogicalSourcePort], ruleOf(fc, fwd, false)); err != nil {
				return nil, err
			}
		}
		if !c.ChainParameters.Symmetric {
			continue
		}
		rev := slices.Clone(ids)
		slices.Reverse(rev)
		t.Paths = append(t.Paths, PathEntry{ID: fwd | 1, Chain: c.Name, Flags: PathReverse, Groups: rev})
		if err := t.hopOf(fwd|1, c, groups, pairs, portID, true); err != nil {
			return nil, err
		}
		for _, name := range c.FlowClassifiers {
			fc := fcs[name]
			if err := t.addRule(portID[fc.LogicalDestinationPort], ruleOf(fc, fwd|1, true)); err != nil {
				return nil, err
			}
		}
	}
	for _, g := range m.ServiceGraphs {
		for _, src := range slices.Sorted(maps.Keys(g.PortChains)) {
			sp := chainPath[src]
			for i := range t.Paths {
				if t.Paths[i].ID == sp {
					t.Paths[i].Flags |= PathGraph
				}
			}
			for _, dst := range g.PortChains[src] {
				for _, c := range m.PortChains {
					if c.Name != dst {
						continue
					}
					for _, name := range c.FlowClassifiers {
						if err := t.addRule(GraphKey|sp, ruleOf(fcs[name], chainPath[dst], false)); err != nil {
							return nil, err
						}
					}
				}
			}
		}
	}
	return t, nil
}

// hopOf records, for every instance of every forwarding group of a path, the port by which
// packets leave it (egress forward, ingress in reverse) and the hop they finished.
func (t *Tables) hopOf(path uint32, c PortChain, groups map[string]PortPairGroup, pairs map[string]PortPair,
	portID map[string]uint32, reverse bool) error {
	n := len(c.PortPairGroups)
	for j, gname := range c.PortPairGroups {
		idx := uint32(j)
		if reverse {
			idx = uint32(n - 1 - j)
		}
		g := groups[gname]
		if g.TapEnabled {
			continue
		}
		for _, ppName := range g.PortPairs {
			pp := pairs[ppName]
			out := portID[pp.Egress]
			if reverse {
				out = portID[pp.Ingress]
			}
			key := PathPort{path, out}
			if prev, dup := t.HopOf[key]; dup && prev != idx {
				return fmt.Errorf("compile port chain %s: port %s leaves hops %d and %d: %w", c.Name, pp.Egress, prev, idx, ErrHopTwice)
			}
			t.HopOf[key] = idx
		}
	}
	return nil
}

func (t *Tables) addRule(key uint32, r Rule) error {
	if len(t.Rules[key]) >= MaxRules {
		return fmt.Errorf("compile classifier %s: more than %d rules at one classification point: %w", r.Classifier, MaxRules, ErrTooMany)
	}
	t.Rules[key] = append(t.Rules[key], r)
	return nil
}

// ruleOf compiles a classifier; reverse swaps source and destination (the symmetric rule).
func ruleOf(fc FlowClassifier, path uint32, reverse bool) Rule {
	proto, _ := ProtocolNumber(fc.Protocol)
	r := Rule{Path: path, Classifier: fc.Name, Proto: uint8(proto), IPv6: fc.ethertype() == "IPv6",
		Src: fc.SourceIPPrefix, Dst: fc.DestinationIPPrefix,
		SportMin: uint16(fc.SourcePortRangeMin), SportMax: uint16(fc.SourcePortRangeMax),
		DportMin: uint16(fc.DestinationPortRangeMin), DportMax: uint16(fc.DestinationPortRangeMax)}
	if reverse {
		r.Src, r.Dst = r.Dst, r.Src
		r.SportMin, r.DportMin = r.DportMin, r.SportMin
		r.SportMax, r.DportMax = r.DportMax, r.SportMax
	}
	return r
}
