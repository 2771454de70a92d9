package lb

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Server is a running balancer.
type Server struct {
	cfg    Config
	picker picker
	ln     *net.TCPListener // goroutine data path
	stats  net.Listener
	accel  *sockmapAccel // accel sockmap; nil: splice

	active    atomic.Int64
	total     atomic.Uint64
	refused   atomic.Uint64 // over maxconn
	noBackend atomic.Uint64 // no backend reachable
	timedOut  atomic.Uint64 // idle clients closed
	// accelFailed counts connections accel sockmap could not take (they were spliced).
	accelFailed atomic.Uint64
	warnOnce    sync.Once

	mu    sync.Mutex
	conns map[*conn]struct{}
	wg    sync.WaitGroup
}

// Listen validates cfg, binds the service address and the stats socket; nothing is accepted
// before Serve. A port in use or an unusable config is an error here.
func Listen(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, conns: map[*conn]struct{}{}}
	s.picker.balance = cfg.Balance
	for _, b := range cfg.Backends {
		be := &backend{Backend: b}
		be.up.Store(true)
		s.picker.backends = append(s.picker.backends, be)
	}
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(cfg.Listen))
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	s.ln = ln
	closeListener := func() { ln.Close() }
	if cfg.Accel == AccelSockmap {
		a, err := newSockmapAccel(cfg.MaxConn)
		if err != nil {
			closeListener()
			return nil, fmt.Errorf("accel sockmap (accel: splice works without BPF): %w", err)
		}
		s.accel = a
		prev := closeListener
		closeListener = func() { prev(); a.close() }
	}
	if cfg.Stats != "" {
		_ = os.Remove(cfg.Stats)
		st, err := net.Listen("unix", cfg.Stats)
		if err != nil {
			closeListener()
			return nil, fmt.Errorf("listen on stats socket %s: %w", cfg.Stats, err)
		}
		s.stats = st
	}
	return s, nil
}

// Addr is the address the balancer accepts on.
func (s *Server) Addr() netip.AddrPort { return s.ln.Addr().(*net.TCPAddr).AddrPort() }

// Serve accepts connections until ctx ends, then drains: the listener closes at once (new
// clients are refused by the kernel), open connections get cfg.Drain to finish and are closed
// after that. It returns when every connection is gone. Connections move on goroutines, two per
// connection on Go's netpoller.
func (s *Server) Serve(ctx context.Context) error {
	hctx, stopChecks := context.WithCancel(context.Background())
	defer stopChecks()
	if s.cfg.CheckInterval > 0 {
		for _, b := range s.picker.backends {
			go s.check(hctx, b)
		}
	}
	if s.stats != nil {
		go s.serveStats()
		defer os.Remove(s.cfg.Stats)
		defer s.stats.Close()
	}
	go func() {
		<-ctx.Done()
		s.ln.Close()
	}()
	var err error
	for {
		c, aerr := s.ln.AcceptTCP()
		if aerr != nil {
			if ctx.Err() == nil {
				err = fmt.Errorf("accept on %s: %w", s.cfg.Listen, aerr)
			}
			break
		}
		s.total.Add(1)
		if s.active.Load() >= int64(s.cfg.MaxConn) {
			s.refused.Add(1)
			reset(c)
			continue
		}
		s.active.Add(1)
		s.wg.Add(1)
		go s.handle(c)
	}
	s.drain()
	if s.accel != nil {
		s.accel.close()
	}
	return err
}

// sockmap hands cn to the sockmap verdict program; false (cn is spliced) when that fails,
// which is said once.
func (s *Server) sockmap(cn *conn) bool {
	cn.accel = s.accel
	err := s.accel.attach(cn)
	if err == nil {
		return true
	}
	cn.accel = nil
	s.accelFailed.Add(1)
	s.warnOnce.Do(func() {
		fmt.Fprintf(os.Stderr, "sfclab lb: accel sockmap: %v; such connections are spliced\n", err)
	})
	return false
}

// drain waits up to cfg.Drain for open connections, then closes what is left.
func (s *Server) drain() {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(time.Duration(s.cfg.Drain)):
	}
	s.mu.Lock()
	for c := range s.conns {
		c.close()
	}
	s.mu.Unlock()
	<-done
}

// reset closes a connection with an RST, so the client sees a refusal at once, never a hang.
func reset(c *net.TCPConn) {
	_ = c.SetLinger(0)
	c.Close()
}

