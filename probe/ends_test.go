package probe

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/plan"
)

type namedNode struct{ name string }

func (namedNode) Output(context.Context, []byte, ...string) ([]byte, error) { return nil, nil }
func (namedNode) Daemon([]string, string) (int, error)                      { return 0, nil }
func (namedNode) Do(fn func() error) error                                  { return fn() }
func (namedNode) CPU() (cgroup.Usage, error)                                { return cgroup.Usage{}, nil }

// TestEnds: the chain's source and its destination group's first instance, or an error that
// names the caller and what is missing.
func TestEnds(t *testing.T) {
	p := &plan.Plan{Nodes: []*plan.Node{{Name: "c-1", Group: "client"}, {Name: "f1-1", Group: "f1", Role: plan.RoleFunction}, {Name: "s-1", Group: "server"}, {Name: "s-2", Group: "server"}}}
	nodes := func(name string) (Node, error) {
		if name == "gone" {
			return nil, errors.New("node gone not deployed")
		}
		return namedNode{name}, nil
	}
	for _, c := range []struct {
		name          string
		chain         plan.Chain
		src, dst, err string
	}{
		{"ends", plan.Chain{Name: "c", To: "server", Path: []string{"c-1", "f1-1", "s-1"}}, "c-1", "s-1", ""},
		{"no path", plan.Chain{Name: "c", To: "server", Path: []string{"c-1"}}, "", "", "run x on chain c: no path"},
		{"no destination", plan.Chain{Name: "c", To: "f1", Path: []string{"c-1", "f1-1"}}, "", "", "run x on chain c: no destination"},
		{"source missing", plan.Chain{Name: "c", To: "server", Path: []string{"gone", "s-1"}}, "", "", "run x on chain c: node gone not deployed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, dst, dstName, err := Ends(Env{Plan: p, Chain: &c.chain, Node: nodes}, "run x")
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if src.(namedNode).name != c.src || dst.(namedNode).name != c.dst || dstName != c.dst {
				t.Errorf("ends %v %v %s, want %s %s", src, dst, dstName, c.src, c.dst)
			}
		})
	}
}
