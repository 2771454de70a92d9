// Package spec holds the lab file: its Go types, a strict YAML decoder that reports every
// problem with file:line:col, defaults and validation. It does no I/O besides reading the file
// and makes no system calls; the plan package turns a valid Lab into a deployable plan.
package spec

import (
	"net/netip"

	"go.yaml.in/yaml/v3"
)

// Runtimes a lab may ask for.
const (
	RuntimeNetns  = "netns"
	RuntimeDocker = "docker"
	// RuntimeKubernetes runs nodes as pods of a Kubernetes cluster (package runtime/kubernetes).
	RuntimeKubernetes = "kubernetes"
)

// Steering modes.
const (
	SteeringRouted = "routed"
)

// Endpoint kinds.
const (
	EndpointClient = "client"
	EndpointServer = "server"
	// EndpointHTTPServer is a server that runs an HTTP origin (Apache or nginx) serving objects
	// of chosen sizes.
	EndpointHTTPServer = "http-server"
)

// DefaultPool is where segment subnets come from unless the file says otherwise: the
// benchmarking range of RFC 2544, never routed on the Internet.
var DefaultPool = netip.MustParsePrefix("198.18.0.0/15")

// Pos is a place in the lab file.
type Pos struct {
	Line, Col int
}

// Lab is one lab file: endpoints, service functions and the chains that join them.
type Lab struct {
	// Name is the lab name; it is the owner tag of everything the lab creates.
	Name string `yaml:"name" json:"name"`
	// Runtime says where nodes live: "netns" (default), "docker" or "kubernetes" (pods of a
	// cluster; hosts: name its nodes).
	Runtime string `yaml:"runtime,omitempty" json:"runtime,omitempty"`
	// Steering says how traffic is forced through the chain: "routed" (default).
	Steering string `yaml:"steering,omitempty" json:"steering,omitempty"`
	// Links is "auto" (default: a segment of two members is a veth pair, larger ones a bridge)
	// or "bridge" (every segment is a Linux bridge, as a Docker network is).
	Links string `yaml:"links,omitempty" json:"links,omitempty"`
	// MTU of every lab interface; 0 means 1500.
	MTU int `yaml:"mtu,omitempty" json:"mtu,omitempty"`
	// Docker configures the container runtimes: Image is the docker and kubernetes runtimes'
	// (the image every container or pod runs), Attach the docker runtime's.
	Docker Docker `yaml:"docker,omitempty" json:"docker,omitempty"`
	// Addressing says where segment subnets come from.
	Addressing Addressing `yaml:"addressing,omitempty" json:"addressing,omitempty"`
	// Endpoints are the traffic sources and sinks by name.
	Endpoints map[string]*Endpoint `yaml:"endpoints" json:"endpoints"`
	// Functions are the service functions (VNFs) by name.
	Functions map[string]*Function `yaml:"functions,omitempty" json:"functions,omitempty"`
	// Chains are the port chains: from an endpoint, through hops, to an endpoint.
	Chains []*Chain `yaml:"chains" json:"chains"`

	// Transparent steering (steering: transparent), networking-sfc's model; see transparent.go.
	// Networks are the shared L2 networks (default: one named "net").
	Networks []string `yaml:"networks,omitempty" json:"networks,omitempty"`
	// Hosts are the emulated hosts, joined by VXLAN (transparent default: one named "h1");
	// routed labs place endpoints and functions on them too (see hosts.go).
	Hosts           []*HostSpec                    `yaml:"hosts,omitempty" json:"hosts,omitempty"`
	FlowClassifiers map[string]*FlowClassifierSpec `yaml:"flow_classifiers,omitempty" json:"flow_classifiers,omitempty"`
	PortPairs       map[string]*PortPairSpec       `yaml:"port_pairs,omitempty" json:"port_pairs,omitempty"`
	PortPairGroups  map[string]*PortPairGroupSpec  `yaml:"port_pair_groups,omitempty" json:"port_pair_groups,omitempty"`
	PortChains      map[string]*PortChainSpec      `yaml:"port_chains,omitempty" json:"port_chains,omitempty"`
	ServiceGraphs   map[string]*ServiceGraphSpec   `yaml:"service_graphs,omitempty" json:"service_graphs,omitempty"`

	// Kinds are the function kinds the lab was decoded with (see Decode); Validate looks
	// functions' kinds up in it.
	Kinds Kinds `yaml:"-" json:"-"`
	// File is the path the lab was read from ("" when decoded from bytes).
	File string `yaml:"-" json:"-"`
	// Dir is the directory of File, for resolving relative paths.
	Dir string `yaml:"-" json:"-"`
}

