package vm

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/sfclab/sfclab/probe/rtt/echo"
)

// The rtt probe from a VM source. On a namespace its echoes leave from sockets the probe
// opens in the source's network stack (Do) and are timed on threads of sfclab's, which a
// guest's own kernel does not allow; the agent runs the same measuring path (package echo:
// the sockets, the pacing threads, the four timestamps) in the guest instead ("rtt":
// echo.Measure) and answers with the run's result. Every timestamp in it is the guest's
// clock (user space and the guest kernel's SO_TIMESTAMPING), an emulated one under TCG. The
// run is bounded by its count (echo.MaxGuestCount), rate and Config.Bound, and stops sooner
// when the host cancels it (its caller's context ends: the agent protocol's "cancel").
// Methods that need the host in the source's stack (the XDP generator, the tc path ends) are
// refused (echo.GuestRun.Validate).

// handleRTT answers the agent's rtt request; false for another op.
func handleRTT(ctx context.Context, req request, r *response) bool {
	if req.Op != "rtt" {
		return false
	}
	if req.RTT == nil {
		r.Err = "rtt: no run"
		return true
	}
	if err := req.RTT.Validate(); err != nil {
		r.Err = "rtt: " + err.Error()
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, req.RTT.Bound())
	defer cancel()
	res, err := echo.Measure(ctx, here{}, req.RTT.Dst, req.RTT.Cfg)
	r.RTT = res
	if err != nil {
		r.Err = err.Error()
	}
	return true
}

// here is the agent's own network stack (the guest's): Do runs fn as it is.
type here struct{}

func (here) Do(fn func() error) error { return fn() }

// Echo runs the rtt probe's measuring path to dst in the guest (echo.Guest) and returns its
// result (that of a run that failed part way too), timed by the guest's clock. The host
// waits the run's bound and agentTimeout more.
func (n *Node) Echo(ctx context.Context, dst netip.AddrPort, cfg echo.Config) (*echo.Result, error) {
	run := echo.GuestRun{Dst: dst, Cfg: cfg}
	if err := run.Validate(); err != nil {
		return nil, fmt.Errorf("run rtt in VM node %s: %w", n.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, run.Bound()+agentTimeout)
	defer cancel()
	r, err := n.call(ctx, request{Op: "rtt", RTT: &run})
	var res *echo.Result
	if r != nil {
		res = r.RTT
	}
	if err != nil {
		return res, fmt.Errorf("run rtt to %s in VM node %s: %w", dst, n.Name, err)
	}
	if res == nil {
		return nil, fmt.Errorf("run rtt to %s in VM node %s: the agent returned no result", dst, n.Name)
	}
	return res, nil
}
