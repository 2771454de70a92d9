package http

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	nethttp "net/http"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/internal/testroot"
	"github.com/sfclab/sfclab/probe/http/load"
)

// hostNode is a probe.Node for the host's own namespace.
type hostNode struct{}

func (hostNode) Output(context.Context, []byte, ...string) ([]byte, error) { return nil, nil }
func (hostNode) Daemon([]string, string) (int, error)                      { return 0, nil }
func (hostNode) Do(fn func() error) error                                  { return fn() }
func (hostNode) CPU() (cgroup.Usage, error)                                { return cgroup.Usage{}, nil }

func requireRoot(t *testing.T) { testroot.Require(t, "the client enters namespaces (setns)") }

func target(t *testing.T, l net.Listener, size int64) Target {
	ap := netip.MustParseAddrPort(l.Addr().String())
	return Target{Source: "host", URL: fmt.Sprintf("http://%s/obj-x", ap), Size: size, Object: "x"}
}

// TestClientTimesOut: a server that accepts and never answers gives errors, bounded by the
// per-request timeout; the run's deadline cuts a long run short.
func TestClientTimesOut(t *testing.T) {
	requireRoot(t)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		var held []net.Conn
		for {
			c, err := l.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	t0 := time.Now()
	res, err := runLoad(context.Background(), hostNode{}, target(t, l, 10), Config{Requests: 5, Concurrency: 2, Timeout: 200 * time.Millisecond})
	took := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 5 || res.Answers != 0 || !errors.Is(res.FirstErr, os.ErrDeadlineExceeded) || took > 2*time.Second {
		t.Errorf("silent server: %d errors, %d answers, first %v, in %s; want 5 timeouts in about 0.6 s", res.Errors, res.Answers, res.FirstErr, took)
	}
	// Not a dead chain: DeadAfter failures are needed for that.
	if res.Dead {
		t.Error("5 timeouts made the chain dead")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	t0 = time.Now()
	res, err = runLoad(ctx, hostNode{}, target(t, l, 10), Config{Requests: 1000, Concurrency: 4, Timeout: 10 * time.Second})
	took = time.Since(t0)
	if err != nil || took > time.Second || res.Finished != 0 {
		t.Errorf("run cut by its deadline: %v, %d finished, in %s; want nothing finished, back in about 0.3 s", err, res.Finished, took)
	}
}

// TestClientKeepAlive: with keep-alive the client reuses its connections; without, it opens
// one per request. Bodies are counted; a short body is an error.
func TestClientKeepAlive(t *testing.T) {
	requireRoot(t)
	body := strings.Repeat("x", 10240)
	var conns atomic.Int64
	srv := &nethttp.Server{Handler: nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if r.URL.Path == "/short" {
			w.Header().Set("Content-Length", "10240")
			w.Write([]byte(body[:100]))
			return
		}
		w.Header().Set("Content-Length", "10240")
		w.Write([]byte(body))
	}), ConnState: func(_ net.Conn, s nethttp.ConnState) {
		if s == nethttp.StateNew {
			conns.Add(1)
		}
	}}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	for _, ka := range []bool{false, true} {
		conns.Store(0)
		res, err := runLoad(context.Background(), hostNode{}, target(t, l, 10240), Config{Requests: 50, Concurrency: 5, KeepAlive: ka, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if res.Errors != 0 || res.Answers != 50 || res.Bytes != 50*10240 || len(res.Times) != 50 {
			t.Errorf("keepalive %v: %+v", ka, res)
		}
		want := int64(50)
		if ka {
			want = 5
		}
		if got := conns.Load(); got != want {
			t.Errorf("keepalive %v: %d connections for 50 requests, want %d", ka, got, want)
		}
	}
	tg := target(t, l, 10240)
	tg.URL = strings.TrimSuffix(tg.URL, "/obj-x") + "/short"
	res, err := runLoad(context.Background(), hostNode{}, tg, Config{Requests: 3, Concurrency: 1, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 3 || res.Answers != 3 {
		t.Errorf("short bodies: %d errors, %d answers (first %v); want 3 and 3", res.Errors, res.Answers, res.FirstErr)
	}
}

// TestClientPhases: a server that answers 30 ms after the request, sends the body 20 ms after
// the head and closes 10 ms after the body: the phases say so, and their means add up to the
// mean request time.
func TestClientPhases(t *testing.T) {
	requireRoot(t)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				if _, err := c.Read(buf); err != nil {
					return
				}
				time.Sleep(30 * time.Millisecond)
				c.Write([]byte("HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\n"))
				time.Sleep(20 * time.Millisecond)
				c.Write([]byte("hello"))
				time.Sleep(10 * time.Millisecond)
			}()
		}
	}()
	res, err := runLoad(context.Background(), hostNode{}, target(t, l, 5), Config{Requests: 5, Concurrency: 1, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || len(res.Phases) != 5 {
		t.Fatalf("%d errors (%v), %d requests with phases; want 0 and 5", res.Errors, res.FirstErr, len(res.Phases))
	}
	got := map[string]phaseStat{}
	sum := 0.0
	for _, ph := range phaseStats(res.Phases) {
		got[ph.name] = ph
		sum += ph.mean
	}
	for name, want := range map[string][2]float64{"connect": {0, 5}, "wait": {30, 45}, "body": {20, 35}, "close": {10, 25}} {
		if m := got[name].median; m < want[0] || m > want[1] {
			t.Errorf("%s phase median %.2f ms, want in [%v, %v] (all %v)", name, m, want[0], want[1], got)
		}
	}
	mean := 0.0
	for _, r := range res.Times {
		mean += r.MS / float64(len(res.Times))
	}
	if math.Abs(sum-mean) > 0.01 {
		t.Errorf("phase means add up to %.4f ms, the mean request time is %.4f ms", sum, mean)
	}
}

// guestNode is a source whose stack Go code cannot enter (Do fails), as a VM guest: it runs
// the load generator itself, here on this machine with a clock an hour behind the host's.
type guestNode struct{ hostNode }

func (guestNode) Do(func() error) error              { return errors.New("a guest's stack") }
func (guestNode) GroupRuns(int, string) bool         { return false }
func (guestNode) StopGroup(int, time.Duration) error { return nil }
func (guestNode) HTTPLoad(ctx context.Context, s load.Spec) (*load.Result, error) {
	res, err := load.Run(ctx, s, func(f func() error) error { return f() })
	if res != nil {
		for i := range res.Times {
			res.Times[i].At = res.Times[i].At.Add(-time.Hour)
		}
		res.FirstErr = nil // lost on the agent's wire; FirstError is kept
	}
	return res, err
}

// TestClientInGuest: from a guest source the probe has the guest run the load generator
// (Guest) instead of entering its stack, and dates the requests by the host's clock, never by
// the guest's; a guest's first error, which comes back as text, is still an error.
func TestClientInGuest(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &nethttp.Server{Handler: nethttp.HandlerFunc(func(w nethttp.ResponseWriter, _ *nethttp.Request) {
		w.Header().Set("Content-Length", "10")
		w.Write([]byte("0123456789"))
	})}
	go srv.Serve(l)
	defer srv.Close()
	before := time.Now()
	res, err := runLoad(context.Background(), guestNode{}, target(t, l, 10), Config{Requests: 8, Concurrency: 2, Timeout: 2 * time.Second})
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if res.Answers != 8 || res.Errors != 0 || len(res.Times) != 8 {
		t.Fatalf("result %+v; want 8 answered requests", res)
	}
	for _, x := range res.Times {
		if x.At.Before(before) || x.At.After(after) || !(x.MS > 0) {
			t.Errorf("request %+v: want it dated by the host (between %s and %s) and timed", x, before, after)
		}
	}
	res, err = runLoad(context.Background(), guestNode{}, target(t, l, 20), Config{Requests: 2, Concurrency: 1, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 2 || res.FirstErr == nil || res.FirstErr.Error() != res.FirstError {
		t.Errorf("short bodies from a guest: %d errors, first %v (%q); want 2 and the error", res.Errors, res.FirstErr, res.FirstError)
	}
}
