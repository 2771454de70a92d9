package vm

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sfclab/sfclab/probe/ndr/count"
)

// The ndr probe's receiver in a guest. On a namespace the probe opens its counting socket in
// the destination's network stack (Do), which a guest's own kernel does not allow; the agent
// runs the same receiver (package count) instead. "count-listen" binds it to a port and
// answers with its number, "count-read" returns a trial's count once it stopped growing
// (Settled: a guest's emulated CPU may still be reading the trial's datagrams from its socket
// when the sender's drain ends) and the guest's UdpRcvbufErrors, "count-close" closes it (a
// guest that dies takes it with it). runtime/vm's tests check that Node is a count.Guest.

// maxSettle bounds how long "count-read" waits for a trial's count to settle.
const maxSettle = 5 * time.Second

// counters are the guest's open receivers by number (the agent's side).
var counters = struct {
	sync.Mutex
	next int
	open map[int]*count.Receiver
}{open: map[int]*count.Receiver{}}

// handleCount answers the agent's counting requests; false for another op.
func handleCount(ctx context.Context, req request, r *response) bool {
	switch req.Op {
	case "count-listen":
		if req.Port == 0 {
			r.Err = "count-listen: no port"
			return true
		}
		fd, err := count.Bind(req.Port)
		if err != nil {
			r.Err = err.Error()
			return true
		}
		counters.Lock()
		counters.next++
		id := counters.next
		counters.open[id] = count.NewReceiver(fd)
		counters.Unlock()
		r.PID = id
	case "count-read":
		counters.Lock()
		rc, ok := counters.open[req.PID]
		counters.Unlock()
		if !ok {
			r.Err = fmt.Sprintf("no receiver %d", req.PID)
			return true
		}
		if req.Grace < 0 || req.Grace > maxSettle {
			r.Err = fmt.Sprintf("count-read: settle time %s is not 0-%s", req.Grace, maxSettle)
			return true
		}
		n := rc.Count(req.Trial)
		if req.Grace > 0 {
			n = rc.Settled(ctx, req.Trial, req.Grace, maxSettle)
		}
		errs, err := count.RcvbufErrors()
		if err != nil {
			r.Err = err.Error()
			return true
		}
		r.Reading = &count.Reading{Received: n, RcvbufErrors: errs}
	case "count-close":
		counters.Lock()
		rc, ok := counters.open[req.PID]
		delete(counters.open, req.PID)
		counters.Unlock()
		if !ok {
			r.Err = fmt.Sprintf("no receiver %d", req.PID)
			return true
		}
		if err := rc.Close(); err != nil {
			r.Err = err.Error()
		}
	default:
		return false
	}
	return true
}

// ListenCount starts the ndr probe's receiver on port in the guest (count.Guest), run by its
// agent.
func (n *Node) ListenCount(ctx context.Context, port uint16) (count.Counter, error) {
	r, err := n.call(ctx, request{Op: "count-listen", Port: port})
	if err != nil {
		return nil, fmt.Errorf("count on port %d in VM node %s: %w", port, n.Name, err)
	}
	return guestCounter{n: n, id: r.PID, port: port}, nil
}

type guestCounter struct {
	n    *Node
	id   int
	port uint16
}

// Read returns the trial's count, settled for quiet, and the guest's UdpRcvbufErrors.
func (c guestCounter) Read(ctx context.Context, trial uint32, quiet time.Duration) (count.Reading, error) {
	ctx, cancel := context.WithTimeout(ctx, maxSettle+agentTimeout)
	defer cancel()
	r, err := c.n.call(ctx, request{Op: "count-read", PID: c.id, Trial: trial, Grace: quiet})
	if err != nil {
		return count.Reading{}, fmt.Errorf("read the count on port %d in VM node %s: %w", c.port, c.n.Name, err)
	}
	if r.Reading == nil {
		return count.Reading{}, fmt.Errorf("read the count on port %d in VM node %s: no reading", c.port, c.n.Name)
	}
	return *r.Reading, nil
}

// Close stops the receiver in the guest. A guest that is gone has nothing left to close.
func (c guestCounter) Close() error {
	_, err := c.n.call(context.Background(), request{Op: "count-close", PID: c.id})
	if err != nil && qemuRunning(c.n.Lab, c.n.Name) {
		return fmt.Errorf("close the receiver on port %d in VM node %s: %w", c.port, c.n.Name, err)
	}
	return nil
}
