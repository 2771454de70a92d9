// Package tcprtt measures latency at the TCP level, where ping cannot go: through L4 and L7
// proxies. It runs in-process, with no external tool: a TCP echo server inside every
// destination instance's namespace, and connects and request/response exchanges
// (exchange.Run) from inside the chain's source namespace to the chain's target (the proxy's
// service address when there is one). In a VM guest, whose network stack Go code on the host
// cannot enter, the guest's agent serves the echo server (probe.Echoer) and runs the
// exchanges (Guest).
package tcprtt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/tcprtt/exchange"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/results/metric"
)

// Name is the probe's name in samples.
const Name = "tcprtt"

// Config is one tcprtt run (exchange.Config: connects, requests, size, timeout).
type Config = exchange.Config

type prober struct{ cfg Config }

// New returns the tcprtt probe.
func New(cfg Config) probe.Probe { return &prober{cfg: cfg} }

// Name returns "tcprtt".
func (*prober) Name() string { return Name }

// Run starts an echo server on probe.ServicePort in every destination instance, then from the
// chain's source times Connects connection set-ups to the chain's target ("connect", ms: from
// the SYN until the handshake completes at the first hop that terminates TCP, so through a
// proxy it is the proxy's handshake) and Requests exchanges of Size bytes over one connection
// ("rtt", ms: write the request, read the whole echo back). Both carry label seq. Any failed
// connect or exchange ends the run with an error (the samples taken so far are kept); every
// step is bounded by Timeout. The echo servers are closed before Run returns; they use the
// port iperf3's servers use, so the two probes must not run at the same time.
func (p *prober) Run(ctx context.Context, env probe.Env, emit func(results.Sample)) error {
	cfg := p.cfg.WithDefaults()
	c := env.Chain
	dests := probe.DestinationNodes(env.Plan, c)
	if len(dests) == 0 || len(c.Path) == 0 {
		return fmt.Errorf("run tcprtt on chain %s: destination %q has no nodes", c.Name, c.To)
	}
	target := net.JoinHostPort(c.Target.String(), strconv.Itoa(int(probe.TargetPort(env.Plan, c))))
	what := fmt.Sprintf("run tcprtt from %s to %s", c.Path[0], target)

	echo := &echoServer{}
	defer echo.Close()
	port := probe.ServicePort(env.Plan, c)
	network := "tcp4"
	if c.Target.Is6() {
		network = "tcp6"
	}
	for _, name := range dests {
		n, err := env.Node(name)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := echo.Listen(ctx, n, name, network, port); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	src, err := env.Node(c.Path[0])
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}

	if g, ok := src.(Guest); ok {
		// Timed by the guest's clock; the samples are stamped with the host's time now.
		connects, exchanges, err := g.TCPRTT(ctx, target, cfg)
		size := strconv.Itoa(cfg.Size)
		for i, d := range connects {
			emit(metric.TCPConnect.Sample(ms(d), map[string]string{"seq": strconv.Itoa(i + 1)}))
		}
		for i, d := range exchanges {
			emit(metric.TCPRoundTr.Sample(ms(d), map[string]string{"seq": strconv.Itoa(i + 1), "size": size}))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	if err := Client(ctx, target, cfg, src.Do, emit); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Guest is a source node whose network stack Go code cannot enter (a VM guest): it runs
// exchange.Run itself (its agent does) and returns the durations.
type Guest interface {
	// TCPRTT runs exchange.Run against target with cfg in the node and returns the connects'
	// and the exchanges' durations, in order (those taken before a failure too), and its error.
	TCPRTT(ctx context.Context, target string, cfg Config) (connects, exchanges []time.Duration, err error)
}

// Client is tcprtt's client side: exchange.Run, each connect and exchange emitted as a sample
// ("connect", "rtt", ms) with label seq ("size" too on "rtt"). Its sockets are created inside
// do.
func Client(ctx context.Context, target string, cfg Config, do func(func() error) error, emit func(results.Sample)) error {
	size := strconv.Itoa(cfg.WithDefaults().Size)
	return exchange.Run(ctx, target, cfg, do, func(i int, d time.Duration) {
		emit(metric.TCPConnect.Sample(ms(d), map[string]string{"seq": strconv.Itoa(i)}))
	}, func(i int, d time.Duration) {
		emit(metric.TCPRoundTr.Sample(ms(d), map[string]string{"seq": strconv.Itoa(i), "size": size}))
	})
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// echoServer echoes every TCP connection it accepts on its listeners; those of nodes that
// serve their own (guests) it only closes.
type echoServer struct {
	mu        sync.Mutex
	listeners []net.Listener
	served    []io.Closer
	conns     map[net.Conn]struct{}
	closed    bool
	wg        sync.WaitGroup
}

// Listen opens a listener on all addresses of node n (of network "tcp4" or "tcp6") at port,
// inside its namespace, and serves it in the background; a node that serves its own echo
// server (probe.Echoer: a VM guest) opens it there.
func (e *echoServer) Listen(ctx context.Context, n probe.Node, name, network string, port uint16) error {
	var l net.Listener
	addr := net.JoinHostPort("", strconv.Itoa(int(port)))
	if g, ok := n.(probe.Echoer); ok {
		c, err := g.ListenEcho(ctx, network, addr)
		if err != nil {
			return fmt.Errorf("listen on %s in node %s: %w", addr, name, err)
		}
		e.mu.Lock()
		e.served = append(e.served, c)
		e.mu.Unlock()
		return nil
	}
	if err := n.Do(func() (err error) { l, err = net.Listen(network, addr); return err }); err != nil {
		return fmt.Errorf("listen on %s in node %s: %w", addr, name, err)
	}
	e.mu.Lock()
	e.listeners = append(e.listeners, l)
	e.mu.Unlock()
	e.wg.Go(func() { e.serve(l) })
	return nil
}

func (e *echoServer) serve(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			c.Close()
			return
		}
		if e.conns == nil {
			e.conns = map[net.Conn]struct{}{}
		}
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

// Close closes the listeners and every open connection and waits for the serving goroutines.
func (e *echoServer) Close() error {
	e.mu.Lock()
	e.closed = true
	var errs []error
	for _, l := range e.listeners {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for c := range e.conns {
		c.Close()
	}
	for _, c := range e.served {
		if err := c.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	e.mu.Unlock()
	e.wg.Wait()
	return errors.Join(errs...)
}
