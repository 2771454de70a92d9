package spec

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sfclab/sfclab/sfc"
)

// Instances of a function in a transparent lab. `instances: N` on a function makes N nodes,
// NAME-1 .. NAME-N (as routed labs name them), each with the function's ports. A port pair
// that names the function's ports (NAME.IFNAME) stands for every instance: it becomes N port
// pairs PAIR-1 .. PAIR-N, pair i on instance i's ports, with weight weights[i-1] of the
// function (or the pair's own weight, or 1), and a group that lists PAIR lists all of them,
// so flows spread over the instances as over hand-listed pairs. A function of one instance
// with weights: [W] gives its port pairs weight W.

// maxPairWeight is the largest weight of a port pair (package sfc's rule).
const maxPairWeight = 64

// InstanceNames returns the node names of a function with n instances: its own name for
// one, NAME-1 .. NAME-N for more.
func InstanceNames(name string, n int) []string {
	if n <= 1 {
		return []string{name}
	}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", name, i+1)
	}
	return out
}

// instanced returns the function named node when it has more than one instance.
func (lab *Lab) instanced(node string) *Function {
	if f := lab.Functions[node]; f != nil && f.Instances > 1 {
		return f
	}
	return nil
}

// instanceOf returns the instanced function one of whose instances is named node ("" when
// none is).
func (lab *Lab) instanceOf(node string) string {
	i := strings.LastIndexByte(node, '-')
	if i < 0 {
		return ""
	}
	base := node[:i]
	if f := lab.instanced(base); f != nil {
		for _, n := range InstanceNames(base, f.Instances) {
			if n == node {
				return base
			}
		}
	}
	return ""
}

// pairOf returns the port pair of the file that an expanded pair PAIR-i comes from ("" when
// name is no expanded pair).
func (lab *Lab) pairOf(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return ""
	}
	if s := lab.PortPairs[name[:i]]; s != nil {
		if f := lab.pairFunction(s); f != nil {
			for j := 1; j <= f.Instances; j++ {
				if fmt.Sprintf("%s-%d", name[:i], j) == name {
					return name[:i]
				}
			}
		}
	}
	return ""
}

// pairFunction returns the instanced function whose ports a port pair names, nil if none.
func (lab *Lab) pairFunction(s *PortPairSpec) *Function {
	in, _, _ := cutPort(s.Ingress)
	return lab.instanced(in)
}

// expandPair returns the model's port pairs for the file's port pair name: the pair itself,
// or one per instance of the function whose ports it names.
func (lab *Lab) expandPair(name string, s *PortPairSpec) []sfc.PortPair {
	f := lab.pairFunction(s)
	if f == nil {
		w := s.weight()
		in, _, _ := cutPort(s.Ingress)
		if fn := lab.Functions[in]; fn != nil && len(fn.Weights) == 1 {
			w = fn.Weights[0] // one instance, one weight
		}
		return []sfc.PortPair{{Name: name, Ingress: s.Ingress, Egress: s.Egress, Weight: w}}
	}
	in, inIf, _ := cutPort(s.Ingress)
	_, outIf, _ := cutPort(s.Egress)
	var out []sfc.PortPair
	for i, inst := range InstanceNames(in, f.Instances) {
		w := s.weight()
		if len(f.Weights) == f.Instances {
			w = f.Weights[i]
		}
		out = append(out, sfc.PortPair{Name: fmt.Sprintf("%s-%d", name, i+1), Ingress: inst + "." + inIf, Egress: inst + "." + outIf, Weight: w})
	}
	return out
}

