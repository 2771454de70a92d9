package vm

import (
	"context"
	"fmt"

	"github.com/sfclab/sfclab/probe/http/load"
)

// The http probe from a VM source. On a namespace its load generator (package load: epoll Go
// code, as ab) runs on a thread of sfclab's moved into the source's network stack (Do), which
// a guest's own kernel does not allow; the agent runs the same code in the guest instead
// ("http": load.Run) and answers with its result. Its durations (each request's time, the
// run's total) are timed by the guest's clock, an emulated one under TCG; the probe stamps
// the samples with the host's time when the result returns. Only package load is linked into
// sfclab-guest for it (TestGuestAgentDeps).

// handleHTTP answers the agent's http load request; false for another op.
func handleHTTP(ctx context.Context, req request, r *response) bool {
	if req.Op != "http" {
		return false
	}
	if req.HTTP == nil {
		r.Err = "http: no load specification"
		return true
	}
	res, err := load.Run(ctx, *req.HTTP, func(f func() error) error { return f() })
	r.HTTP = res
	if err != nil {
		r.Err = err.Error()
	}
	return true
}

// HTTPLoad runs the http probe's load generator with s in the guest (http.Guest) and returns
// its result, timed by the guest's clock. The agent bounds the run by s.Deadline; the host
// waits that long and agentTimeout more.
func (n *Node) HTTPLoad(ctx context.Context, s load.Spec) (*load.Result, error) {
	if s.Deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Deadline+agentTimeout)
		defer cancel()
	}
	r, err := n.call(ctx, request{Op: "http", HTTP: &s})
	if err != nil {
		var res *load.Result
		if r != nil {
			res = r.HTTP
		}
		return res, fmt.Errorf("run the http load generator in VM node %s: %w", n.Name, err)
	}
	if r.HTTP == nil {
		return nil, fmt.Errorf("run the http load generator in VM node %s: the agent returned no result", n.Name)
	}
	return r.HTTP, nil
}