// Docker attachment modes (study B compared both).
const (
	// AttachRouted reaches containers at their own addresses.
	AttachRouted = "routed"
	// AttachNAT publishes the chain's service port on the Docker host (port mapping) and the
	// source reaches it at the host's address on its network, as a default Docker user would.
	AttachNAT = "nat"
)

// Docker configures the container runtimes: Image is the docker and kubernetes runtimes'
// (the image every container or pod runs), Attach the docker runtime's.
type Docker struct {
	// Image every node runs, a container of the docker runtime or a pod of the kubernetes
	// one (default: sfclab's own, built locally by `sfclab images build`).
	Image string `yaml:"image,omitempty" json:"image,omitempty"`
	// Attach is "routed" (default) or "nat".
	Attach string `yaml:"attach,omitempty" json:"attach,omitempty"`
}

// Addressing gives the address pool segment subnets are carved from.
type Addressing struct {
	// Pool is the prefix segment subnets are taken from (default 198.18.0.0/15).
	Pool string `yaml:"pool,omitempty" json:"pool,omitempty"`
	// Prefix is the length of each segment subnet (default 24).
	Prefix int `yaml:"prefix,omitempty" json:"prefix,omitempty"`
	// Auto is set when the file gave no prefix: the plan may then take longer prefixes
	// than the default so that a large lab's segments fit the pool.
	Auto bool `yaml:"-" json:"-"`

	Pos Pos `yaml:"-" json:"-"`
}

// Endpoint is a traffic source or sink: one node, or several instances of one.
type Endpoint struct {
	// Kind is "client", "server" or "http-server".
	Kind string `yaml:"kind" json:"kind"`
	// HTTP configures an http-server endpoint (defaults: apache on port 80, objects 1k-10M),
	// decoded into the http-server kind's parameter type (Kinds.NewParams).
	HTTP any `yaml:"-" json:"http,omitempty"`
	// http is the http: node, decoded into HTTP once the kinds are known (Decode).
	http *yaml.Node
	// Instances is how many nodes this endpoint has (servers behind a load balancer); default 1.
	Instances int `yaml:"instances,omitempty" json:"instances,omitempty"`
	// Weights are per-instance weights for load balancers in front of this endpoint.
	Weights []int `yaml:"weights,omitempty" json:"weights,omitempty"`
	// Run are commands started in every instance when the lab is deployed (through /bin/sh).
	Run []string `yaml:"run,omitempty" json:"run,omitempty"`
	// Host is the emulated host the endpoint runs on (default: the first of hosts:).
	Host string `yaml:"host,omitempty" json:"host,omitempty"`
	// Ports are its interfaces by name and the network each is on (transparent steering;
	// default eth0 on the first network).
	Ports map[string]string `yaml:"ports,omitempty" json:"ports,omitempty"`
	// Driver is how the endpoint's interface is attached (default veth; see driver.go).
	Driver *Driver `yaml:"driver,omitempty" json:"driver,omitempty"`
	// VM makes the endpoint a virtual machine (see vm.go).
	VM *VM `yaml:"vm,omitempty" json:"vm,omitempty"`

	Name string `yaml:"-" json:"-"`
	Pos  Pos    `yaml:"-" json:"-"`
}

