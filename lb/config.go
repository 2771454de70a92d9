// Package lb is sfclab's own TCP-terminating load balancer (`sfclab lb --config FILE`, the
// l4lb function's `impl: sfclab`): it accepts client connections, opens one to a backend chosen
// by roundrobin, leastconn or source (all weighted), and moves bytes between the two sockets
// with splice(2) through a pipe per direction, so payload is never copied into user space.
//
// Design: one goroutine per connection direction on Go's netpoller (itself an epoll loop); the
// l4lb `threads` parameter sets GOMAXPROCS (default 1, as HAProxy's nbthread). An
// edge-triggered epoll loop per thread was built beside it and measured on a 2-core machine
// through the 2-VNF chain: not consistently faster for a single stream, connection rate or CPU
// per Gbit/s and never ahead with 100 streams (docs/sfclab-lb.md keeps the figures), so it
// was removed.
package lb

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"
)

// Algorithms the balancer knows; backend weights apply to all three (HAProxy's names).
const (
	RoundRobin = "roundrobin"
	LeastConn  = "leastconn"
	Source     = "source"
)

// LoopGoroutines is the data path (Config.Loop): goroutines on Go's netpoller.
const LoopGoroutines = "goroutines"

// How bytes move between a connection's two sockets (Config.Accel).
const (
	// AccelSplice: splice(2) through a pipe per direction, two calls per chunk.
	AccelSplice = "splice"
	// AccelSockmap: an sk_skb verdict program redirects each arriving skb to the other
	// socket's egress in the kernel (bpf/sockmap.c); no call per chunk. Needs BPF (root or
	// CAP_BPF+CAP_NET_ADMIN) and loop goroutines.
	AccelSockmap = "sockmap"
)

// DefaultPipeSize is the pipe buffer per direction: 1 MiB (the kernel's pipe-max-size default)
// lets one splice move up to 1 MiB, against 64 KiB with the kernel's default pipe.
const DefaultPipeSize = 1 << 20

// ErrConfig is returned for a configuration the balancer cannot use.
var ErrConfig = errors.New("unusable load balancer config")

// Config is the balancer's configuration file (JSON), written by the l4lb function.
type Config struct {
	// Listen is the service address, ADDR:PORT.
	Listen netip.AddrPort `json:"listen"`
	// Backends are the servers connections are spread over.
	Backends []Backend `json:"backends"`
	// Balance is roundrobin, leastconn or source.
	Balance string `json:"balance"`
	// MaxConn bounds concurrent client connections; the excess is closed at once, not queued.
	MaxConn int `json:"maxconn"`
	// CheckInterval is the TCP-connect health check period; 0 turns checks off.
	CheckInterval Duration `json:"check_interval,omitempty"`
	// Rise consecutive good checks bring a backend up, Fall bad ones take it down.
	Rise int `json:"rise,omitempty"`
	Fall int `json:"fall,omitempty"`
	// TimeoutConnect bounds a connect to a backend (and a health check).
	TimeoutConnect Duration `json:"timeout_connect"`
	// TimeoutClient closes a connection idle in both directions this long.
	TimeoutClient Duration `json:"timeout_client"`
	// Drain is how long a SIGTERM waits for open connections before closing them.
	Drain Duration `json:"drain"`
	// Stats is the unix socket path serving Stats as JSON ("" = none).
	Stats string `json:"stats,omitempty"`
	// Threads bounds the OS threads running Go code (GOMAXPROCS; HAProxy's nbthread); 0 = one
	// per core.
	Threads int `json:"threads,omitempty"`
	// Loop is the data path: "goroutines" (the default and only one; two per connection on
	// Go's netpoller).
	Loop string `json:"loop,omitempty"`
	// PipeSize is the pipe buffer per direction in bytes (0 = DefaultPipeSize, -1 = the
	// kernel's 64 KiB).
	PipeSize int `json:"pipe_size,omitempty"`
	// Accel is how bytes move: "splice" (default) or "sockmap" (loop goroutines only).
	Accel string `json:"accel,omitempty"`
}

// Backend is one server.
type Backend struct {
	Name   string         `json:"name"`
	Addr   netip.AddrPort `json:"addr"`
	Weight int            `json:"weight"`
}

// Duration is a time.Duration written as text ("2s") in JSON.
type Duration time.Duration

// MarshalJSON writes the duration as text.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration written as text.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("read duration: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("read duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// Validate checks the configuration and fills defaults.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	if !c.Listen.IsValid() || c.Listen.Port() == 0 {
		return bad("listen %s needs an address and a port", c.Listen)
	}
	if len(c.Backends) == 0 {
		return bad("no backends")
	}
	for i := range c.Backends {
		b := &c.Backends[i]
		if !b.Addr.IsValid() || b.Addr.Port() == 0 {
			return bad("backend %q: address %s needs an address and a port", b.Name, b.Addr)
		}
		if b.Weight == 0 {
			b.Weight = 1
		}
		if b.Weight < 0 || b.Weight > 256 {
			return bad("backend %q: weight must be 1-256, got %d", b.Name, b.Weight)
		}
	}
	switch c.Balance {
	case "":
		c.Balance = Source
	case RoundRobin, LeastConn, Source:
	default:
		return bad("balance %q is not one of roundrobin, leastconn, source", c.Balance)
	}
	switch c.Loop {
	case "":
		c.Loop = LoopGoroutines
	case LoopGoroutines:
	default:
		return bad("loop %q is not goroutines (the epoll loop was removed: measured not better, docs/sfclab-lb.md)", c.Loop)
	}
	switch c.Accel {
	case "":
		c.Accel = AccelSplice
	case AccelSplice:
	case AccelSockmap:
		if c.Loop != LoopGoroutines {
			return bad("accel sockmap works with loop goroutines, not %s", c.Loop)
		}
	default:
		return bad("accel %q is not one of splice, sockmap", c.Accel)
	}
	if c.MaxConn <= 0 {
		c.MaxConn = 4096
	}
	if c.PipeSize == 0 {
		c.PipeSize = DefaultPipeSize
	}
	if c.Rise <= 0 {
		c.Rise = 2
	}
	if c.Fall <= 0 {
		c.Fall = 3
	}
	if c.TimeoutConnect <= 0 {
		c.TimeoutConnect = Duration(5 * time.Second)
	}
	if c.TimeoutClient <= 0 {
		c.TimeoutClient = Duration(10 * time.Minute)
	}
	if c.Drain <= 0 {
		c.Drain = Duration(2 * time.Second)
	}
	if c.CheckInterval < 0 {
		return bad("check_interval must not be negative")
	}
	return nil
}

// ReadConfig reads and validates a configuration file.
func ReadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read lb config: %w", err)
	}
	var c Config
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("read lb config %s: %w: %w", path, ErrConfig, err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("read lb config %s: %w", path, err)
	}
	return &c, nil
}
