// Package kinds lists every function kind this build implements: the explicit registry
// (no init() side effects). Adding a kind means a package under vnf/ and a line here, and a
// line in spec/kinds.go for its parameters.
package kinds

import (
	"fmt"

	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf"
	"github.com/sfclab/sfclab/vnf/custom"
	"github.com/sfclab/sfclab/vnf/firewall"
	"github.com/sfclab/sfclab/vnf/forwarder"
	"github.com/sfclab/sfclab/vnf/httpproxy"
	"github.com/sfclab/sfclab/vnf/httpserver"
	"github.com/sfclab/sfclab/vnf/l4lb"
	"github.com/sfclab/sfclab/vnf/nat"
	"github.com/sfclab/sfclab/vnf/tap"
)

var registry = map[string]vnf.Function{
	spec.KindForwarder: forwarder.Forwarder{},
	spec.KindFirewall:  firewall.Firewall{},
	spec.KindNAT:       nat.NAT{},
	spec.KindL4LB:      l4lb.LB{},
	spec.KindCustom:    custom.Custom{},
	spec.KindHTTPProxy: httpproxy.Proxy{},
	spec.KindTap:       tap.Tap{},
	// Endpoint services.
	spec.EndpointHTTPServer: httpserver.Server{},
}

// Get returns the implementation of a function kind.
func Get(kind string) (vnf.Function, error) {
	f, ok := registry[kind]
	if !ok {
		return nil, fmt.Errorf("get function kind %q: %w", kind, vnf.ErrUnknownKind)
	}
	return f, nil
}
