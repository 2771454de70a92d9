package vm

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/tcprtt"
	"github.com/sfclab/sfclab/results"
)

// The tcprtt probe in a guest. On a namespace it runs Go code in the node's network stack
// (Do), which a guest's own kernel does not allow; the agent runs the same code instead. In a
// destination it serves the echo server: "echo-listen" opens the listener in the guest and
// answers with its number, "echo-close" closes it and every connection it accepted (a guest
// that dies takes its echo servers with it). In a source, "tcprtt" runs the probe's client
// (tcprtt.Client) in the guest and answers with its samples, timed by the guest's clock.

// echoes are the guest's open echo servers by number (the agent's side).
var echoes = struct {
	sync.Mutex
	next int
	open map[int]*guestEcho
}{open: map[int]*guestEcho{}}

// guestEcho is one echo server in the guest: its listener and the connections it serves.
type guestEcho struct {
	l     net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// handleEcho answers the agent's echo requests; false for another op.
func handleEcho(req request, r *response) bool {
	switch req.Op {
	case "echo-listen":
		l, err := net.Listen(req.Net, req.Addr)
		if err != nil {
			r.Err = err.Error()
			return true
		}
		e := &guestEcho{l: l, conns: map[net.Conn]struct{}{}}
		echoes.Lock()
		echoes.next++
		id := echoes.next
		echoes.open[id] = e
		echoes.Unlock()
		e.wg.Go(e.serve)
		r.PID = id
	case "tcprtt":
		if req.TCPRTT == nil {
			r.Err = "tcprtt: no configuration"
			return true
		}
		ctx, cancel := context.WithTimeout(context.Background(), req.TCPRTT.Bound())
		defer cancel()
		err := tcprtt.Client(ctx, req.Addr, *req.TCPRTT, func(f func() error) error { return f() }, func(x results.Sample) {
			r.Samples = append(r.Samples, x)
		})
		if err != nil {
			r.Err = err.Error()
		}
	case "echo-close":
		echoes.Lock()
		e, ok := echoes.open[req.PID]
		delete(echoes.open, req.PID)
		echoes.Unlock()
		if !ok {
			r.Err = fmt.Sprintf("no echo server %d", req.PID)
			return true
		}
		e.close()
	default:
		return false
	}
	return true
}

func (e *guestEcho) serve() {
	for {
		c, err := e.l.Accept()
		if err != nil {
			return
		}
		e.mu.Lock()
		e.conns[c] = struct{}{}
		e.mu.Unlock()
		e.wg.Go(func() {
			_, _ = io.Copy(c, c)
			c.Close()
			e.mu.Lock()
			delete(e.conns, c)
			e.mu.Unlock()
		})
	}
}

// close closes the listener and the connections and waits for their goroutines.
func (e *guestEcho) close() {
	e.l.Close()
	e.mu.Lock()
	for c := range e.conns {
		c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
}

// ListenEcho opens a TCP echo server at addr (network "tcp4" or "tcp6") in the guest, served
// by its agent (probe.Echoer); Close closes it there. A guest that is gone has nothing left
// to close.
func (n *Node) ListenEcho(ctx context.Context, network, addr string) (io.Closer, error) {
	r, err := n.call(ctx, request{Op: "echo-listen", Net: network, Addr: addr})
	if err != nil {
		return nil, fmt.Errorf("listen on %s in VM node %s: %w", addr, n.Name, err)
	}
	return echoCloser{n: n, id: r.PID, addr: addr}, nil
}

type echoCloser struct {
	n    *Node
	id   int
	addr string
}

func (c echoCloser) Close() error {
	_, err := c.n.call(context.Background(), request{Op: "echo-close", PID: c.id})
	if err != nil && qemuRunning(c.n.Lab, c.n.Name) {
		return fmt.Errorf("close echo server on %s in VM node %s: %w", c.addr, c.n.Name, err)
	}
	return nil
}

// TCPRTT runs the tcprtt probe's client to target in the guest (tcprtt.Guest) and returns its
// samples, stamped with the host's time on their return (the guest's clock is its own).
func (n *Node) TCPRTT(ctx context.Context, target string, cfg tcprtt.Config) ([]results.Sample, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Bound()+agentTimeout)
	defer cancel()
	r, err := n.call(ctx, request{Op: "tcprtt", Addr: target, TCPRTT: &cfg})
	if r != nil {
		now := time.Now()
		for i := range r.Samples {
			r.Samples[i].Time = now
		}
	}
	if err != nil {
		err = fmt.Errorf("run tcprtt in VM node %s: %w", n.Name, err)
		if r != nil {
			return r.Samples, err
		}
		return nil, err
	}
	return r.Samples, nil
}

var (
	_ probe.Echoer = (*Node)(nil)
	_ tcprtt.Guest = (*Node)(nil)
)