// Function is a service function: a kind, its parameters, and how many instances (port pairs)
// its port pair group has.
type Function struct {
	// Kind is one of the lab's Kinds.
	Kind string `yaml:"kind" json:"kind"`
	// Instances is the number of port pairs in the group; default 1.
	Instances int `yaml:"instances,omitempty" json:"instances,omitempty"`
	// Weights are per-instance weights for spreading flows over the group.
	Weights []int `yaml:"weights,omitempty" json:"weights,omitempty"`
	// Params are the kind's parameters, decoded into the kind's own type (Kinds.NewParams).
	Params any `yaml:"-" json:"params,omitempty"`
	// params is the params: node, decoded into Params once the kind is known (Decode).
	params *yaml.Node
	// Host is the emulated host the function runs on (default: the first of hosts:).
	Host string `yaml:"host,omitempty" json:"host,omitempty"`
	// Ports are its interfaces by name and the network each is on (transparent steering;
	// default eth0 on the first network).
	Ports map[string]string `yaml:"ports,omitempty" json:"ports,omitempty"`
	// VM makes the function's instances virtual machines (see vm.go).
	VM *VM `yaml:"vm,omitempty" json:"vm,omitempty"`

	Name string `yaml:"-" json:"-"`
	Pos  Pos    `yaml:"-" json:"-"`
}

// Chain is a port chain: a flow classifier and the ordered hops (port pair groups) between two
// endpoints.
type Chain struct {
	// Name of the chain; default "chainN".
	Name string `yaml:"name,omitempty" json:"name"`
	// From is the endpoint traffic starts at.
	From Ref `yaml:"from" json:"from"`
	// To is the endpoint traffic ends at.
	To Ref `yaml:"to" json:"to"`
	// Classifier says which traffic enters the chain; empty matches everything.
	Classifier Classifier `yaml:"classifier,omitempty" json:"classifier,omitempty"`
	// Hops are function names in the order traffic crosses them.
	Hops []Ref `yaml:"hops,omitempty" json:"hops"`
	// Subnets optionally pins the subnet of each segment (len(Hops)+1 of them).
	Subnets []string `yaml:"subnets,omitempty" json:"subnets,omitempty"`
	// Shaping limits the rate (and, with netem, delay, jitter, loss) of the chain's segments.
	Shaping []*Shaping `yaml:"shaping,omitempty" json:"shaping,omitempty"`

	Pos Pos `yaml:"-" json:"-"`
}

// Ref is a name in the file that refers to another entry, with its position.
type Ref struct {
	Name string
	Pos  Pos
}

// Classifier is a flow classifier (networking-sfc's): which packets enter a chain.
type Classifier struct {
	// Protocol is "tcp", "udp", "icmp" or "" / "any".
	Protocol string `yaml:"protocol,omitempty" json:"protocol,omitempty"`
	// SourcePrefix and DestinationPrefix restrict addresses (CIDR).
	SourcePrefix      string `yaml:"source_prefix,omitempty" json:"source_prefix,omitempty"`
	DestinationPrefix string `yaml:"destination_prefix,omitempty" json:"destination_prefix,omitempty"`
	// SourcePort and DestinationPort are a port or a range "A-B".
	SourcePort      PortRange `yaml:"source_port,omitempty" json:"source_port,omitempty"`
	DestinationPort PortRange `yaml:"destination_port,omitempty" json:"destination_port,omitempty"`

	Pos Pos `yaml:"-" json:"-"`
}

// PortRange is a port or an inclusive range of ports; the zero value means any port.
type PortRange struct {
	From, To uint16
}

// IsZero reports whether the range matches any port.
func (r PortRange) IsZero() bool { return r.From == 0 && r.To == 0 }

// Single reports whether the range is exactly one port.
func (r PortRange) Single() bool { return r.From != 0 && r.From == r.To }
