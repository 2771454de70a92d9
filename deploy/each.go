package deploy

import (
	"context"
	goruntime "runtime"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/pool"
)

// eachNode runs fn for every node, as many at once as the host has cores (per-node steps are
// system calls into separate namespaces: they do not contend); it stops starting new ones
// after the first error or when ctx is done, and returns every error.
func eachNode(ctx context.Context, nodes []*plan.Node, fn func(n *plan.Node) error) error {
	return pool.Run(ctx, len(nodes), goruntime.NumCPU(), func(i int) error { return fn(nodes[i]) })
}