// check runs TCP-connect health checks on one backend: Fall failures in a row take it down,
// Rise successes bring it back.
//
// Equivalent to HAProxy: server NAME ADDR check inter INTERVAL rise RISE fall FALL
func (s *Server) check(ctx context.Context, b *backend) {
	t := time.NewTicker(time.Duration(s.cfg.CheckInterval))
	defer t.Stop()
	good, bad := 0, 0
	timeout := min(time.Duration(s.cfg.TimeoutConnect), time.Duration(s.cfg.CheckInterval))
	d := net.Dialer{Timeout: timeout}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c, err := d.DialContext(ctx, "tcp", b.Addr.String())
		if err == nil {
			c.Close()
			good, bad = good+1, 0
			if !b.up.Load() && good >= s.cfg.Rise {
				b.up.Store(true)
			}
			continue
		}
		good, bad = 0, bad+1
		if b.up.Load() && bad >= s.cfg.Fall {
			b.up.Store(false)
		}
	}
}

// Stats are the balancer's counters, as the stats socket serves them.
type Stats struct {
	Listen  string `json:"listen"`
	Balance string `json:"balance"`
	Pid     int    `json:"pid"`
	// Active connections now, Total accepted, Refused over maxconn, NoBackend closed because
	// no backend was up or reachable, TimedOut idle clients closed.
	Active    int64  `json:"active"`
	Total     uint64 `json:"total"`
	Refused   uint64 `json:"refused"`
	NoBackend uint64 `json:"no_backend"`
	TimedOut  uint64 `json:"timed_out"`
	// Accel is how bytes move: "sockmap" or "splice"; AccelFailed connections sockmap could
	// not take were spliced.
	Accel       string         `json:"accel"`
	AccelFailed uint64         `json:"accel_failed,omitempty"`
	Backends    []BackendStats `json:"backends"`
}

// BackendStats are one backend's counters.
type BackendStats struct {
	Name   string `json:"name"`
	Addr   string `json:"addr"`
	Weight int    `json:"weight"`
	Up     bool   `json:"up"`
	Active int64  `json:"active"`
	Total  uint64 `json:"total"`
	// Failed connects to this backend.
	Failed uint64 `json:"failed"`
	// BytesIn went client -> backend, BytesOut backend -> client.
	BytesIn  uint64 `json:"bytes_in"`
	BytesOut uint64 `json:"bytes_out"`
}

// Stats returns the counters now.
func (s *Server) Stats() Stats {
	st := Stats{Listen: s.cfg.Listen.String(), Balance: s.cfg.Balance, Pid: os.Getpid(),
		Active: s.active.Load(), Total: s.total.Load(), Refused: s.refused.Load(),
		NoBackend: s.noBackend.Load(), TimedOut: s.timedOut.Load(), Accel: s.cfg.Accel,
		AccelFailed: s.accelFailed.Load()}
	// Bytes of open accelerated connections are in the kernel's counters until they close.
	live := map[*backend][2]uint64{}
	if s.accel != nil {
		s.mu.Lock()
		for c := range s.conns {
			if c.sm != nil {
				in, out := s.accel.liveBytes(c.sm)
				l := live[c.backend]
				live[c.backend] = [2]uint64{l[0] + in, l[1] + out}
			}
		}
		s.mu.Unlock()
	}
	for _, b := range s.picker.backends {
		st.Backends = append(st.Backends, BackendStats{Name: b.Name, Addr: b.Addr.String(), Weight: b.Weight,
			Up: b.up.Load(), Active: b.active.Load(), Total: b.total.Load(), Failed: b.failed.Load(),
			BytesIn: b.bytesIn.Load() + live[b][0], BytesOut: b.bytesOut.Load() + live[b][1]})
	}
	return st
}

// serveStats answers every connection on the stats socket with Stats as JSON.
func (s *Server) serveStats() {
	for {
		c, err := s.stats.Accept()
		if err != nil {
			return
		}
		_ = c.SetDeadline(time.Now().Add(time.Second))
		_ = json.NewEncoder(c).Encode(s.Stats())
		c.Close()
	}
}

// ReadStats asks a running balancer for its counters through its stats socket.
//
// Equivalent to: socat - UNIX-CONNECT:SOCKET
func ReadStats(ctx context.Context, socket string) (*Stats, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("read lb stats: %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	var st Stats
	if err := json.NewDecoder(c).Decode(&st); err != nil {
		return nil, fmt.Errorf("read lb stats from %s: %w", socket, err)
	}
	return &st, nil
}
