package vm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/sfclab/sfclab/probe/tcprtt/exchange"
)

// The tcprtt probe in a guest. On a namespace it runs Go code in the node's network stack
// (Do), which a guest's own kernel does not allow; the agent runs the same code instead. In a
// destination it serves the echo server: "echo-listen" opens the listener in the guest and
// answers with its number, "echo-close" closes it and every connection it accepted (a guest
// that dies takes its echo servers with it). In a source, "tcprtt" runs the probe's measuring
// loop (exchange.Run) in the guest and answers with its durations, timed by the guest's clock.
// Only package exchange is linked for it: the probe and results packages (SQLite among
// them) would add megabytes to sfclab-guest, which every guest's kernel unpacks at boot.
// runtime/vm's tests check that Node is a probe.Echoer and a tcprtt.Guest.

// echoes are the guest's open echo servers by number (the agent's side).
var echoes = struct {
	sync.Mutex
	next int
	open map[int]*guestEcho
}{open: map[int]*guestEcho{}}

// guestEcho is one echo server in the guest: its listener and the connections it serves
// (TCP), or its socket (UDP: the rtt probe's responder).
type guestEcho struct {
	l     net.Listener
	pc    *net.UDPConn
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// handleEcho answers the agent's echo requests; false for another op.
func handleEcho(ctx context.Context, req request, r *response) bool {
	switch req.Op {
	case "echo-listen":
		e := &guestEcho{conns: map[net.Conn]struct{}{}}
		var err error
		switch req.Net {
		case "tcp4", "tcp6":
			e.l, err = net.Listen(req.Net, req.Addr)
		case "udp4", "udp6":
			var a *net.UDPAddr
			if a, err = net.ResolveUDPAddr(req.Net, req.Addr); err == nil {
				e.pc, err = net.ListenUDP(req.Net, a)
			}
		default:
			err = fmt.Errorf("echo server network %q is not tcp4, tcp6, udp4 or udp6", req.Net)
		}
		if err != nil {
			r.Err = err.Error()
			return true
		}
		echoes.Lock()
		echoes.next++
		id := echoes.next
		echoes.open[id] = e
		echoes.Unlock()
		if e.pc != nil {
			_ = e.pc.SetReadBuffer(udpEchoBuf)
			e.wg.Go(e.serveUDP)
		} else {
			e.wg.Go(e.serve)
		}
		r.PID = id
	case "tcprtt":
		if req.TCPRTT == nil {
			r.Err = "tcprtt: no configuration"
			return true
		}
		ctx, cancel := context.WithTimeout(ctx, req.TCPRTT.Bound())
		defer cancel()
		err := exchange.Run(ctx, req.Addr, *req.TCPRTT, func(f func() error) error { return f() },
			func(_ int, d time.Duration) { r.Connects = append(r.Connects, d) },
			func(_ int, d time.Duration) { r.Exchanges = append(r.Exchanges, d) })
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

// udpEchoBuf is a UDP echo socket's receive buffer: the rtt probe's responder's (rtt.rcvBuf).
const udpEchoBuf = 8 << 20

// serveUDP echoes every datagram back to its sender, as the rtt probe's Responder does in a
// namespace.
func (e *guestEcho) serveUDP() {
	buf := make([]byte, 65536)
	for {
		n, from, err := e.pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		_, _ = e.pc.WriteToUDPAddrPort(buf[:n], from)
	}
}

// close closes the listener (or socket) and the connections and waits for their goroutines.
func (e *guestEcho) close() {
	if e.pc != nil {
		e.pc.Close()
	} else {
		e.l.Close()
	}
	e.mu.Lock()
	for c := range e.conns {
		c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
}

// ListenEcho opens an echo server at addr in the guest, served by its agent (probe.Echoer):
// TCP (network "tcp4" or "tcp6": tcprtt's) or UDP ("udp4", "udp6": every datagram sent back
// to its sender, the rtt probe's responder); Close closes it there. A guest that is gone has nothing left
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

// TCPRTT runs the tcprtt probe's measuring loop to target in the guest (tcprtt.Guest) and
// returns the connects' and exchanges' durations (those before a failure too).
func (n *Node) TCPRTT(ctx context.Context, target string, cfg exchange.Config) (connects, exchanges []time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Bound()+agentTimeout)
	defer cancel()
	r, err := n.call(ctx, request{Op: "tcprtt", Addr: target, TCPRTT: &cfg})
	if r != nil {
		connects, exchanges = r.Connects, r.Exchanges
	}
	if err != nil {
		return connects, exchanges, fmt.Errorf("run tcprtt in VM node %s: %w", n.Name, err)
	}
	return connects, exchanges, nil
}
