package rtt_test

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/rtt"
	"github.com/sfclab/sfclab/probe/rtt/echo"
	"github.com/sfclab/sfclab/results"
)

// guestNode is a VM guest as the probe sees it: Do fails, the echo server is its own.
type guestNode struct{ listened []string }

func (*guestNode) Output(context.Context, []byte, ...string) ([]byte, error) { return nil, nil }
func (*guestNode) Daemon([]string, string) (int, error)                      { return 1, nil }
func (*guestNode) Do(func() error) error                                     { return errors.New("a guest's stack") }
func (*guestNode) CPU() (cgroup.Usage, error)                                { return cgroup.Usage{}, nil }
func (*guestNode) GroupRuns(int, string) bool                                { return false }
func (*guestNode) StopGroup(int, time.Duration) error                        { return nil }
func (g *guestNode) ListenEcho(_ context.Context, network, addr string) (io.Closer, error) {
	g.listened = append(g.listened, network+" "+addr)
	return io.NopCloser(nil), nil
}

// TestRunXDPToAGuest: rtt's method xdp to a VM guest destination is refused with the reason
// before anything is sent (its reflector would be an XDP program in the guest's kernel).
func TestRunXDPToAGuest(t *testing.T) {
	p := labtest.Plan(t, "name: rttg\nendpoints:\n  client: {kind: client}\n  server: {kind: server, vm: {}}\nchains:\n  - {name: c, from: client, to: server}\n")
	c, err := p.ProbeChain("c")
	if err != nil {
		t.Fatal(err)
	}
	g := &guestNode{}
	var asked []string
	env := probe.Env{Plan: p, Chain: c, Node: func(name string) (probe.Node, error) {
		asked = append(asked, name)
		if name == "server" {
			return g, nil
		}
		return nil, errors.New("test: the source is not reached")
	}}
	err = rtt.New(rtt.Config{Method: echo.MethodXDP, Count: 10}).Run(context.Background(), env, func(results.Sample) {})
	if !errors.Is(err, rtt.ErrXDPGuest) {
		t.Fatalf("run = %v, want %v", err, rtt.ErrXDPGuest)
	}
	if len(asked) != 1 || len(g.listened) != 0 {
		t.Errorf("nodes asked for %v, echo servers opened %v; want only the destination looked at", asked, g.listened)
	}
}

// guestSource is a VM guest source as the probe sees it: Do fails, its agent sends the
// echoes (echo.Guest); every run is answered in full and recorded.
type guestSource struct {
	guestNode
	runs []rtt.Config
}

func (g *guestSource) Echo(_ context.Context, dst netip.AddrPort, cfg rtt.Config) (*rtt.Result, error) {
	g.runs = append(g.runs, cfg)
	c := cfg.WithDefaults()
	r := &rtt.Result{Protocol: c.Protocol, Size: c.Size, Requested: c.Rate, Achieved: c.Rate, Sent: c.Count, Received: c.Count,
		Threads: 1, CPU: time.Second, Wall: time.Second}
	for i := range c.Count {
		t0 := int64(1e9 + i*1e6) // the guest's clock
		r.Packets = append(r.Packets, rtt.Packet{Seq: uint64(i), Sent: t0, TXKernel: t0 + 1e3, RXKernel: t0 + 5e5, Recv: t0 + 5.1e5})
	}
	return r, nil
}

// TestRunFromAGuest: from a VM guest source the probe has the guest's agent send the echoes
// (warm-up and run), labels every sample clock=guest, gives the socket's path end with the
// reason, leaves out the agent's CPU; method xdp and path_end tc are refused with the
// reason before anything is sent, and the default method at a high rate falls back to the
// socket path in the guest, saying why.
func TestRunFromAGuest(t *testing.T) {
	p := labtest.Plan(t, "name: rttsrc\nendpoints:\n  client: {kind: client, vm: {}}\n  server: {kind: server}\nchains:\n  - {name: c, from: client, to: server}\n")
	c, err := p.ProbeChain("c")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		cfg      rtt.Config
		wantErr  error
		fallback string
	}{
		{"icmp", rtt.Config{Count: 10, Rate: 1000}, nil, ""},
		{"icmp path_end socket", rtt.Config{Count: 10, Rate: 1000, PathEnd: echo.PathEndSocket}, nil, ""},
		{"high rate, method unset", rtt.Config{Count: 10, Rate: 200_000}, nil, rtt.ErrXDPGuestSource.Error()},
		{"method xdp", rtt.Config{Count: 10, Method: echo.MethodXDP}, rtt.ErrXDPGuestSource, ""},
		{"path_end tc", rtt.Config{Count: 10, PathEnd: echo.PathEndTC}, rtt.ErrTCGuestSource, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := &guestSource{}
			env := probe.Env{Plan: p, Chain: c, Node: func(name string) (probe.Node, error) {
				if name == "client" {
					return g, nil
				}
				return nil, errors.New("test: the namespace destination is not entered")
			}}
			var samples []results.Sample
			err := rtt.New(tt.cfg).Run(context.Background(), env, func(s results.Sample) { samples = append(samples, s) })
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || len(g.runs) != 0 {
					t.Fatalf("run = %v after %d runs in the guest; want %v before any", err, len(g.runs), tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(g.runs) != 2 || g.runs[0].Count != 1 || g.runs[1].Count != 10 {
				t.Fatalf("runs in the guest %+v; want the warm-up's single echo, then the 10", g.runs)
			}
			if pe := g.runs[1].PathEnd; pe != echo.PathEndSocket || g.runs[1].CPUs != nil || g.runs[1].Method == echo.MethodXDP {
				t.Errorf("run asked of the guest %+v; want path_end socket, no host cores, no xdp", g.runs[1])
			}
			rtts := 0
			for _, s := range samples {
				if s.Labels["clock"] != rtt.GuestClock || s.Labels["fallback_reason"] != tt.fallback {
					t.Errorf("%s labels %v; want clock=%s, fallback_reason %q", s.Metric, s.Labels, rtt.GuestClock, tt.fallback)
				}
				switch s.Metric {
				case "rtt":
					rtts++
				case "cpu_self":
					t.Errorf("cpu_self %v from a guest source", s.Value)
				case "path_end":
					if s.Labels["end"] != echo.PathEndSocket || (s.Labels["note"] == "") != (tt.cfg.PathEnd == echo.PathEndSocket) {
						t.Errorf("path_end labels %v; want end socket, and why not tc when path_end was not asked", s.Labels)
					}
				}
			}
			if rtts != 10 {
				t.Errorf("%d rtt samples; want 10", rtts)
			}
		})
	}
}
