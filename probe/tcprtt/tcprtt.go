// Package tcprtt measures latency at the TCP level, where ping cannot go: through L4 and L7
// proxies. It runs in-process, with no external tool: a TCP echo server inside every
// destination instance's namespace (in a VM guest, served by the guest's agent: probe.Echoer),
// and connects and request/response exchanges from inside
// the chain's source namespace to the chain's target (the proxy's service address when there
// is one).
package tcprtt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/results/metric"
)

// Name is the probe's name in samples.
const Name = "tcprtt"

// Config is one tcprtt run.
type Config struct {
	// Connects is the number of connection set-ups timed (dial, then close); 0 means 10.
	Connects int
	// Requests is the number of request/response exchanges timed over one connection;
	// 0 means 100.
	Requests int
	// Size is the request (and echoed response) size in bytes; 0 means 64.
	Size int
	// Timeout bounds each connect and each exchange; 0 means 1 s.
	Timeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.Connects <= 0 {
		c.Connects = 10
	}
	if c.Requests <= 0 {
		c.Requests = 100
	}
	if c.Size <= 0 {
		c.Size = 64
	}
	if c.Timeout <= 0 {
		c.Timeout = time.Second
	}
	return c
}

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
	cfg := p.cfg.withDefaults()
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
		samples, err := g.TCPRTT(ctx, target, cfg)
		for _, x := range samples {
			emit(x)
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
// Client itself (its agent does) and returns the samples.
type Guest interface {
	// TCPRTT runs Client against target with cfg in the node and returns its samples (those
	// taken before a failure too) and its error.
	TCPRTT(ctx context.Context, target string, cfg Config) ([]results.Sample, error)
}

// Client is tcprtt's client side: it times cfg.Connects connection set-ups to target and
// cfg.Requests exchanges of cfg.Size bytes over one connection (defaults filled in), each
// bounded by cfg.Timeout, and emits a sample for each. Its sockets are created inside do
// (a node's Do: its network namespace; in a guest's agent, a plain call).
func Client(ctx context.Context, target string, cfg Config, do func(func() error) error, emit func(results.Sample)) error {
	cfg = cfg.withDefaults()
	size := strconv.Itoa(cfg.Size)
	for i := 1; i <= cfg.Connects; i++ {
		var d time.Duration
		err := do(func() error {
			conn, dur, err := dial(ctx, target, cfg.Timeout)
			if err != nil {
				return err
			}
			d = dur
			return conn.Close()
		})
		if err != nil {
			return fmt.Errorf("connect %d: %w", i, err)
		}
		emit(metric.TCPConnect.Sample(ms(d), map[string]string{"seq": strconv.Itoa(i)}))
	}

	var conn net.Conn
	if err := do(func() (err error) { conn, _, err = dial(ctx, target, cfg.Timeout); return err }); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req, resp := make([]byte, cfg.Size), make([]byte, cfg.Size)
	for i := 1; i <= cfg.Requests; i++ {
		for j := range req {
			req[j] = byte(i + j)
		}
		if err := conn.SetDeadline(time.Now().Add(cfg.Timeout)); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		t0 := time.Now()
		if _, err := conn.Write(req); err != nil {
			return fmt.Errorf("request %d: %w", i, ctxErr(ctx, err))
		}
		if _, err := io.ReadFull(conn, resp); err != nil {
			return fmt.Errorf("request %d: read response: %w", i, ctxErr(ctx, err))
		}
		d := time.Since(t0)
		if !bytes.Equal(req, resp) {
			return fmt.Errorf("request %d: the response differs from the request", i)
		}
		emit(metric.TCPRoundTr.Sample(ms(d), map[string]string{"seq": strconv.Itoa(i), "size": size}))
	}
	return nil
}

// Bound is the longest a Client run with cfg may take: every connect and exchange at its
// timeout.
func (c Config) Bound() time.Duration {
	c = c.withDefaults()
	return time.Duration(c.Connects+c.Requests+1) * c.Timeout
}

// ctxErr prefers the context's error over the deadline error it caused.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// dial connects to addr and times the handshake. Call it inside a node's Do: the socket is
// created on the calling (namespace-locked) thread.
func dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, time.Duration, error) {
	d := net.Dialer{Timeout: timeout}
	t0 := time.Now()
	conn, err := d.DialContext(ctx, "tcp", addr)
	return conn, time.Since(t0), err
}

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
