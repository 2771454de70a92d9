package sfc

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Sentinel kinds of validation error; check with errors.Is.
var (
	ErrInvalid                  = errors.New("invalid value")
	ErrDuplicate                = errors.New("duplicate name")
	ErrUnknownPort              = errors.New("unknown port")
	ErrUnknownRef               = errors.New("unknown resource")
	ErrNoLogicalSourcePort      = errors.New("flow classifier has no logical_source_port")
	ErrNoLogicalDestinationPort = errors.New("symmetric chain's flow classifier has no logical_destination_port")
	ErrClassifierOverlap        = errors.New("flow classifiers overlap on one logical source port")
	ErrClassifierInUse          = errors.New("flow classifier already used by another port chain")
	ErrPortPairAcrossHosts      = errors.New("port pair's ingress and egress are on different hosts")
	ErrPortPairInUse            = errors.New("port pair already in another port pair group")
	ErrTapFirst                 = errors.New("tap port pair group first in a chain")
	ErrConsecutiveTap           = errors.New("consecutive tap port pair groups")
	ErrHopTwice                 = errors.New("port pair group twice in one chain")
	ErrGraphLoop                = errors.New("service graph has a loop")
	ErrCorrelation              = errors.New("unsupported correlation")
)

// Ref names the resource and field an error is about, so a lab file can give file:line.
type Ref struct {
	// Collection is the model's list: "ports", "flow_classifiers", "port_pairs",
	// "port_pair_groups", "port_chains", "service_graphs".
	Collection string
	// Name is the resource's name.
	Name string
	// Field is the offending field (networking-sfc's name), "" for the whole resource.
	Field string
}

func (r Ref) String() string {
	s := r.Collection + " " + r.Name
	if r.Field != "" {
		s += ": " + r.Field
	}
	return s
}

// Error is one validation problem: its kind (a sentinel above), where, and what to do.
type Error struct {
	Kind error
	Ref  Ref
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Ref, e.Msg) }

// Unwrap returns the error's kind.
func (e *Error) Unwrap() error { return e.Kind }

// Errors is every problem Validate found, in model order.
type Errors []*Error

func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap gives errors.Is access to every problem.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

type validator struct {
	m    *Model
	errs Errors
}

func (v *validator) add(kind error, ref Ref, format string, args ...any) {
	v.errs = append(v.errs, &Error{Kind: kind, Ref: ref, Msg: fmt.Sprintf(format, args...)})
}

// Validate checks the model against networking-sfc's rules and the data plane's needs.
// It returns nil or an Errors.
func (m *Model) Validate() error {
	v := &validator{m: m}
	ports := v.ports()
	fcs := v.classifiers(ports)
	pairs := v.pairs(ports)
	groups := v.groups(pairs)
	v.chains(fcs, groups)
	v.graphs()
	if len(v.errs) == 0 {
		return nil
	}
	return v.errs
}

func (v *validator) ports() map[string]Port {
	out := map[string]Port{}
	for _, p := range v.m.Ports {
		ref := Ref{"ports", p.Name, ""}
		if p.Name == "" {
			v.add(ErrInvalid, ref, "a port needs a name")
			continue
		}
		if _, dup := out[p.Name]; dup {
			v.add(ErrDuplicate, ref, "port %q defined twice", p.Name)
		}
		out[p.Name] = p
	}
	return out
}

func (v *validator) portRef(ports map[string]Port, ref Ref, name string) bool {
	if _, ok := ports[name]; ok {
		return true
	}
	v.add(ErrUnknownPort, ref, "no port %q (known: %s)", name, strings.Join(slices.Sorted(maps.Keys(ports)), ", "))
	return false
}

