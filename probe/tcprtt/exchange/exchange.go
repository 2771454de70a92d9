// Package exchange is the tcprtt probe's measuring loop: it times TCP connection set-ups and
// request/response exchanges to an echo server. It imports nothing of sfclab, so that a VM
// guest's agent (runtime/vm, linked alone into sfclab-guest) runs the same code as the probe
// runs in a namespace without linking the probes' and results' packages.
package exchange

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"time"
)

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

// WithDefaults returns c with its zero fields at their defaults.
func (c Config) WithDefaults() Config {
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

// Bound is the longest a Run with c may take: every connect and exchange at its timeout.
func (c Config) Bound() time.Duration {
	c = c.WithDefaults()
	return time.Duration(c.Connects+c.Requests+1) * c.Timeout
}

// Run times cfg.Connects connection set-ups to target (connected is called with each:
// sequence number from 1, duration from the SYN until the handshake completes), then
// cfg.Requests exchanges of cfg.Size bytes over one connection (exchanged: write the request,
// read the whole echo back), each bounded by cfg.Timeout (defaults filled in). The sockets are
// created inside do (a node's Do: its network namespace; in a guest's agent, a plain call).
// Any failed connect or exchange ends the run with an error.
func Run(ctx context.Context, target string, cfg Config, do func(func() error) error, connected, exchanged func(seq int, d time.Duration)) error {
	cfg = cfg.WithDefaults()
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
		connected(i, d)
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
		exchanged(i, d)
	}
	return nil
}

// ctxErr prefers the context's error over the deadline error it caused.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// dial connects to addr and times the handshake. Call it inside a node's Do: the socket is
// created on the calling (namespace-locked) thread.
func dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, time.Duration, error) {
	d := net.Dialer{Timeout: timeout}
	t0 := time.Now()
	conn, err := d.DialContext(ctx, "tcp", addr)
	return conn, time.Since(t0), err
}
