package tcprtt

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe"
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
