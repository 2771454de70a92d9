package rtt_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/rtt"
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
	err = rtt.New(rtt.Config{Method: rtt.MethodXDP, Count: 10}).Run(context.Background(), env, func(results.Sample) {})
	if !errors.Is(err, rtt.ErrXDPGuest) {
		t.Fatalf("run = %v, want %v", err, rtt.ErrXDPGuest)
	}
	if len(asked) != 1 || len(g.listened) != 0 {
		t.Errorf("nodes asked for %v, echo servers opened %v; want only the destination looked at", asked, g.listened)
	}
}
