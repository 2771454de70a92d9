package spec

import (
	"fmt"
	"net/netip"
	"slices"
)

// Kinds is what the decoder knows of function kinds: their names and, for each, a fresh value
// of its parameter type to decode params: into. spec lists no kind itself: the register of
// kinds (vnf/kinds.Spec) implements it and is passed to Load and Decode, so a new kind is
// added in its own package and the register, never here.
type Kinds interface {
	// Names lists the function kinds a lab file may name, sorted (for messages).
	Names() []string
	// NewParams returns a fresh, empty parameter value of a kind (a pointer to a struct, its
	// fields tagged for YAML and JSON), false for a kind it does not know. The value may
	// implement ParamsDefaulter and ParamsChecker.
	NewParams(kind string) (any, bool)
}

// ParamsDefaulter is a parameter type that fills in its own defaults once decoded.
type ParamsDefaulter interface {
	SetDefaults()
}

// ParamsChecker is a parameter type that checks itself once its defaults are in; fn is the
// function it belongs to (its name, instances). Each problem is added to p.
type ParamsChecker interface {
	Check(fn *Function, p *Problems)
}

// The plan resolves addresses for three kinds of parameters, by what they implement, never by
// kind name: a new kind that terminates connections or rewrites destinations implements one
// of these in its own package and the plan serves it unchanged.

// Listener is a parameter type of a node that accepts connections on one port (an origin
// server, a proxy): a proxy in front of it connects to that port by default.
type Listener interface {
	// ListenPort is the port it accepts connections on; for a Proxy, 0 means the chain
	// classifier's single destination port.
	ListenPort() uint16
}

// ObjectServer is a parameter type of an origin that serves objects by size name (an
// http-server endpoint), each at ObjectPath(size) on its ListenPort: the http probe asks it
// what it may request.
type ObjectServer interface {
	Listener
	// ServedObjects are the size names it serves (ParseSize), the first the default.
	ServedObjects() []string
}

// Proxy is a parameter type of a kind that accepts the chain's connections and spreads them
// over the nodes of the chain's next hop (l4lb, http-proxy): the plan gives it its listen port
// and its backends, one per next-hop node, with their addresses, weights and ports.
type Proxy interface {
	Listener
	// ConnectPort is the port it connects to on a backend, given its own listen port and the
	// port the backend's Listener params name (0: the backend names none).
	ConnectPort(listen, backendListens uint16) uint16
}

// ForwardProxy is a Proxy whose clients address it as an HTTP forward proxy (http-proxy): a
// request names its origin in an absolute URL (GET http://ORIGIN:PORT/PATH), where a client of
// any other Proxy addresses the proxy itself.
type ForwardProxy interface {
	Proxy
	// ForwardProxy marks the type; it does nothing.
	ForwardProxy()
}

// Rewriter is a parameter type of a kind that rewrites destinations (DNAT): the plan resolves
// each rule's target (an endpoint of the chain, or an address) to an address.
type Rewriter interface {
	DNATRules() []DNATRule
}

// FastPath is a parameter type of a kind with a transparent fast path: a tc program at its
// node's ports that forwards in place of the kernel (deploy attaches it in a transparent lab).
// FastPath names the program, or returns "" when these params turn it off.
type FastPath interface {
	FastPath() string
}

// The fast paths a FastPath names.
const (
	// FastPathBump hands every packet that is not the node's own to the way's egress port.
	FastPathBump = "bump"
	// FastPathOffload forwards the packets of established flows (conntrack's) and leaves the
	// rest to the kernel's forwarding and ruleset.
	FastPathOffload = "offload"
)

// RoutedChecker is a parameter type with settings only a transparent lab honours: in a routed
// lab, CheckRouted adds a problem for each one set (reported as `function "NAME": PROBLEM`).
type RoutedChecker interface {
	CheckRouted(p *Problems)
}

// TransparentChecker is a parameter type with settings a transparent lab cannot honour (the
// counterpart of RoutedChecker): there, CheckTransparent adds a problem for each one set
// (reported as `function "NAME": PROBLEM`).
type TransparentChecker interface {
	CheckTransparent(p *Problems)
}

