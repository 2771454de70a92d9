package vm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sfclab/sfclab/lb"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/vnf"
)

// What `sfclab inspect` reads inside a guest (deploy.Inspect). A guest has a kernel of its own:
// the veth (or macvtap) ends in the node's namespace on the host carry its frames, but its
// interfaces, their addresses and state, and what its programs count are the guest's. The
// agent answers "links" with the guest's interfaces listed by the same netdev code as a
// namespace's (addresses, up/down, 64-bit counters), and "lb-stats" with the counters of
// sfclab's balancer (l4lb impl sfclab), read from its stats socket, which is a unix socket of
// the guest's (a socket on the 9p share would not reach the host).

// InspectTimeout bounds each read inspect makes in a guest: a guest that does not answer in
// that time (hung, stopped, or its emulated CPU starved) is shown down with that reason
// instead of holding inspect.
const InspectTimeout = 10 * time.Second

// handleInspect answers the agent's inspect requests; false for another op.
func handleInspect(ctx context.Context, req request, r *response) bool {
	switch req.Op {
	case "links":
		ns, err := netdev.OpenNS("")
		if err != nil {
			r.Err = err.Error()
			return true
		}
		defer ns.Close()
		if r.Links, err = ns.Links(); err != nil {
			r.Err = err.Error()
		}
	case "lb-stats":
		if req.Addr == "" {
			r.Err = "lb-stats: no stats socket"
			return true
		}
		if req.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, req.Timeout)
			defer cancel()
		}
		st, err := lb.ReadStats(ctx, req.Addr)
		if err != nil {
			r.Err = err.Error()
			return true
		}
		r.LB = st
	default:
		return false
	}
	return true
}

// inspectCall is one inspect request to the guest, bounded by InspectTimeout (or ctx's earlier
// deadline); a guest that does not answer in time gets an error that says so.
func (n *Node) inspectCall(ctx context.Context, req request) (*response, error) {
	ctx, cancel := context.WithTimeout(ctx, InspectTimeout)
	defer cancel()
	if d, ok := ctx.Deadline(); ok {
		req.Timeout = time.Until(d)
	}
	r, err := n.call(ctx, req)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("its guest agent did not answer within %s (QEMU runs: the guest is hung, stopped or starved of CPU): %w",
			InspectTimeout, err)
	}
	return r, err
}

// GuestLinks lists the guest's own interfaces, as its kernel has them: names (the plan's: the
// agent renamed the NICs), addresses, administrative state and counters. Bounded by
// InspectTimeout.
//
// Equivalent to: sfclab exec LAB NODE -- ip -s addr show
func (n *Node) GuestLinks(ctx context.Context) ([]netdev.LinkInfo, error) {
	r, err := n.inspectCall(ctx, request{Op: "links"})
	if err != nil {
		return nil, fmt.Errorf("list the interfaces of VM node %s in its guest: %w", n.Name, err)
	}
	return r.Links, nil
}

// BalancerStats reads the counters of an sfclab balancer in the guest from its stats socket
// there (vnf.GuestBalancer). Bounded by InspectTimeout.
//
// Equivalent to: sfclab exec LAB NODE -- socat - UNIX-CONNECT:SOCKET
func (n *Node) BalancerStats(ctx context.Context, socket string) (*lb.Stats, error) {
	r, err := n.inspectCall(ctx, request{Op: "lb-stats", Addr: socket})
	if err != nil {
		return nil, fmt.Errorf("read the balancer's counters in VM node %s: %w", n.Name, err)
	}
	if r.LB == nil {
		return nil, fmt.Errorf("read the balancer's counters in VM node %s: no counters in the answer", n.Name)
	}
	return r.LB, nil
}

var _ vnf.GuestBalancer = (*Node)(nil)
