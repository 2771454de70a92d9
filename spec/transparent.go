package spec

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"sort"

	"github.com/sfclab/sfclab/sfc"
	"go.yaml.in/yaml/v3"
)

// SteeringTransparent is networking-sfc's model: functions are bumps in the wire on shared L2
// networks, steered by tc eBPF (package steer).
const SteeringTransparent = "transparent"

// PortPairSpec is networking-sfc's port pair in a lab file: ports are NODE.IFNAME.
type PortPairSpec struct {
	Ingress string `yaml:"ingress" json:"ingress"`
	Egress  string `yaml:"egress" json:"egress"`
	// Weight is the pair's share of its group's flows, 0 or more (networking-sfc's
	// non-negative weight; 0: no new flows); 1 when not given.
	Weight *int `yaml:"weight,omitempty" json:"weight,omitempty"`

	Name   string         `yaml:"-" json:"-"`
	Pos    Pos            `yaml:"-" json:"-"`
	Fields map[string]Pos `yaml:"-" json:"-"`
}

// PortPairGroupSpec is networking-sfc's port pair group in a lab file.
type PortPairGroupSpec struct {
	PortPairs  []string `yaml:"port_pairs" json:"port_pairs"`
	LBFields   []string `yaml:"lb_fields,omitempty" json:"lb_fields,omitempty"`
	TapEnabled bool     `yaml:"tap_enabled,omitempty" json:"tap_enabled,omitempty"`

	Name   string         `yaml:"-" json:"-"`
	Pos    Pos            `yaml:"-" json:"-"`
	Fields map[string]Pos `yaml:"-" json:"-"`
}

// FlowClassifierSpec is networking-sfc's flow classifier in a lab file.
type FlowClassifierSpec struct {
	Ethertype               string `yaml:"ethertype,omitempty" json:"ethertype,omitempty"`
	Protocol                string `yaml:"protocol,omitempty" json:"protocol,omitempty"`
	SourcePortRangeMin      int    `yaml:"source_port_range_min,omitempty" json:"source_port_range_min,omitempty"`
	SourcePortRangeMax      int    `yaml:"source_port_range_max,omitempty" json:"source_port_range_max,omitempty"`
	DestinationPortRangeMin int    `yaml:"destination_port_range_min,omitempty" json:"destination_port_range_min,omitempty"`
	DestinationPortRangeMax int    `yaml:"destination_port_range_max,omitempty" json:"destination_port_range_max,omitempty"`
	SourceIPPrefix          string `yaml:"source_ip_prefix,omitempty" json:"source_ip_prefix,omitempty"`
	DestinationIPPrefix     string `yaml:"destination_ip_prefix,omitempty" json:"destination_ip_prefix,omitempty"`
	LogicalSourcePort       string `yaml:"logical_source_port,omitempty" json:"logical_source_port,omitempty"`
	LogicalDestinationPort  string `yaml:"logical_destination_port,omitempty" json:"logical_destination_port,omitempty"`

	Name   string         `yaml:"-" json:"-"`
	Pos    Pos            `yaml:"-" json:"-"`
	Fields map[string]Pos `yaml:"-" json:"-"`
}

// ChainParametersSpec are networking-sfc's chain_parameters.
type ChainParametersSpec struct {
	Symmetric   bool   `yaml:"symmetric,omitempty" json:"symmetric,omitempty"`
	Correlation string `yaml:"correlation,omitempty" json:"correlation,omitempty"`
}

// PortChainSpec is networking-sfc's port chain in a lab file.
type PortChainSpec struct {
	FlowClassifiers []string            `yaml:"flow_classifiers" json:"flow_classifiers"`
	PortPairGroups  []string            `yaml:"port_pair_groups" json:"port_pair_groups"`
	ChainParameters ChainParametersSpec `yaml:"chain_parameters,omitempty" json:"chain_parameters,omitempty"`
	// Symmetric is short for chain_parameters: {symmetric: true}.
	Symmetric bool `yaml:"symmetric,omitempty" json:"symmetric,omitempty"`

	Name   string         `yaml:"-" json:"-"`
	Pos    Pos            `yaml:"-" json:"-"`
	Fields map[string]Pos `yaml:"-" json:"-"`
}

