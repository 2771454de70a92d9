package probe_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/probe"
)

// node is a probe.Node whose Do succeeds or fails as told.
type node struct{ enter error }

func (node) Output(context.Context, []byte, ...string) ([]byte, error) { return nil, nil }
func (node) Daemon([]string, string) (int, error)                      { return 1, nil }
func (n node) Do(fn func() error) error {
	if n.enter != nil {
		return n.enter
	}
	return fn()
}
func (node) CPU() (cgroup.Usage, error) { return cgroup.Usage{}, nil }

// agentNode has Guest's methods too (as a Kubernetes pod, whose agent answers them, and a VM
// guest have).
type agentNode struct{ node }

func (agentNode) GroupRuns(int, string) bool         { return true }
func (agentNode) StopGroup(int, time.Duration) error { return nil }

// TestInGuest: a node is measured as a guest only when it has Guest's methods and cannot be
// entered (a VM guest, a pod on another machine); a pod on this machine, which Do enters, is
// measured as a namespace, and a plain node never is a guest.
func TestInGuest(t *testing.T) {
	refused := errors.New("cannot enter")
	for _, tc := range []struct {
		name string
		n    probe.Node
		want bool
	}{
		{"namespace node", node{}, false},
		{"namespace node whose Do fails", node{enter: refused}, false},
		{"agent-answered node entered here (pod on this machine)", agentNode{node{}}, false},
		{"agent-answered node not entered (VM guest, remote pod)", agentNode{node{enter: refused}}, true},
	} {
		if _, got := probe.InGuest(tc.n); got != tc.want {
			t.Errorf("%s: InGuest = %v, want %v", tc.name, got, tc.want)
		}
	}
}
