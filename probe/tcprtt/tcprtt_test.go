package tcprtt

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/tcprtt/exchange"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/vnf/l4lb"
)

// hostNode runs Do in the host namespace: enough to test the probe over loopback.
type hostNode struct{ probe.Node }

func (hostNode) Do(fn func() error) error { return fn() }

func freePort(t *testing.T) uint16 {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

func loopbackEnv(port uint16) probe.Env {
	p := &plan.Plan{Lab: "t", Nodes: []*plan.Node{
		{Name: "cli", Group: "cli", Role: plan.RoleClient},
		{Name: "srv", Group: "srv", Role: plan.RoleServer},
	}}
	c := &plan.Chain{Name: "c", From: "cli", To: "srv", Path: []string{"cli", "srv"},
		Target: netip.MustParseAddr("127.0.0.1"), Port: port}
	p.Chains = []*plan.Chain{c}
	return probe.Env{Plan: p, Chain: c, Node: func(string) (probe.Node, error) { return hostNode{}, nil }}
}

func TestRunLoopback(t *testing.T) {
	port := freePort(t)
	var got []results.Sample
	err := New(Config{Connects: 5, Requests: 30, Size: 1000, Timeout: time.Second}).Run(context.Background(), loopbackEnv(port),
		func(s results.Sample) { got = append(got, s) })
	if err != nil {
		t.Fatal(err)
	}
	var connects, rtts int
	for _, s := range got {
		if s.Probe != Name || s.Unit != "ms" || s.Value <= 0 || s.Labels["seq"] == "" {
			t.Errorf("sample %+v", s)
		}
		switch s.Metric {
		case "connect":
			connects++
		case "rtt":
			rtts++
			if s.Labels["size"] != "1000" {
				t.Errorf("rtt labels %v", s.Labels)
			}
		}
	}
	if connects != 5 || rtts != 30 {
		t.Errorf("%d connects, %d rtts; want 5 and 30", connects, rtts)
	}
	// The echo server is closed: the port is free again.
	l, err := net.Listen("tcp4", net.JoinHostPort("", itoa(port)))
	if err != nil {
		t.Fatalf("port %d still in use after Run: %v", port, err)
	}
	l.Close()
}

func TestRunBounded(t *testing.T) {
	// The echo listener is on the service port, the source dials another, closed one.
	env := loopbackEnv(freePort(t))
	closed := freePort(t)
	env.Chain.Port = closed
	env.Plan.Nodes = append(env.Plan.Nodes, &plan.Node{Name: "lb", Group: "lb", Role: plan.RoleFunction,
		Function: &plan.Function{Kind: "l4lb", Port: closed, Params: &l4lb.L4LBParams{Port: closed}, Backends: []plan.Backend{{Name: "srv", Port: freePort(t)}}}})
	env.Chain.Hops = []plan.Hop{{Group: "lb", Kind: "l4lb", Instances: []string{"lb"}}}
	t0 := time.Now()
	err := New(Config{Connects: 3, Timeout: 200 * time.Millisecond}).Run(context.Background(), env, func(results.Sample) {})
	if err == nil || time.Since(t0) > 2*time.Second {
		t.Errorf("Run to a closed port: %v after %s", err, time.Since(t0))
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := New(Config{}).Run(ctx, loopbackEnv(freePort(t)), func(results.Sample) {}); err == nil {
		t.Error("Run with a cancelled context succeeded")
	}
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }

// guestNode is a VM guest as the probe sees it: Do fails, its agent serves the echo server
// (here on the host's loopback) and runs the exchanges (here exchange.Run in this process).
type guestNode struct {
	probe.Node
	closed *int
	fail   error // returned by TCPRTT after its durations
}

func (guestNode) Do(func() error) error { return errors.New("not in a guest") }

func (g guestNode) ListenEcho(ctx context.Context, network, addr string) (io.Closer, error) {
	e := &echoServer{}
	if err := e.Listen(ctx, hostNode{}, "guest", network, uint16(mustAtoi(addr[1:]))); err != nil {
		return nil, err
	}
	return closerFunc(func() error { *g.closed++; return e.Close() }), nil
}

func (g guestNode) TCPRTT(ctx context.Context, target string, cfg Config) (connects, exchanges []time.Duration, err error) {
	err = exchange.Run(ctx, target, cfg, func(f func() error) error { return f() },
		func(_ int, d time.Duration) { connects = append(connects, d) },
		func(_ int, d time.Duration) { exchanges = append(exchanges, d) })
	if err == nil {
		err = g.fail
	}
	return connects, exchanges, err
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

// TestRunGuestEnds: with both ends guests, the echo server is the guest's (closed when the
// run ends) and the exchanges are run by the guest; their durations become the same samples
// as on a namespace, and a guest's error keeps the samples taken before it.
func TestRunGuestEnds(t *testing.T) {
	for _, tt := range []struct {
		name string
		fail error
	}{{"ok", nil}, {"guest fails", errors.New("guest agent: connection closed")}} {
		t.Run(tt.name, func(t *testing.T) {
			env := loopbackEnv(freePort(t))
			closed := 0
			g := guestNode{closed: &closed, fail: tt.fail}
			env.Node = func(string) (probe.Node, error) { return g, nil }
			counts := map[string]int{}
			err := New(Config{Connects: 4, Requests: 7, Size: 100, Timeout: time.Second}).Run(context.Background(), env, func(s results.Sample) {
				if s.Probe != Name || s.Unit != "ms" || s.Value <= 0 || s.Labels["seq"] != strconv.Itoa(counts[s.Metric]+1) {
					t.Errorf("sample %+v", s)
				}
				counts[s.Metric]++
			})
			if tt.fail == nil && err != nil || tt.fail != nil && !errors.Is(err, tt.fail) {
				t.Errorf("err = %v; want %v", err, tt.fail)
			}
			if counts["connect"] != 4 || counts["rtt"] != 7 || closed != 1 {
				t.Errorf("%v samples, echo closed %d times; want 4 connects, 7 rtts, closed once", counts, closed)
			}
		})
	}
}
