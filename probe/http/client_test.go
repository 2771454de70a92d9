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
	if res.errors != 5 || res.answers != 0 || !errors.Is(res.firstErr, os.ErrDeadlineExceeded) || took > 2*time.Second {
		t.Errorf("silent server: %d errors, %d answers, first %v, in %s; want 5 timeouts in about 0.6 s", res.errors, res.answers, res.firstErr, took)
	}
	// Not a dead chain: DeadAfter failures are needed for that.
	if res.dead {
		t.Error("5 timeouts made the chain dead")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	t0 = time.Now()
	res, err = runLoad(ctx, hostNode{}, target(t, l, 10), Config{Requests: 1000, Concurrency: 4, Timeout: 10 * time.Second})
	took = time.Since(t0)
	if err != nil || took > time.Second || res.finished != 0 {
		t.Errorf("run cut by its deadline: %v, %d finished, in %s; want nothing finished, back in about 0.3 s", err, res.finished, took)
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
		if res.errors != 0 || res.answers != 50 || res.bytes != 50*10240 || len(res.times) != 50 {
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
	if res.errors != 3 || res.answers != 3 {
		t.Errorf("short bodies: %d errors, %d answers (first %v); want 3 and 3", res.errors, res.answers, res.firstErr)
	}
}

func TestParseHead(t *testing.T) {
	for _, tc := range []struct {
		head    string
		status  int
		length  int64
		closing bool
		bad     bool
	}{
		{"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n", 200, 10, false, false},
		{"HTTP/1.1 200 OK\r\ncontent-length: 10\r\nConnection: close\r\n", 200, 10, true, false},
		{"HTTP/1.0 200 OK\r\nContent-Length: 10\r\n", 200, 10, true, false},
		{"HTTP/1.0 200 OK\r\nContent-Length: 10\r\nConnection: keep-alive\r\n", 200, 10, false, false},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n", 200, -1, true, false},
		{"HTTP/1.1 304 Not Modified\r\n", 304, 0, false, false},
		{"HTTP/1.1 200 OK\r\n", 200, -1, true, false},
		{"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 3000\r\n", 503, 3000, false, false},
		{"SSH-2.0-OpenSSH\r\n", 0, 0, false, true},
		{"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n", 0, 0, false, true},
	} {
		c := &conn{length: -1}
		err := parseHead(c, []byte(tc.head))
		if (err != nil) != tc.bad {
			t.Errorf("%q: error %v", tc.head, err)
			continue
		}
		if !tc.bad && (c.status != tc.status || c.length != tc.length || c.closing != tc.closing) {
			t.Errorf("%q: status %d length %d closing %v", tc.head, c.status, c.length, c.closing)
		}
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
	if res.errors != 0 || len(res.phases) != 5 {
		t.Fatalf("%d errors (%v), %d requests with phases; want 0 and 5", res.errors, res.firstErr, len(res.phases))
	}
	got := map[string]phaseStat{}
	sum := 0.0
	for _, ph := range phaseStats(res.phases) {
		got[ph.name] = ph
		sum += ph.mean
	}
	for name, want := range map[string][2]float64{"connect": {0, 5}, "wait": {30, 45}, "body": {20, 35}, "close": {10, 25}} {
		if m := got[name].median; m < want[0] || m > want[1] {
			t.Errorf("%s phase median %.2f ms, want in [%v, %v] (all %v)", name, m, want[0], want[1], got)
		}
	}
	mean := 0.0
	for _, r := range res.times {
		mean += r.ms / float64(len(res.times))
	}
	if math.Abs(sum-mean) > 0.01 {
		t.Errorf("phase means add up to %.4f ms, the mean request time is %.4f ms", sum, mean)
	}
}
