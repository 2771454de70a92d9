// Package plan resolves a validated lab into a deterministic, runtime-neutral plan: node
// names, namespaces, interfaces, segments, addresses, routes, policy rules and the hop order
// of every chain. It is pure: no system calls, the same lab always gives the same plan.
package plan

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/sfclab/sfclab/spec"
)

// Node roles.
const (
	RoleClient   = "client"
	RoleServer   = "server"
	RoleFunction = "function"
)

// NetnsPrefix starts the name of every network namespace sfclab creates; the lab name and a
// dot follow, so a lab's namespaces are found by prefix without the lab file.
const NetnsPrefix = "sfc."

// Plan is everything a runtime needs to build a lab.
type Plan struct {
	Lab      string `json:"lab"`
	Runtime  string `json:"runtime"`
	Steering string `json:"steering"`
	MTU      int    `json:"mtu"`
	// Image is the container image of every node (docker runtime; "" = sfclab's own).
	Image string `json:"image,omitempty"`
	// Attach is the docker attachment mode: "routed" or "nat" (docker runtime only).
	Attach string `json:"attach,omitempty"`
	// Publish are the ports a docker lab publishes on the host (attach nat).
	Publish []Publish `json:"publish,omitempty"`
	// Fabric is the namespace that holds the lab's bridges ("" when the lab has none).
	Fabric   string     `json:"fabric,omitempty"`
	Nodes    []*Node    `json:"nodes"`
	Segments []*Segment `json:"segments"`
	Chains   []*Chain   `json:"chains"`
	// Hosts are a routed lab's emulated hosts (nil: every node on the machine itself, as one
	// host); a transparent plan keeps its hosts in Transparent.Hosts. See AllHosts.
	Hosts []*Host `json:"hosts,omitempty"`
	// Underlay is the namespace of the bridge joining a routed lab's hosts ("" with fewer
	// than two).
	Underlay string `json:"underlay,omitempty"`
	// Transparent is set for steering: transparent; then Nodes lists the nodes (for exec, CPU,
	// inspect and telemetry) and Chains is empty: the networks, ports and port chains are
	// here. Segments are empty too, except on docker with one emulated host: there the
	// runtime makes a Docker network per network (a segment each, with its gateway) and gives
	// each node an interface per port (its Interfaces). See HostPorts.
	Transparent *Transparent `json:"transparent,omitempty"`
}

// HostPorts reports whether package hosts gives the nodes their ports: veths (or macvlans) to
// their host's bridges, in emulated hosts that are namespaces of their own. It is so for a
// routed lab placed on hosts and for a transparent lab on netns, and on docker too, except
// for a transparent lab with one host (the machine itself, its Docker networks' bridges). On
// docker each container then starts without a network of the engine's, and its namespace is
// also named Node.Netns, as a netns node's is.
func (p *Plan) HostPorts() bool {
	hs := p.AllHosts()
	return len(hs) > 0 && hs[0].Netns != ""
}

// Containers reports whether the plan's runtime makes its nodes containers of an engine
// (spec.RuntimeTraits): an image, the engine's networks, published ports.
func (p *Plan) Containers() bool {
	t, _ := spec.TraitsOf(p.Runtime)
	return t.Containers
}

// Node is one namespace or container: an endpoint instance or a function instance (a port pair).
type Node struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// Kind is the function kind, or the endpoint kind.
	Kind string `json:"kind"`
	// Group is the endpoint or function this node is an instance of (its port pair group).
	Group    string `json:"group"`
	Instance int    `json:"instance"`
	Weight   int    `json:"weight"`
	Netns    string `json:"netns"`
	// Chain is the chain a function node serves ("" for endpoints, which may be in several).
	Chain      string       `json:"chain,omitempty"`
	Interfaces []*Interface `json:"interfaces"`
	Routes     []Route      `json:"routes,omitempty"`
	Rules      []Rule       `json:"rules,omitempty"`
	Sysctls    []Sysctl     `json:"sysctls,omitempty"`
	Run        []string     `json:"run,omitempty"`
	// Function is set on function nodes, and on endpoints that run a service (http-server):
	// what the kind needs to set itself up.
	Function *Function `json:"function,omitempty"`
	// Driver is how the node's interfaces are attached when not by veth (nil: veth).
	Driver *spec.Driver `json:"driver,omitempty"`
	// Host is the emulated host the node runs on ("" when the lab has no hosts).
	Host string `json:"host,omitempty"`
	// VM is set when the node is a virtual machine (runtime vm).
	VM *VM `json:"vm,omitempty"`
}