// ServiceGraphSpec is networking-sfc's service graph: source chain -> destination chains.
type ServiceGraphSpec struct {
	PortChains map[string][]string `yaml:"port_chains" json:"port_chains"`

	Name   string         `yaml:"-" json:"-"`
	Pos    Pos            `yaml:"-" json:"-"`
	Fields map[string]Pos `yaml:"-" json:"-"`
}

func fieldPositions(n *yaml.Node) map[string]Pos {
	out := map[string]Pos{}
	if n.Kind != yaml.MappingNode {
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		out[n.Content[i].Value] = pos(n.Content[i])
		// Nested keys (chain_parameters.symmetric) by their own name too.
		if v := n.Content[i+1]; v.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(v.Content); j += 2 {
				out[v.Content[j].Value] = pos(v.Content[j])
			}
		}
	}
	return out
}

// UnmarshalYAML decodes a port pair and remembers where its fields are.
func (s *PortPairSpec) UnmarshalYAML(n *yaml.Node) error {
	type plain PortPairSpec
	return decodeFieldsAt(n, (*plain)(s), &s.Pos, &s.Fields)
}

// UnmarshalYAML decodes a port pair group and remembers where its fields are.
func (s *PortPairGroupSpec) UnmarshalYAML(n *yaml.Node) error {
	type plain PortPairGroupSpec
	return decodeFieldsAt(n, (*plain)(s), &s.Pos, &s.Fields)
}

// UnmarshalYAML decodes a flow classifier and remembers where its fields are.
func (s *FlowClassifierSpec) UnmarshalYAML(n *yaml.Node) error {
	type plain FlowClassifierSpec
	return decodeFieldsAt(n, (*plain)(s), &s.Pos, &s.Fields)
}

// UnmarshalYAML decodes a port chain and remembers where its fields are.
func (s *PortChainSpec) UnmarshalYAML(n *yaml.Node) error {
	type plain PortChainSpec
	return decodeFieldsAt(n, (*plain)(s), &s.Pos, &s.Fields)
}

// UnmarshalYAML decodes a service graph and remembers where its fields are.
func (s *ServiceGraphSpec) UnmarshalYAML(n *yaml.Node) error {
	type plain ServiceGraphSpec
	return decodeFieldsAt(n, (*plain)(s), &s.Pos, &s.Fields)
}

var ifnameRE = regexp.MustCompile(`^[a-z][a-z0-9]{0,7}$`)

// usesTransparent reports whether any transparent-only field is set, and where.
func (lab *Lab) transparentFields() (string, Pos, bool) {
	switch {
	case len(lab.Networks) > 0:
		return "networks", Pos{}, true
	case len(lab.PortPairs) > 0:
		return "port_pairs", Pos{}, true
	case len(lab.PortPairGroups) > 0:
		return "port_pair_groups", Pos{}, true
	case len(lab.FlowClassifiers) > 0:
		return "flow_classifiers", Pos{}, true
	case len(lab.PortChains) > 0:
		return "port_chains", Pos{}, true
	case len(lab.ServiceGraphs) > 0:
		return "service_graphs", Pos{}, true
	}
	for _, n := range slices.Sorted(maps.Keys(lab.Endpoints)) {
		if e := lab.Endpoints[n]; e != nil && len(e.Ports) > 0 {
			return "endpoint " + n + " ports", e.Pos, true
		}
	}
	for _, n := range slices.Sorted(maps.Keys(lab.Functions)) {
		if f := lab.Functions[n]; f != nil && len(f.Ports) > 0 {
			return "function " + n + " ports", f.Pos, true
		}
		if f := lab.Functions[n]; f != nil && IsTap(f.Params) {
			return "function " + n + " kind " + f.Kind, f.Pos, true
		}
	}
	return "", Pos{}, false
}

