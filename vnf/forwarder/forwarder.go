// Package forwarder is the plain L3 router function: the node forwards between its ingress
// and egress (deploy turns ip_forward on for every function node); there is nothing else to set.
package forwarder

import (
	"context"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/vnf"
)

// Forwarder implements vnf.Function.
type Forwarder struct{}

// NewParams returns the kind's empty parameters (ForwarderParams) for the decoder.
func (Forwarder) NewParams() any { return &ForwarderParams{} }

// Requires lists nothing: forwarding is the kernel's.
func (Forwarder) Requires(*plan.Function) []string { return nil }

// Setup does nothing beyond the node's sysctls (net.ipv4.ip_forward=1).
func (Forwarder) Setup(context.Context, vnf.Env) error { return nil }

// Teardown does nothing.
func (Forwarder) Teardown(context.Context, vnf.Env) error { return nil }

// Compose has nothing to set up: the node's routes and sysctls are the whole function.
func (Forwarder) Compose(*plan.Function) ([]vnf.ComposeStep, string, error) { return nil, "", nil }
