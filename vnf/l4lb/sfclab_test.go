package l4lb_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/lb"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/vnf"
	"github.com/sfclab/sfclab/vnf/l4lb"
)

// TestMain lets this test binary stand in for sfclab: the function starts
// `EXECUTABLE lb --config FILE`, and os.Executable is the test binary here.
func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == "lb" && os.Args[2] == "--config" {
		if err := lb.Main(context.Background(), os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, "sfclab lb:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// lbLab is a balancer over three weighted backends with the given data path (the loop
// parameter and any more parameters after it, "goroutines, accel: sockmap").
func lbLab(name, loop string) string {
	return "name: " + name + `
endpoints:
  client: {kind: client}
  web: {kind: server, instances: 3, weights: [1, 1, 2]}
functions:
  lb: {kind: l4lb, params: {impl: sfclab, port: 7000, balance: roundrobin, check_interval: 100ms, rise: 2, fall: 2, loop: ` + loop + `}}
chains:
  - {name: web, from: client, to: web, hops: [lb]}
`
}

// backend is a TCP server in a backend's namespace: it writes its name, then echoes.
type backend struct {
	name string
	addr string
	ln   net.Listener
	mu   sync.Mutex
}

func (b *backend) start(t *testing.T, l *labtest.Lab) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	err := l.Node(t, b.name).Do(func() (err error) {
		b.ln, err = net.Listen("tcp", b.addr)
		return err
	})
	if err != nil {
		t.Fatalf("listen in %s: %v", b.name, err)
	}
	ln := b.ln
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				fmt.Fprintf(c, "%-8s", b.name)
				_, _ = io.Copy(c, c)
			}()
		}
	}()
}

func (b *backend) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ln.Close()
}

// dial connects from the client node to the balancer.
func dial(t *testing.T, l *labtest.Lab, addr string) (net.Conn, error) {
	t.Helper()
	var c net.Conn
	err := l.Node(t, "client").Do(func() (err error) {
		c, err = net.DialTimeout("tcp", addr, 2*time.Second)
		return err
	})
	return c, err
}

// hello connects and returns the name of the backend that answered, or the error.
func hello(t *testing.T, l *labtest.Lab, addr string) (string, error) {
	t.Helper()
	c, err := dial(t, l, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 8)
	if _, err := io.ReadFull(c, buf); err != nil {
		return "", err
	}
	return strings.TrimSpace(string(buf)), nil
}

