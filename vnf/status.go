package vnf

import (
	"context"

	"github.com/sfclab/sfclab/lb"
)

// Checker is a kind whose instances run a process that can die (a proxy): Check returns an
// error saying why the instance is down (with the end of its log), nil while it runs.
// `sfclab inspect` shows it; a bench trial fails with it.
type Checker interface {
	Check(ctx context.Context, env Env) error
}

// BalancerStatser is a load balancer that counts connections and bytes per backend
// (l4lb with impl sfclab); it returns nil stats for instances that do not count.
type BalancerStatser interface {
	BalancerStats(ctx context.Context, env Env) (*lb.Stats, error)
}

// GuestBalancer is a node with a kernel of its own (a VM guest) in which an sfclab balancer's
// stats socket is the guest's, out of the host's reach: the node reads the counters there
// (through its agent, within a bound).
type GuestBalancer interface {
	BalancerStats(ctx context.Context, socket string) (*lb.Stats, error)
}