// VM is a VM node's machine: vCPUs, memory in MiB, host cores, NIC model.
type VM struct {
	CPUs   int    `json:"cpus"`
	Memory int    `json:"memory"`
	Pin    string `json:"pin,omitempty"`
	NIC    string `json:"nic"`
	// Image is the guest image: spec.VMImageBusybox or spec.VMImageDebian ("" = busybox,
	// as journals written before the field read).
	Image string `json:"image,omitempty"`
	// Backend is how the guest's ports reach the lab's network: spec.VMBackendTap or
	// spec.VMBackendMacvtap ("" = tap, as journals written before the field read).
	Backend string `json:"backend,omitempty"`
	// Programs are programs an experiment's probes start in this guest beyond what its
	// kind and run commands need (ab, for http's ab: true from a VM source); set when the
	// experiment is loaded, not from the lab file. A Debian image gets their packages
	// (runtime/vm.ProgramSets).
	Programs []string `json:"programs,omitempty"`
	// Where is the vm: settings' place in the lab file (file:line:col), for errors found
	// once the host is looked at; not journaled.
	Where string `json:"-"`
}

// Text is the VM as the plan's text shows it (deploy --dry-run): vCPUs, memory, pinning, NIC,
// guest image and how its ports reach the lab, so a reader sees which nodes boot as VMs.
func (v *VM) Text() string {
	t := fmt.Sprintf("%d vCPU, %d MiB", v.CPUs, v.Memory)
	if v.Pin != "" {
		t += ", pinned to cores " + v.Pin
	}
	return t + fmt.Sprintf(", nic %s on %s, image %s", v.NIC, cmp.Or(v.Backend, spec.VMBackendTap), cmp.Or(v.Image, spec.VMImageBusybox))
}

// Macvtap reports whether the VM's ports are macvtaps on their segments' bridges.
func (v *VM) Macvtap() bool { return v != nil && v.Backend == spec.VMBackendMacvtap }

// Interface is one network interface of a node, on one segment.
type Interface struct {
	Name    string       `json:"name"`
	Segment string       `json:"segment"`
	Address netip.Prefix `json:"address"`
	// Side is "ingress" or "egress" on function nodes (the port pair), "" on endpoints.
	Side string `json:"side,omitempty"`
	// Peer is where the other end of this interface's veth is: "node/ifname", or
	// "fabric/port" when the segment is a bridge.
	Peer string `json:"peer"`
}

// Segment is one L2 network: a veth pair between two members or a bridge for more.
type Segment struct {
	Name   string       `json:"name"`
	Chain  string       `json:"chain"`
	Index  int          `json:"index"`
	Subnet netip.Prefix `json:"subnet"`
	// Bridge is the bridge's name in the fabric namespace ("" for a plain veth pair).
	Bridge string `json:"bridge,omitempty"`
	// Members are "node/ifname" in address order.
	Members []string `json:"members"`
	// Ports are the bridge-side veth names in the fabric namespace, parallel to Members.
	Ports []string `json:"ports,omitempty"`
	// Gateway is the host's address on the segment's Docker network (docker runtime only):
	// the last usable address, which no member gets.
	Gateway netip.Addr `json:"gateway,omitzero"`
	// Shape limits every member interface's egress (tbf; netem for delay, jitter, loss).
	Shape *spec.Shape `json:"shape,omitempty"`
}

// Publish is a port a docker node publishes on the host, at the gateway address of the
// chain source's network.
type Publish struct {
	Node     string     `json:"node"`
	Protocol string     `json:"protocol"`
	Port     uint16     `json:"port"`
	HostIP   netip.Addr `json:"host_ip"`
	HostPort uint16     `json:"host_port"`
}

// Route is a route in a node.
type Route struct {
	Dst      netip.Prefix `json:"dst"`
	NextHops []NextHop    `json:"via"`
	Table    int          `json:"table,omitempty"`
}

// NextHop is one gateway of a route; several make a weighted multipath route.
type NextHop struct {
	Via    netip.Addr `json:"addr"`
	Dev    string     `json:"dev"`
	Weight int        `json:"weight"`
}

// Rule is a policy routing rule: the routed-steering form of a flow classifier.
type Rule struct {
	Priority int            `json:"priority"`
	Table    int            `json:"table"`
	Protocol string         `json:"protocol,omitempty"`
	SrcPort  spec.PortRange `json:"sport,omitempty"`
	DstPort  spec.PortRange `json:"dport,omitempty"`
	Src      netip.Prefix   `json:"from,omitempty"`
	Dst      netip.Prefix   `json:"to,omitempty"`
}

// Sysctl is a kernel setting inside a node, key in dotted form.
type Sysctl struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Function is what a function kind needs to set up one instance.
type Function struct {
	Kind string `json:"kind"`
	// Params are the kind's parameters, with defaults applied (spec's *XParams types).
	Params  any    `json:"params"`
	Ingress string `json:"ingress"`
	Egress  string `json:"egress"`
	// IngressAddr and EgressAddr are the port pair's addresses.
	IngressAddr netip.Addr `json:"ingress_addr"`
	EgressAddr  netip.Addr `json:"egress_addr"`
	// IPv6: the function's ports are dual-stack (a transparent lab): its rules cover IPv6 too.
	IPv6 bool `json:"ipv6,omitempty"`
	// Port is the port a proxy listens on (l4lb).
	Port uint16 `json:"port,omitempty"`
	// Backends are the chain destination's instances (l4lb) as the function reaches them.
	Backends []Backend `json:"backends,omitempty"`
	// DNAT are nat rules with their targets resolved to addresses.
	DNAT []DNAT `json:"dnat,omitempty"`
}