func (v *validator) classifiers(ports map[string]Port) map[string]FlowClassifier {
	out := map[string]FlowClassifier{}
	for _, fc := range v.m.FlowClassifiers {
		ref := func(field string) Ref { return Ref{"flow_classifiers", fc.Name, field} }
		if _, dup := out[fc.Name]; dup {
			v.add(ErrDuplicate, ref(""), "flow classifier %q defined twice", fc.Name)
		}
		out[fc.Name] = fc
		v4 := fc.Ethertype == "" || fc.Ethertype == "IPv4"
		if !v4 && fc.Ethertype != "IPv6" {
			v.add(ErrInvalid, ref("ethertype"), "ethertype %q: use IPv4 or IPv6", fc.Ethertype)
		}
		proto, ok := ProtocolNumber(fc.Protocol)
		if !ok {
			v.add(ErrInvalid, ref("protocol"), "protocol %q: use tcp, udp, icmp, icmpv6 or a number 0-255", fc.Protocol)
		}
		for _, r := range []struct {
			field    string
			min, max int
		}{
			{"source_port_range", fc.SourcePortRangeMin, fc.SourcePortRangeMax},
			{"destination_port_range", fc.DestinationPortRangeMin, fc.DestinationPortRangeMax},
		} {
			if r.min == 0 && r.max == 0 {
				continue
			}
			if proto != 6 && proto != 17 {
				v.add(ErrInvalid, ref(r.field+"_min"), "port ranges need protocol tcp or udp")
			}
			if r.min < 1 || r.max > 65535 || r.min > r.max {
				v.add(ErrInvalid, ref(r.field+"_min"), "%s %d-%d: need 1 <= min <= max <= 65535", r.field, r.min, r.max)
			}
		}
		for _, p := range []struct {
			field string
			ok    bool
			is4   bool
		}{
			{"source_ip_prefix", fc.SourceIPPrefix.IsValid(), fc.SourceIPPrefix.Addr().Is4()},
			{"destination_ip_prefix", fc.DestinationIPPrefix.IsValid(), fc.DestinationIPPrefix.Addr().Is4()},
		} {
			if p.ok && p.is4 != v4 {
				v.add(ErrInvalid, ref(p.field), "prefix family does not match ethertype %s", fc.ethertype())
			}
		}
		if fc.LogicalSourcePort == "" {
			v.add(ErrNoLogicalSourcePort, ref("logical_source_port"),
				"the data plane classifies at the traffic's source port: set logical_source_port")
		} else {
			v.portRef(ports, ref("logical_source_port"), fc.LogicalSourcePort)
		}
		if fc.LogicalDestinationPort != "" {
			v.portRef(ports, ref("logical_destination_port"), fc.LogicalDestinationPort)
			if fc.LogicalDestinationPort == fc.LogicalSourcePort {
				v.add(ErrInvalid, ref("logical_destination_port"), "logical source and destination port are the same port")
			}
		}
	}
	return out
}

func (fc FlowClassifier) ethertype() string {
	if fc.Ethertype == "" {
		return "IPv4"
	}
	return fc.Ethertype
}

func (v *validator) pairs(ports map[string]Port) map[string]PortPair {
	out := map[string]PortPair{}
	for _, pp := range v.m.PortPairs {
		ref := func(field string) Ref { return Ref{"port_pairs", pp.Name, field} }
		if _, dup := out[pp.Name]; dup {
			v.add(ErrDuplicate, ref(""), "port pair %q defined twice", pp.Name)
		}
		out[pp.Name] = pp
		okIn := v.portRef(ports, ref("ingress"), pp.Ingress)
		okOut := v.portRef(ports, ref("egress"), pp.Egress)
		if pp.Weight < 0 || pp.Weight > MaxWeight {
			v.add(ErrInvalid, ref("weight"), "weight %d: use 0-%d", pp.Weight, MaxWeight)
		}
		if okIn && okOut {
			in, out := ports[pp.Ingress], ports[pp.Egress]
			if in.Host != out.Host {
				v.add(ErrPortPairAcrossHosts, ref("egress"),
					"ingress %s is on host %q, egress %s on host %q: both ports of an instance must be on one host",
					pp.Ingress, in.Host, pp.Egress, out.Host)
			}
			if in.Node != out.Node {
				v.add(ErrInvalid, ref("egress"), "ingress %s belongs to %s, egress %s to %s: a port pair is one instance's ports",
					pp.Ingress, in.Node, pp.Egress, out.Node)
			}
		}
	}
	return out
}