func stats(t *testing.T, env vnf.Env) *lb.Stats {
	t.Helper()
	st, err := l4lb.LB{}.BalancerStats(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func upOf(st *lb.Stats, name string) bool {
	for _, b := range st.Backends {
		if b.Name == name {
			return b.Up
		}
	}
	return false
}

// variant starts a second balancer in the lb node on another port with changed parameters and
// its own state directory; it is stopped when the test ends.
func variant(t *testing.T, l *labtest.Lab, port uint16, change func(p *l4lb.L4LBParams)) (vnf.Env, string) {
	t.Helper()
	env := l.VnfEnv(t, "lb")
	n := *env.Plan
	f := *n.Function
	p := *f.Params.(*l4lb.L4LBParams)
	change(&p)
	f.Params, f.Port = &p, port
	n.Function = &f
	env.Plan, env.StateDir = &n, t.TempDir()
	if err := (l4lb.LB{}).Setup(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := (l4lb.LB{}).Teardown(context.Background(), env); err != nil {
			t.Error(err)
		}
	})
	return env, fmt.Sprintf("%s:%d", f.IngressAddr, port)
}

// TestSfclabLB runs the balancer's behaviour tests on each data path.
func TestSfclabLB(t *testing.T) {
	labtest.Exclusive(t)
	for _, tt := range []struct{ name, loop, lab string }{
		{l4lb.LoopGoroutines, l4lb.LoopGoroutines, "t-lb-sfc"},
		{"sockmap", l4lb.LoopGoroutines + ", accel: " + l4lb.AccelSockmap, "t-lb-sfm"},
	} {
		t.Run(tt.name, func(t *testing.T) { testSfclabLB(t, tt.lab, tt.loop) })
	}
}

func testSfclabLB(t *testing.T, lab, loop string) {
	l := labtest.Deploy(t, lbLab(lab, loop))
	lbNode := l.P.Node("lb")
	var backends []*backend
	for _, be := range lbNode.Function.Backends {
		b := &backend{name: be.Name, addr: fmt.Sprintf("%s:%d", be.Addr, be.Port)}
		b.start(t, l)
		backends = append(backends, b)
	}
	env := l.VnfEnv(t, "lb")
	addr := fmt.Sprintf("%s:%d", lbNode.Function.IngressAddr, lbNode.Function.Port)
	allUp := func(t *testing.T) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for _, b := range backends {
			for !upOf(stats(t, env), b.name) {
				if time.Now().After(deadline) {
					t.Fatalf("backend %s not up 2 s after it accepts", b.name)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	allUp(t) // checks may have failed before the test's servers listened

	t.Run("weighted roundrobin and counters", func(t *testing.T) {
		before := stats(t, env) // the readiness check's connection is counted too
		got := map[string]int{}
		for range 8 {
			name, err := hello(t, l, addr)
			if err != nil {
				t.Fatal(err)
			}
			got[name]++
		}
		for _, be := range lbNode.Function.Backends {
			if want := 2 * be.Weight; got[be.Name] != want {
				t.Errorf("backend %s (weight %d) got %d of 8 connections, want %d (all: %v)", be.Name, be.Weight, got[be.Name], want, got)
			}
		}
		// 4 MiB through one connection, echoed: both directions spliced intact and counted.
		c, err := dial(t, l, addr)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, 4<<20)
		_, _ = rand.Read(data)
		go func() { _, _ = c.Write(data); _ = c.(*net.TCPConn).CloseWrite() }()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		back, err := io.ReadAll(c)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(back) != 8+len(data) || !bytes.Equal(back[8:], data) {
			t.Fatalf("echo through the balancer: got %d bytes back, want %d intact", len(back), 8+len(data))
		}
		st := stats(t, env)
		var total, in, out uint64
		for i, b := range st.Backends {
			o := before.Backends[i]
			total, in, out = total+b.Total-o.Total, in+b.BytesIn-o.BytesIn, out+b.BytesOut-o.BytesOut
		}
		if total != 9 || in != uint64(len(data)) || out != uint64(len(data)+9*8) {
			t.Errorf("counters: %d connections, %d bytes in, %d out; want 9, %d, %d", total, in, out, len(data), len(data)+9*8)
		}
	})

	parent := t
	t.Run("dead backend marked down within the health window, traffic to the others", func(t *testing.T) {
		dead := backends[2]
		dead.stop()
		// fall 2 x interval 100ms, plus a connect and a tick of slack.
		deadline := time.Now().Add(2*100*time.Millisecond + 400*time.Millisecond)
		for upOf(stats(t, env), dead.name) {
			if time.Now().After(deadline) {
				t.Fatalf("backend %s still up 600 ms after it stopped accepting (health window 200 ms)", dead.name)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for range 6 {
			name, err := hello(t, l, addr)
			if err != nil {
				t.Fatal(err)
			}
			if name == dead.name {
				t.Fatalf("connection went to the down backend %s", name)
			}
		}
		dead.start(parent, l)
		deadline = time.Now().Add(2*100*time.Millisecond + 400*time.Millisecond)
		for !upOf(stats(t, env), dead.name) {
			if time.Now().After(deadline) {
				t.Fatalf("backend %s not back up 600 ms after it accepts again (rise 2 x 100 ms)", dead.name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	t.Run("refused connect redispatched to another backend", func(t *testing.T) {
		venv, vaddr := variant(t, l, 7004, func(p *l4lb.L4LBParams) { p.CheckInterval = "" }) // no checks: only redispatch helps
		dead := backends[0]
		dead.stop()
		defer func() { dead.start(parent, l); allUp(t) }()
		before := settled(t, venv)
		for range 6 {
			name, err := hello(t, l, vaddr)
			if err != nil {
				t.Fatalf("with %s refusing and checks off: %v", dead.name, err)
			}
			if name == dead.name {
				t.Fatalf("connection answered by the stopped backend %s", name)
			}
		}
		st := stats(t, venv)
		failed, total := st.Backends[0].Failed-before.Backends[0].Failed, st.Backends[0].Total-before.Backends[0].Total
		if failed == 0 || total != 0 || st.NoBackend != before.NoBackend {
			t.Errorf("backend %s: %d failed connects, %d connections, %d without backend; want >0, 0, 0", dead.name,
				failed, total, st.NoBackend-before.NoBackend)
		}
	})

	t.Run("all backends down: refused at once, not a hang", func(t *testing.T) {
		for _, b := range backends {
			b.stop()
		}
		defer func() {
			for _, b := range backends {
				b.start(parent, l)
			}
			allUp(t)
		}()
		start := time.Now()
		_, err := hello(t, l, addr)
		if err == nil {
			t.Fatal("a connection with every backend down got an answer")
		}
		if errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) > time.Second {
			t.Fatalf("with every backend down the client waited %s (%v); want a refusal at once", time.Since(start), err)
		}
	})

	t.Run("idle client timed out", func(t *testing.T) {
		venv, vaddr := variant(t, l, 7001, func(p *l4lb.L4LBParams) { p.TimeoutClient = "300ms" })
		c, err := dial(t, l, vaddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = io.ReadAll(c) // the backend's greeting, then the close
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("an idle client was not closed within 5 s (timeout_client 300ms)")
		}
		// The timer sees no bytes moved over one whole period: closed between 1 and 2 periods.
		if el := time.Since(start); el < 250*time.Millisecond || el > 2*time.Second {
			t.Errorf("idle client closed after %s, want 300-600 ms", el)
		}
		if st := settled(t, venv); st.TimedOut != 1 || st.Active != 0 {
			t.Errorf("after the idle timeout: timed_out %d, active %d; want 1, 0", st.TimedOut, st.Active)
		}
	})

	t.Run("maxconn refuses the excess", func(t *testing.T) {
		venv, vaddr := variant(t, l, 7002, func(p *l4lb.L4LBParams) { p.MaxConn = 2 })
		settled(t, venv) // the readiness check's connection is gone
		var held []net.Conn
		for range 2 {
			c, err := dial(t, l, vaddr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(3 * time.Second))
			buf := make([]byte, 8)
			if _, err := io.ReadFull(c, buf); err != nil {
				t.Fatalf("connection within maxconn: %v", err)
			}
			held = append(held, c)
		}
		start := time.Now()
		if _, err := hello(t, l, vaddr); err == nil || time.Since(start) > time.Second {
			t.Fatalf("third connection over maxconn 2: err %v after %s; want closed at once", err, time.Since(start))
		}
		if st := stats(t, venv); st.Refused != 1 || st.Active != 2 {
			t.Errorf("refused %d, active %d; want 1, 2", st.Refused, st.Active)
		}
		held[0].Close()
		// The balancer counts the connection gone once its proxy has seen the close: wait for
		// that (the count maxconn is checked against), not a fixed time a loaded host may exceed.
		for deadline := time.Now().Add(2 * time.Second); stats(t, venv).Active > 1; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("a closed connection still counted active 2 s after its client closed it")
			}
		}
		if _, err := hello(t, l, vaddr); err != nil {
			t.Errorf("after one of maxconn connections closed, a new one: %v", err)
		}
	})

	t.Run("drain on SIGTERM: no new connections, open ones served, then closed", func(t *testing.T) {
		venv, vaddr := variant(t, l, 7005, func(p *l4lb.L4LBParams) { p.Drain = "600ms" })
		c, err := dial(t, l, vaddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 8)
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(readPid(t, venv), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		stop := time.Now()
		time.Sleep(100 * time.Millisecond)
		if _, err := hello(t, l, vaddr); err == nil {
			t.Error("a new connection during the drain was served; want refused")
		}
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatalf("write on an open connection during the drain: %v", err)
		}
		if _, err := io.ReadFull(c, buf[:4]); err != nil || string(buf[:4]) != "ping" {
			t.Fatalf("echo on an open connection during the drain: %q, %v", buf[:4], err)
		}
		_, err = io.ReadAll(c)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("open connection not closed within 5 s of SIGTERM (drain 600ms)")
		}
		if el := time.Since(stop); el < 500*time.Millisecond || el > 2*time.Second {
			t.Errorf("open connection closed %s after SIGTERM, want about the drain time, 600ms", el)
		}
		deadline := time.Now().Add(2 * time.Second)
		for !errors.Is((l4lb.LB{}).Check(context.Background(), venv), l4lb.ErrDown) {
			if time.Now().After(deadline) {
				t.Fatal("balancer process still runs 2 s after its drain ended")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	t.Run("port in use fails setup with the reason", func(t *testing.T) {
		env := l.VnfEnv(t, "lb")
		env.StateDir = t.TempDir()
		err := (l4lb.LB{}).Setup(context.Background(), env)
		defer func() { _ = (l4lb.LB{}).Teardown(context.Background(), env) }()
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			t.Fatalf("second balancer on the same port: %v; want address already in use", err)
		}
	})

	t.Run("killed balancer reported down", func(t *testing.T) {
		venv, _ := variant(t, l, 7003, func(p *l4lb.L4LBParams) {})
		if err := (l4lb.LB{}).Check(context.Background(), venv); err != nil {
			t.Fatalf("running balancer: %v", err)
		}
		pid := readPid(t, venv)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for {
			err := (l4lb.LB{}).Check(context.Background(), venv)
			if errors.Is(err, l4lb.ErrDown) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("killed balancer: Check = %v, want ErrDown", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	t.Run("inspect shows counters, then the killed lab balancer down, and Check says why", func(t *testing.T) {
		ctx := context.Background()
		info, err := l.D.Inspect(ctx, l.P.Lab)
		if err != nil {
			t.Fatal(err)
		}
		ni := nodeInfo(info, "lb")
		if ni.Down != "" || ni.Balancer == nil || len(ni.Balancer.Backends) != 3 || ni.Balancer.Total == 0 {
			t.Fatalf("inspect of the running balancer: down %q, counters %+v", ni.Down, ni.Balancer)
		}
		if err := syscall.Kill(readPid(t, env), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for !errors.Is(l.D.Check(ctx, l.P), l4lb.ErrDown) {
			if time.Now().After(deadline) {
				t.Fatalf("Check after the balancer was killed: %v, want ErrDown", l.D.Check(ctx, l.P))
			}
			time.Sleep(20 * time.Millisecond)
		}
		info, err = l.D.Inspect(ctx, l.P.Lab)
		if err != nil {
			t.Fatal(err)
		}
		if ni := nodeInfo(info, "lb"); !strings.Contains(ni.Down, "is gone") || ni.Balancer != nil {
			t.Errorf("inspect after kill: down %q, counters %v; want down with the reason", ni.Down, ni.Balancer)
		}
	})
}

// settled waits until a balancer has no open connection and returns its counters.
func settled(t *testing.T, env vnf.Env) *lb.Stats {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		st := stats(t, env)
		if st.Active == 0 || time.Now().After(deadline) {
			return st
		}
		time.Sleep(10 * time.Millisecond)
	}

}

func nodeInfo(info *deploy.LabInfo, name string) deploy.NodeInfo {
	for _, n := range info.Nodes {
		if n.Name == name {
			return n
		}
	}
	return deploy.NodeInfo{}
}

func readPid(t *testing.T, env vnf.Env) int {
	t.Helper()
	data, err := os.ReadFile(env.Path(".lb.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(string(data), &pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// The configuration sfclab lb gets carries the same parameters HAProxy's does.
func TestLBConfig(t *testing.T) {
	p := &l4lb.L4LBParams{Impl: l4lb.ImplSfclab, Balance: "leastconn", MaxConn: 10, CheckInterval: "250ms", Fall: 5}
	f := &plan.Function{Kind: l4lb.Kind, Params: p, Port: 80}
	cfg := l4lb.LBConfig(f, "")
	if cfg.Balance != "leastconn" || cfg.MaxConn != 10 || time.Duration(cfg.CheckInterval) != 250*time.Millisecond ||
		cfg.Rise != l4lb.DefaultRise || cfg.Fall != 5 || time.Duration(cfg.TimeoutClient) != l4lb.DefaultTimeoutClient {
		t.Errorf("LBConfig = %+v", cfg)
	}
	if err := cfg.Validate(); !errors.Is(err, lb.ErrConfig) {
		t.Errorf("config without backends: %v, want ErrConfig", err)
	}
	for _, tt := range []struct {
		loop, want string
		threads    int
		wantN      int
	}{
		{"", "", 0, 1}, // lb.Config.Validate fills goroutines
		{l4lb.LoopGoroutines, l4lb.LoopGoroutines, 0, 1},
		{l4lb.LoopGoroutines, l4lb.LoopGoroutines, 3, 3},
	} {
		p := &l4lb.L4LBParams{Impl: l4lb.ImplSfclab, Loop: tt.loop, Threads: tt.threads}
		cfg := l4lb.LBConfig(&plan.Function{Kind: l4lb.Kind, Params: p, Port: 80}, "")
		if cfg.Loop != tt.want || cfg.Threads != tt.wantN {
			t.Errorf("loop %q threads %d: config loop %q threads %d, want %q %d", tt.loop, tt.threads, cfg.Loop, cfg.Threads, tt.want, tt.wantN)
		}
	}
}