// Backend is one destination instance behind a load balancer.
type Backend struct {
	Name   string     `json:"name"`
	Addr   netip.Addr `json:"addr"`
	Port   uint16     `json:"port"`
	Weight int        `json:"weight"`
}

// DNAT is a resolved destination NAT rule.
type DNAT struct {
	Protocol string     `json:"protocol"`
	Port     uint16     `json:"port"`
	To       netip.Addr `json:"to"`
	ToPort   uint16     `json:"to_port"`
}

// Chain is a resolved port chain.
type Chain struct {
	Name       string          `json:"name"`
	From       string          `json:"from"`
	To         string          `json:"to"`
	Classifier spec.Classifier `json:"classifier"`
	// Hops are the port pair groups in order.
	Hops []Hop `json:"hops"`
	// Path is the node sequence of the first instance of every hop, from source to destination.
	Path []string `json:"path"`
	// Target is the address the source sends to: the first proxy's service address, or the
	// destination's first instance.
	Target netip.Addr `json:"target"`
	// TargetNode is the node that owns Target.
	TargetNode string `json:"target_node"`
	// Port is the destination port traffic uses, when one is known (the proxy's port or the
	// classifier's single destination port); 0 otherwise.
	Port uint16 `json:"port,omitempty"`
	// Table is the routing table holding the chain's routes at its ends.
	Table int `json:"table"`
	// Segments are the chain's segments in order.
	Segments []string `json:"segments"`
}

// Hop is one port pair group of a chain.
type Hop struct {
	Group     string   `json:"group"`
	Kind      string   `json:"kind"`
	Instances []string `json:"instances"`
}

// Node returns the node called name, or nil.
func (p *Plan) Node(name string) *Node {
	for _, n := range p.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Segment returns the segment called name, or nil.
func (p *Plan) Segment(name string) *Segment {
	for _, s := range p.Segments {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Chain returns the chain called name, or nil.
func (p *Plan) Chain(name string) *Chain {
	for _, c := range p.Chains {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Interface returns the node's interface called name, or nil.
func (n *Node) Interface(name string) *Interface {
	for _, i := range n.Interfaces {
		if i.Name == name {
			return i
		}
	}
	return nil
}

// NetnsName is the namespace of a lab's node.
func NetnsName(lab, node string) string { return NetnsPrefix + lab + "." + node }

// FabricName is the namespace that holds a lab's bridges.
func FabricName(lab string) string { return NetnsPrefix + lab }

// IsProxy reports whether a node's function terminates the chain's connections (its params
// implement spec.Proxy), so that the source addresses the function instead of the
// destination. It is the one way to ask: the kind's parameter type answers, not its name.
func (n *Node) IsProxy() bool {
	if n == nil || n.Function == nil {
		return false
	}
	_, ok := n.Function.Params.(spec.Proxy)
	return ok
}

// UnmarshalJSON decodes a stored function; its params stay raw JSON (json.RawMessage) until
// Unmarshal gives them the type of the function's kind.
func (f *Function) UnmarshalJSON(data []byte) error {
	type plain Function
	var raw struct {
		plain
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*f = Function(raw.plain)
	f.Params = raw.Params
	return nil
}

// Unmarshal decodes a stored plan (as written by json.Marshal), each function's params into
// its kind's own type; kinds are the function kinds of this build (vnf/kinds.Spec()), nil to
// leave params raw JSON.
func Unmarshal(data []byte, kinds spec.Kinds) (*Plan, error) {
	var p Plan
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, err
	}
	var fns []*Function
	for _, n := range p.Nodes {
		fns = append(fns, n.Function)
	}
	if p.Transparent != nil {
		for _, n := range p.Transparent.Nodes {
			fns = append(fns, n.Function)
		}
	}
	for _, f := range fns {
		if f == nil || kinds == nil {
			continue
		}
		if err := f.decodeParams(kinds); err != nil {
			return nil, err
		}
	}
	return &p, nil
}

// decodeParams turns the raw params of a stored function into its kind's own type.
func (f *Function) decodeParams(kinds spec.Kinds) error {
	p, ok := kinds.NewParams(f.Kind)
	if !ok {
		return fmt.Errorf("decode function: unknown kind %q", f.Kind)
	}
	raw, _ := f.Params.(json.RawMessage)
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, p); err != nil {
			return fmt.Errorf("decode %s params: %w", f.Kind, err)
		}
	}
	f.Params = p
	return nil
}