func (v *validator) groups(pairs map[string]PortPair) map[string]PortPairGroup {
	out := map[string]PortPairGroup{}
	owner := map[string]string{}
	for _, g := range v.m.PortPairGroups {
		ref := func(field string) Ref { return Ref{"port_pair_groups", g.Name, field} }
		if _, dup := out[g.Name]; dup {
			v.add(ErrDuplicate, ref(""), "port pair group %q defined twice", g.Name)
		}
		out[g.Name] = g
		if len(g.PortPairs) == 0 {
			v.add(ErrInvalid, ref("port_pairs"), "a port pair group needs at least one port pair")
		}
		for _, pp := range g.PortPairs {
			if _, ok := pairs[pp]; !ok {
				v.add(ErrUnknownRef, ref("port_pairs"), "no port pair %q", pp)
				continue
			}
			if o, used := owner[pp]; used {
				v.add(ErrPortPairInUse, ref("port_pairs"), "port pair %q is already in group %q", pp, o)
				continue
			}
			owner[pp] = g.Name
		}
		for _, f := range g.LBFields {
			if _, ok := lbFieldBits[f]; !ok {
				v.add(ErrInvalid, ref("lb_fields"), "lb_field %q: use %s", f, strings.Join(LBFieldNames(), ", "))
			}
		}
	}
	return out
}

func (v *validator) chains(fcs map[string]FlowClassifier, groups map[string]PortPairGroup) {
	fcOwner := map[string]string{}
	seen := map[string]bool{}
	type placed struct{ chain, fc string }
	bySource := map[string][]placed{}
	for _, c := range v.m.PortChains {
		ref := func(field string) Ref { return Ref{"port_chains", c.Name, field} }
		if seen[c.Name] {
			v.add(ErrDuplicate, ref(""), "port chain %q defined twice", c.Name)
		}
		seen[c.Name] = true
		if c.ChainParameters.Correlation != "" {
			v.add(ErrCorrelation, ref("chain_parameters"),
				"correlation %q: the eBPF data plane carries path id and index itself; leave correlation unset",
				c.ChainParameters.Correlation)
		}
		if len(c.FlowClassifiers) == 0 {
			v.add(ErrInvalid, ref("flow_classifiers"), "a port chain needs at least one flow classifier")
		}
		for _, name := range c.FlowClassifiers {
			fc, ok := fcs[name]
			if !ok {
				v.add(ErrUnknownRef, ref("flow_classifiers"), "no flow classifier %q", name)
				continue
			}
			if o, used := fcOwner[name]; used {
				v.add(ErrClassifierInUse, ref("flow_classifiers"), "flow classifier %q is already in port chain %q", name, o)
				continue
			}
			fcOwner[name] = c.Name
			if c.ChainParameters.Symmetric && fc.LogicalDestinationPort == "" {
				v.add(ErrNoLogicalDestinationPort, Ref{"flow_classifiers", name, "logical_destination_port"},
					"chain %q is symmetric: replies are classified at the destination port, set logical_destination_port", c.Name)
			}
			if fc.LogicalSourcePort == "" {
				continue
			}
			for _, other := range bySource[fc.LogicalSourcePort] {
				if other.chain != c.Name && Overlap(fcs[other.fc], fc) {
					v.add(ErrClassifierOverlap, Ref{"flow_classifiers", name, ""},
						"overlaps flow classifier %q of port chain %q on logical source port %s: narrow one of them (networking-sfc refuses this too)",
						other.fc, other.chain, fc.LogicalSourcePort)
				}
			}
			bySource[fc.LogicalSourcePort] = append(bySource[fc.LogicalSourcePort], placed{c.Name, name})
		}
		used := map[string]bool{}
		for i, name := range c.PortPairGroups {
			g, ok := groups[name]
			if !ok {
				v.add(ErrUnknownRef, ref("port_pair_groups"), "no port pair group %q", name)
				continue
			}
			if used[name] {
				v.add(ErrHopTwice, ref("port_pair_groups"), "port pair group %q appears twice: a chain visits a function once", name)
			}
			used[name] = true
			if g.TapEnabled && i == 0 {
				v.add(ErrTapFirst, ref("port_pair_groups"),
					"tap group %q cannot be first: a tap copies what the previous hop forwards; put a forwarding group before it", name)
			}
			if g.TapEnabled && i > 0 {
				if prev, ok := groups[c.PortPairGroups[i-1]]; ok && prev.TapEnabled {
					v.add(ErrConsecutiveTap, ref("port_pair_groups"), "tap groups %q and %q follow each other (networking-sfc refuses this)", prev.Name, name)
				}
			}
		}
	}
}