// instances checks what `instances:` of functions in a transparent lab needs: instance
// names no other node has, port pairs on one instanced function's own ports with one source
// of weights, expanded pair names no other pair has, logical ports that are one port, and a
// tap's pcap file written by one instance.
func (v *validator) instances() {
	lab := v.lab
	taken := map[string]string{}
	for _, n := range slices.Sorted(maps.Keys(lab.Endpoints)) {
		taken[n] = "endpoint " + n
	}
	for _, n := range slices.Sorted(maps.Keys(lab.Functions)) {
		taken[n] = "function " + n
	}
	for _, n := range slices.Sorted(maps.Keys(lab.Functions)) {
		if f := lab.Functions[n]; f != nil {
			for _, w := range f.Weights {
				if w > maxPairWeight {
					v.bad(f.Pos, "function %q: weight %d: each weight becomes a port pair's, which is 1-%d", n, w, maxPairWeight)
					break
				}
			}
		}
		f := lab.instanced(n)
		if f == nil {
			continue
		}
		for _, inst := range InstanceNames(n, f.Instances) {
			if other, dup := taken[inst]; dup {
				v.bad(f.Pos, "function %q: instance %s of its %d instances has the name of %s; rename one of them", n, inst, f.Instances, other)
			}
			taken[inst] = "instance " + inst + " of function " + n
		}
		if p, ok := f.Params.(Tap); ok && p.Capture() != "" {
			v.bad(f.Pos, "function %q: %d tap instances would all write pcap %s; give a tap with pcap: one instance, or list the taps one by one with their own files", n, f.Instances, p.Capture())
		}
	}
	// port names a port of the file: NODE.IFNAME with NODE an endpoint or a function,
	// not one instance of an instanced function.
	port := func(what string, p Pos, ref string) {
		node, ifn, _ := cutPort(ref)
		if base := lab.instanceOf(node); base != "" && lab.Endpoints[node] == nil && lab.Functions[node] == nil {
			v.bad(p, "%s: port %s is one instance's port; in the lab file name function %s's port as %s.%s, which stands for each of its %d instances",
				what, ref, base, base, ifn, lab.Functions[base].Instances)
		}
		if f := lab.instanced(node); f != nil && f.Ports[ifn] == "" {
			v.bad(p, "%s: function %s has no port %q (its ports: %v)", what, node, ifn, slices.Sorted(maps.Keys(f.Ports)))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(lab.PortPairs)) {
		s := lab.PortPairs[name]
		what := "port pair " + name
		port(what, s.Fields["ingress"], s.Ingress)
		port(what, s.Fields["egress"], s.Egress)
		in, _, _ := cutPort(s.Ingress)
		out, _, _ := cutPort(s.Egress)
		if f := lab.Functions[in]; f != nil && f.Instances <= 1 && len(f.Weights) > 0 && s.Weight != nil {
			v.bad(s.Fields["weight"], "%s: weight %d and function %s's weights %v both give its weight; keep one",
				what, *s.Weight, in, f.Weights)
		}
		fn := in
		f := lab.instanced(in)
		if f == nil {
			fn, f = out, lab.instanced(out)
		}
		if f == nil {
			continue
		}
		if in != out {
			v.bad(s.Fields["egress"], "%s: function %s has %d instances, so the pair stands for each of them (%s-1 .. %s-%d) and both its ports must be %s's; got ingress %s, egress %s",
				what, fn, f.Instances, name, name, f.Instances, fn, s.Ingress, s.Egress)
			continue
		}
		if s.Weight != nil && len(f.Weights) > 0 {
			v.bad(s.Fields["weight"], "%s: weight %d and function %s's weights %v both give its instances' weights; keep one (weights: gives one per instance, weight: the same to all)",
				what, *s.Weight, fn, f.Weights)
		}
		for i := 1; i <= f.Instances; i++ {
			exp := fmt.Sprintf("%s-%d", name, i)
			if lab.PortPairs[exp] != nil {
				v.bad(s.Pos, "%s: its pair for instance %d of function %s is named %s, which another port pair of the file is called; rename one of them", what, i, fn, exp)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(lab.FlowClassifiers)) {
		s := lab.FlowClassifiers[name]
		for _, lp := range []struct{ field, ref string }{{"logical_source_port", s.LogicalSourcePort}, {"logical_destination_port", s.LogicalDestinationPort}} {
			if lp.ref == "" {
				continue
			}
			what := "flow classifier " + name
			port(what, s.Fields[lp.field], lp.ref)
			node, _, _ := cutPort(lp.ref)
			if f := lab.instanced(node); f != nil {
				v.bad(s.Fields[lp.field], "%s: %s %s is a port of function %s, which has %d instances: a logical port is one port; classify at an endpoint's port or give %s one instance",
					what, lp.field, lp.ref, node, f.Instances, node)
			}
		}
	}
}

// weight is the pair's weight: as given (0 included), 1 when not given.
func (s *PortPairSpec) weight() int {
	if s.Weight == nil {
		return 1
	}
	return *s.Weight
}
