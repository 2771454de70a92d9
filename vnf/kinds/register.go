// Package kinds lists every function kind this build implements: the explicit registry
// (no init() side effects). Adding a kind means a package under vnf/ (its vnf.Function, its
// parameter type, and the optional interfaces of vnf it has), a line here and its docs
// (docs/lab-file.md, docs/lab-file.schema.json); nothing else is edited
// (internal/cli/newkind_test.go registers kinds of its own to show it). A kind whose node
// needs addresses only the plan knows gets them by what its parameter type implements:
// spec.Proxy (a listen port and backends), spec.Rewriter (DNAT targets), spec.Listener (the
// port a proxy in front connects to), spec.IPForwarding.
package kinds

import (
	"fmt"
	"slices"
	"sync"

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

// functions are the kinds a lab file's functions: may name.
var functions = map[string]vnf.Function{
	forwarder.Kind: forwarder.Forwarder{},
	firewall.Kind:  firewall.Firewall{},
	nat.Kind:       nat.NAT{},
	l4lb.Kind:      l4lb.LB{},
	custom.Kind:    custom.Custom{},
	httpproxy.Kind: httpproxy.Proxy{},
	tap.Kind:       tap.Tap{},
}

// services are the endpoint services (an endpoint's kind that runs something); they are set
// up like functions, and stored plans decode their params.
var services = map[string]vnf.Function{
	spec.EndpointHTTPServer: httpserver.Server{},
}

// extra holds kinds registered by WithExtra (tests only).
var extra struct {
	sync.RWMutex
	m map[string]vnf.Function
}

// Get returns the implementation of a function kind.
func Get(kind string) (vnf.Function, error) {
	if f, ok := lookup(kind); ok {
		return f, nil
	}
	return nil, fmt.Errorf("get function kind %q: %w", kind, vnf.ErrUnknownKind)
}

func lookup(kind string) (vnf.Function, bool) {
	if f, ok := functions[kind]; ok {
		return f, true
	}
	if f, ok := services[kind]; ok {
		return f, true
	}
	extra.RLock()
	defer extra.RUnlock()
	f, ok := extra.m[kind]
	return f, ok
}

// Names lists the function kinds a lab file may name, sorted.
func Names() []string {
	out := make([]string, 0, len(functions))
	for k := range functions {
		out = append(out, k)
	}
	extra.RLock()
	for k := range extra.m {
		out = append(out, k)
	}
	extra.RUnlock()
	slices.Sort(out)
	return out
}

// all returns every registered implementation, services and extra kinds included.
func all() []vnf.Function {
	var out []vnf.Function
	for _, m := range []map[string]vnf.Function{functions, services} {
		for _, f := range m {
			out = append(out, f)
		}
	}
	extra.RLock()
	defer extra.RUnlock()
	for _, f := range extra.m {
		out = append(out, f)
	}
	return out
}

// WithExtra registers one more function kind until the returned remove is called: for tests
// that show a kind needs nothing outside its own package and this register. It panics when
// the name is taken.
func WithExtra(name string, f vnf.Function) (remove func()) {
	if _, ok := lookup(name); ok {
		panic(fmt.Sprintf("kinds.WithExtra: kind %q is already registered", name))
	}
	extra.Lock()
	defer extra.Unlock()
	if extra.m == nil {
		extra.m = map[string]vnf.Function{}
	}
	extra.m[name] = f
	return func() {
		extra.Lock()
		defer extra.Unlock()
		delete(extra.m, name)
	}
}

// Spec returns the registered kinds as the lab decoder and stored plans need them: their names
// and a fresh parameter value for each (vnf.Function.NewParams).
func Spec() spec.Kinds { return specKinds{} }

type specKinds struct{}

func (specKinds) Names() []string { return Names() }

func (specKinds) NewParams(kind string) (any, bool) {
	f, ok := lookup(kind)
	if !ok {
		return nil, false
	}
	return f.NewParams(), true
}