func (v *validator) graphs() {
	chains := map[string]bool{}
	for _, c := range v.m.PortChains {
		chains[c.Name] = true
	}
	for _, g := range v.m.ServiceGraphs {
		ref := Ref{"service_graphs", g.Name, "port_chains"}
		edges := map[string][]string{}
		for src, dsts := range g.PortChains {
			if !chains[src] {
				v.add(ErrUnknownRef, ref, "no port chain %q", src)
			}
			for _, d := range dsts {
				if !chains[d] {
					v.add(ErrUnknownRef, ref, "no port chain %q", d)
				}
				if d == src {
					v.add(ErrGraphLoop, ref, "port chain %q continues into itself", src)
				}
			}
			edges[src] = dsts
		}
		if src, loop := LoopThrough(edges); loop {
			v.add(ErrGraphLoop, ref, "the graph's chains form a loop through %q", src)
		}
	}
}

// Overlap reports whether some packet matches both classifiers' header fields (logical
// ports aside): networking-sfc refuses two such classifiers on one logical source port.
func Overlap(a, b FlowClassifier) bool {
	if a.ethertype() != b.ethertype() {
		return false
	}
	pa, _ := ProtocolNumber(a.Protocol)
	pb, _ := ProtocolNumber(b.Protocol)
	if pa != 0 && pb != 0 && pa != pb {
		return false
	}
	if !rangesOverlap(a.SourcePortRangeMin, a.SourcePortRangeMax, b.SourcePortRangeMin, b.SourcePortRangeMax) ||
		!rangesOverlap(a.DestinationPortRangeMin, a.DestinationPortRangeMax, b.DestinationPortRangeMin, b.DestinationPortRangeMax) {
		return false
	}
	return prefixesOverlap(a.SourceIPPrefix.IsValid(), b.SourceIPPrefix.IsValid(), a.SourceIPPrefix.Overlaps(b.SourceIPPrefix)) &&
		prefixesOverlap(a.DestinationIPPrefix.IsValid(), b.DestinationIPPrefix.IsValid(), a.DestinationIPPrefix.Overlaps(b.DestinationIPPrefix))
}

func rangesOverlap(amin, amax, bmin, bmax int) bool {
	if amin == 0 && amax == 0 || bmin == 0 && bmax == 0 {
		return true
	}
	return amin <= bmax && bmin <= amax
}

func prefixesOverlap(aSet, bSet, overlap bool) bool {
	if !aSet || !bSet {
		return true
	}
	return overlap
}

// LoopThrough reports whether following src -> dst links between chains comes back to where
// it started, and the first chain (in name order) from which such a loop is reached.
func LoopThrough(edges map[string][]string) (string, bool) {
	state := map[string]int{} // 0 unvisited, 1 on the path, 2 done
	var visit func(string) bool
	visit = func(n string) bool {
		switch state[n] {
		case 1:
			return true
		case 2:
			return false
		}
		state[n] = 1
		for _, d := range edges[n] {
			if visit(d) {
				return true
			}
		}
		state[n] = 2
		return false
	}
	for _, src := range slices.Sorted(maps.Keys(edges)) {
		if visit(src) {
			return src, true
		}
	}
	return "", false
}