// transparent validates a transparent lab: nodes' hosts and ports, the kinds allowed, then
// networking-sfc's rules (package sfc), each problem at its file:line.
func (v *validator) transparent() {
	lab := v.lab
	if lab.Traits().Containers {
		v.dockerTransparent()
	}
	if len(lab.Chains) > 0 {
		v.bad(lab.Chains[0].Pos, "chains: is routed steering's; a transparent lab lists port_chains (with flow_classifiers, port_pairs, port_pair_groups)")
	}
	if len(lab.Networks) == 0 {
		lab.Networks = []string{"net"}
	}
	if len(lab.Hosts) == 0 {
		lab.Hosts = []*HostSpec{{Name: "h1"}}
	}
	nets, hosts := map[string]bool{}, map[string]bool{}
	for _, n := range lab.Networks {
		if !nameRE.MatchString(n) || len(n) > 12 {
			v.bad(Pos{}, "network %q: use lowercase letters, digits and '-', at most 12 characters", n)
		}
		if nets[n] {
			v.bad(Pos{}, "network %q listed twice", n)
		}
		nets[n] = true
	}
	for _, h := range lab.Hosts {
		hosts[h.Name] = true // names checked by hosts()
	}
	node := func(what, name string, p Pos, host *string, ports *map[string]string) {
		if *host == "" {
			*host = lab.Hosts[0].Name
		}
		if !hosts[*host] {
			v.bad(p, "%s %q: host %q is not in hosts: %v", what, name, *host, lab.HostNames())
		}
		if len(*ports) == 0 {
			*ports = map[string]string{"eth0": lab.Networks[0]}
		}
		for _, ifn := range slices.Sorted(maps.Keys(*ports)) {
			if !ifnameRE.MatchString(ifn) {
				v.bad(p, "%s %q: port %q: use a lowercase interface name of at most 8 letters and digits", what, name, ifn)
			}
			if !nets[(*ports)[ifn]] {
				v.bad(p, "%s %q: port %q is on network %q, which is not in networks: %v", what, name, ifn, (*ports)[ifn], lab.Networks)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(lab.Endpoints)) {
		e := lab.Endpoints[name]
		node("endpoint", name, e.Pos, &e.Host, &e.Ports)
		if e.Instances > 1 {
			v.bad(e.Pos, "endpoint %q: instances: a transparent endpoint is the one port flow classifiers name (logical_source_port, logical_destination_port); list each endpoint by name (instances: is for functions, whose instances each get a port pair)", name)
		}
		if e.Driver != nil {
			v.bad(e.Pos, "endpoint %q: driver: transparent ports are veths on the host's bridge (steering attaches there); drop driver: or use steering: routed", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(lab.Functions)) {
		f := lab.Functions[name]
		if f == nil {
			continue
		}
		node("function", name, f.Pos, &f.Host, &f.Ports)
		if Rewrites(f.Params) { // networking-sfc's n-tuple mapping would be needed
			v.bad(f.Pos, "function %q: kind %s rewrites addresses, and a transparent chain forwards packets unchanged (networking-sfc's n-tuple mapping is not supported): use steering: routed", name, f.Kind)
		}
		if tc, ok := f.Params.(TransparentChecker); ok {
			var p Problems
			tc.CheckTransparent(&p)
			for _, msg := range p.List() {
				v.bad(f.Pos, "function %q: %s", name, msg)
			}
		}
	}
	v.instances()
	if len(v.errs) > 0 {
		return
	}
	m, err := lab.SFCModel()
	if err != nil {
		v.bad(Pos{}, "%v", err)
		return
	}
	err = m.Validate()
	var es sfc.Errors
	if errors.As(err, &es) {
		for _, e := range es {
			v.bad(lab.posOf(e.Ref), "%s %s: %s", singular(e.Ref.Collection), e.Ref.Name, e.Msg)
		}
	}
	// A function may be in a group only through a port pair; a port pair's ports must be
	// a function's (not an endpoint's).
	for _, name := range slices.Sorted(maps.Keys(lab.PortPairs)) {
		pp := lab.PortPairs[name]
		for _, pn := range []string{pp.Ingress, pp.Egress} {
			nodeName, _, _ := cutPort(pn)
			if _, isEndpoint := lab.Endpoints[nodeName]; isEndpoint {
				v.bad(pp.Fields["ingress"], "port pair %s: port %s belongs to endpoint %s; port pairs are function instances' ports", name, pn, nodeName)
			}
		}
	}
}

// dockerTransparent refuses what a transparent lab cannot do on the docker runtime. With one
// emulated host, the host is the machine itself: a port is a container's interface on a
// Docker network (a bridge in the machine's namespace), steering attaches to the host-side
// end of its veth, and the engine connects a container to a network once. With several
// hosts, the containers start without a network of the engine's and sfclab gives them their
// ports on bridges in the hosts' namespaces (joined by VXLAN), as on netns.
func (v *validator) dockerTransparent() {
	lab := v.lab
	twice := func(what, name string, p Pos, ports map[string]string) {
		on := map[string]string{}
		for _, ifn := range slices.Sorted(maps.Keys(ports)) {
			if other, ok := on[ports[ifn]]; ok {
				v.bad(p, "%s %q: ports %s and %s are both on network %s, and Docker connects a container to a network once: put them on two networks, or give the function one port (one-armed: ingress and egress the same), or use runtime: netns", what, name, other, ifn, ports[ifn])
				continue
			}
			on[ports[ifn]] = ifn
		}
	}
	if len(lab.Hosts) <= 1 {
		for _, name := range slices.Sorted(maps.Keys(lab.Endpoints)) {
			if e := lab.Endpoints[name]; e != nil {
				twice("endpoint", name, e.Pos, e.Ports)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(lab.Functions)) {
			if f := lab.Functions[name]; f != nil {
				twice("function", name, f.Pos, f.Ports)
			}
		}
	}
	if lab.Docker.Attach == AttachNAT {
		v.bad(Pos{}, "docker attach nat publishes a routed chain's service port; a transparent lab's endpoints talk over their own networks: drop docker.attach or use steering: routed")
	}
	for _, name := range slices.Sorted(maps.Keys(lab.Functions)) {
		f := lab.Functions[name]
		if tp, ok := f.Params.(Tap); ok && tp.Capture() != "" && lab.Docker.Image == "" {
			v.bad(f.Pos, "function %q: pcap: needs tcpdump, which sfclab's docker node image does not have: drop pcap (the tap still counts), give docker.image an image with tcpdump, or use runtime: netns", name)
		}
	}
}

func singular(collection string) string {
	switch collection {
	case "flow_classifiers":
		return "flow classifier"
	case "port_pairs":
		return "port pair"
	case "port_pair_groups":
		return "port pair group"
	case "port_chains":
		return "port chain"
	case "service_graphs":
		return "service graph"
	}
	return "port"
}

// posOf finds where a model reference sits in the file.
func (lab *Lab) posOf(r sfc.Ref) Pos {
	pick := func(p Pos, fields map[string]Pos) Pos {
		if fp, ok := fields[r.Field]; ok && r.Field != "" {
			return fp
		}
		return p
	}
	switch r.Collection {
	case "flow_classifiers":
		if s := lab.FlowClassifiers[r.Name]; s != nil {
			return pick(s.Pos, s.Fields)
		}
	case "port_pairs":
		if s := lab.PortPairs[r.Name]; s != nil {
			return pick(s.Pos, s.Fields)
		}
		if s := lab.PortPairs[lab.pairOf(r.Name)]; s != nil {
			return pick(s.Pos, s.Fields)
		}
	case "port_pair_groups":
		if s := lab.PortPairGroups[r.Name]; s != nil {
			return pick(s.Pos, s.Fields)
		}
	case "port_chains":
		if s := lab.PortChains[r.Name]; s != nil {
			return pick(s.Pos, s.Fields)
		}
	case "service_graphs":
		if s := lab.ServiceGraphs[r.Name]; s != nil {
			return pick(s.Pos, s.Fields)
		}
	case "ports":
		n, _, _ := cutPort(r.Name)
		if e := lab.Endpoints[n]; e != nil {
			return e.Pos
		}
		if f := lab.Functions[n]; f != nil {
			return f.Pos
		}
		if f := lab.Functions[lab.instanceOf(n)]; f != nil {
			return f.Pos
		}
	}
	return Pos{}
}

func cutPort(p string) (node, ifname string, ok bool) {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '.' {
			return p[:i], p[i+1:], true
		}
	}
	return p, "", false
}

// byPos sorts names of resources by their place in the file, so ids follow the file.
func byPos[V any](m map[string]V, posOf func(V) Pos) []string {
	names := slices.Sorted(maps.Keys(m))
	sort.SliceStable(names, func(i, j int) bool {
		a, b := posOf(m[names[i]]), posOf(m[names[j]])
		return a.Line < b.Line || a.Line == b.Line && a.Col < b.Col
	})
	return names
}

// SFCModel returns the networking-sfc model of a transparent lab: a port per node interface
// (named NODE.IFNAME; a function with instances is nodes NAME-1 .. NAME-N), and the lab's
// classifiers, port pairs (a pair on an instanced function's ports expanded to one per
// instance, see InstanceNames), groups, chains and graphs in file order. Call it on a
// validated lab.
func (lab *Lab) SFCModel() (*sfc.Model, error) {
	m := &sfc.Model{}
	addPorts := func(name, host string, ports map[string]string) {
		for _, ifn := range slices.Sorted(maps.Keys(ports)) {
			m.Ports = append(m.Ports, sfc.Port{Name: name + "." + ifn, Node: name, Network: ports[ifn], Host: host})
		}
	}
	for _, n := range slices.Sorted(maps.Keys(lab.Endpoints)) {
		e := lab.Endpoints[n]
		addPorts(n, e.Host, e.Ports)
	}
	for _, n := range slices.Sorted(maps.Keys(lab.Functions)) {
		f := lab.Functions[n]
		for _, inst := range InstanceNames(n, f.Instances) {
			addPorts(inst, f.Host, f.Ports)
		}
	}
	for _, n := range byPos(lab.FlowClassifiers, func(s *FlowClassifierSpec) Pos { return s.Pos }) {
		s := lab.FlowClassifiers[n]
		fc := sfc.FlowClassifier{Name: n, Ethertype: s.Ethertype, Protocol: s.Protocol,
			SourcePortRangeMin: s.SourcePortRangeMin, SourcePortRangeMax: s.SourcePortRangeMax,
			DestinationPortRangeMin: s.DestinationPortRangeMin, DestinationPortRangeMax: s.DestinationPortRangeMax,
			LogicalSourcePort: s.LogicalSourcePort, LogicalDestinationPort: s.LogicalDestinationPort}
		for _, p := range []struct {
			field, text string
			dst         *netip.Prefix
		}{{"source_ip_prefix", s.SourceIPPrefix, &fc.SourceIPPrefix}, {"destination_ip_prefix", s.DestinationIPPrefix, &fc.DestinationIPPrefix}} {
			if p.text == "" {
				continue
			}
			pr, err := netip.ParsePrefix(p.text)
			if err != nil {
				a, aerr := netip.ParseAddr(p.text)
				if aerr != nil {
					return nil, &Error{File: lab.File, Pos: s.Fields[p.field], Msg: fmt.Sprintf("flow classifier %s: %s %q is not a CIDR prefix", n, p.field, p.text)}
				}
				pr = netip.PrefixFrom(a, a.BitLen())
			}
			*p.dst = pr.Masked()
		}
		m.FlowClassifiers = append(m.FlowClassifiers, fc)
	}
	for _, n := range byPos(lab.PortPairs, func(s *PortPairSpec) Pos { return s.Pos }) {
		m.PortPairs = append(m.PortPairs, lab.expandPair(n, lab.PortPairs[n])...)
	}
	for _, n := range byPos(lab.PortPairGroups, func(s *PortPairGroupSpec) Pos { return s.Pos }) {
		s := lab.PortPairGroups[n]
		var pairs []string
		for _, pp := range s.PortPairs {
			if ps := lab.PortPairs[pp]; ps != nil {
				for _, e := range lab.expandPair(pp, ps) {
					pairs = append(pairs, e.Name)
				}
			} else {
				pairs = append(pairs, pp) // unknown: sfc's validation names it
			}
		}
		m.PortPairGroups = append(m.PortPairGroups, sfc.PortPairGroup{Name: n, PortPairs: pairs, LBFields: s.LBFields, TapEnabled: s.TapEnabled})
	}
	for _, n := range byPos(lab.PortChains, func(s *PortChainSpec) Pos { return s.Pos }) {
		s := lab.PortChains[n]
		m.PortChains = append(m.PortChains, sfc.PortChain{Name: n, FlowClassifiers: s.FlowClassifiers, PortPairGroups: s.PortPairGroups,
			ChainParameters: sfc.ChainParameters{Symmetric: s.Symmetric || s.ChainParameters.Symmetric, Correlation: s.ChainParameters.Correlation}})
	}
	for _, n := range byPos(lab.ServiceGraphs, func(s *ServiceGraphSpec) Pos { return s.Pos }) {
		m.ServiceGraphs = append(m.ServiceGraphs, sfc.ServiceGraph{Name: n, PortChains: lab.ServiceGraphs[n].PortChains})
	}
	return m, nil
}