// Tap is a parameter type of a kind that only receives copies of a chain's traffic (a tap
// port pair group's instance) and forwards nothing: a lab with one is transparent, the plan
// gives its node no ways through, and probes count what it receives at its ingress.
type Tap interface {
	// Capture is the file inside the lab's run directory it writes what it receives to, ""
	// when it only counts.
	Capture() string
}

// IsTap reports whether a kind with these params is a tap (Tap): the one way to ask.
func IsTap(params any) bool {
	_, ok := params.(Tap)
	return ok
}

// Balancer is a parameter type of a load balancer: runs record, per scenario, which one it
// is, under the name the report groups balancers by (report.Balancer*, e.g.
// "haproxy-splice").
type Balancer interface {
	BalancerName() string
}

// Rewrites reports whether a kind with these params changes the addresses of the traffic it
// forwards (a Proxy terminates connections, a Rewriter rewrites destinations), which a
// transparent chain cannot carry.
func Rewrites(params any) bool {
	switch params.(type) {
	case Proxy, Rewriter:
		return true
	}
	return false
}

// IPForwarding is a parameter type that decides whether its node forwards IP; without it a
// function's node forwards and an endpoint's does not.
type IPForwarding interface {
	// ForwardsIP returns the choice and whether one was made.
	ForwardsIP() (forward, set bool)
}

// Problems collects what a ParamsChecker finds about one function; validation reports each as
// `function "NAME": PROBLEM` at the function's line.
type Problems struct {
	msgs []string
}

// Addf adds one problem.
func (p *Problems) Addf(format string, args ...any) {
	p.msgs = append(p.msgs, fmt.Sprintf(format, args...))
}

// OneOf adds a problem when got is not one of allowed.
func (p *Problems) OneOf(what, got string, allowed ...string) {
	if !slices.Contains(allowed, got) {
		p.Addf("%s %q is not one of %v", what, got, allowed)
	}
}

// Protocol adds a problem when proto is not tcp, udp, icmp or any, or has ports without
// being tcp or udp.
func (p *Problems) Protocol(what, proto string, ports ...PortRange) {
	switch proto {
	case "", "any", "icmp":
		for _, r := range ports {
			if !r.IsZero() {
				p.Addf("%s has a port but protocol %q; ports need tcp or udp", what, proto)
				return
			}
		}
	case "tcp", "udp":
	default:
		p.Addf("%s protocol %q is not one of tcp, udp, icmp, any", what, proto)
	}
}

// Prefix adds a problem when s is set and is not an IPv4 prefix or address (ParsePrefix).
func (p *Problems) Prefix(what, s string) {
	if s == "" {
		return
	}
	if _, err := ParsePrefix(s); err != nil {
		p.Addf("%s: %v", what, err)
	}
}

// AnyPrefix checks that s, if set, is an IPv4 or IPv6 prefix or address, and returns it
// (the zero Prefix when s is empty or bad).
func (p *Problems) AnyPrefix(what, s string) netip.Prefix {
	if s == "" {
		return netip.Prefix{}
	}
	pr, err := ParseAnyPrefix(s)
	if err != nil {
		p.Addf("%s: %v", what, err)
	}
	return pr
}

// List returns the problems found, in the order they were added.
func (p *Problems) List() []string { return p.msgs }

// noKinds is the kind set of a lab decoded without one: it knows no kind.
type noKinds struct{}

func (noKinds) Names() []string              { return nil }
func (noKinds) NewParams(string) (any, bool) { return nil, false }

// kindsOr returns ks, or the empty kind set when ks is nil.
func kindsOr(ks Kinds) Kinds {
	if ks == nil {
		return noKinds{}
	}
	return ks
}

// setDefaults fills in a parameter value's defaults, if its type has any.
func setDefaults(p any) {
	if d, ok := p.(ParamsDefaulter); ok {
		d.SetDefaults()
	}
}

// paramsProblems checks a function's parameters, if their type checks itself.
func paramsProblems(fn *Function) []string {
	c, ok := fn.Params.(ParamsChecker)
	if !ok {
		return nil
	}
	var p Problems
	c.Check(fn, &p)
	return p.List()
}
