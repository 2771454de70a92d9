package apiplane

import (
	"strings"
	"testing"

	"github.com/sfclab/sfclab/api"
	"github.com/sfclab/sfclab/sfc"
)

// TestModelLifts: requests networking-sfc accepts and the data plane cannot take as they
// are reach the model in a form it steers, or are refused with a reason.
func TestModelLifts(t *testing.T) {
	ref := func(node, iface string) *api.PortRef { return &api.PortRef{ID: node + iface, Node: node, Iface: iface} }
	base := &sfc.Model{Ports: []sfc.Port{{Name: "c.eth0", Node: "c", Host: "h"}, {Name: "f.eth0", Node: "f", Host: "h"}, {Name: "s.eth0", Node: "s", Host: "h"}}}
	group := api.Group{ID: "g", Pairs: []api.Pair{{ID: "p1", Weight: 100, Ingress: *ref("f", "eth0"), Egress: *ref("f", "eth0")},
		{ID: "p2", Weight: 50, Ingress: *ref("f", "eth0"), Egress: *ref("f", "eth0")}, {ID: "p3", Weight: 0, Ingress: *ref("f", "eth0"), Egress: *ref("f", "eth0")}}}
	chain := func(id string, cls ...api.Classifier) *api.Chain {
		return &api.Chain{Lab: "l", ID: id, ChainID: 1, Classifiers: cls, Groups: []api.Group{group}}
	}
	tcp := func(lo, hi int) api.Classifier {
		return api.Classifier{ID: "fc", Ethertype: "IPv4", Protocol: "tcp", DestinationPortRangeMin: lo, DestinationPortRangeMax: hi, LogicalSource: ref("c", "eth0")}
	}
	for _, tc := range []struct {
		name    string
		chains  map[string]*api.Chain
		graphs  map[string]*api.Graph
		check   func(t *testing.T, m *sfc.Model)
		wantErr string
	}{
		{name: "chain without classifiers programs nothing", chains: map[string]*api.Chain{"a": chain("a")},
			graphs: map[string]*api.Graph{"g": {ID: "g", Edges: map[string][]string{"a": {"b"}}}},
			check: func(t *testing.T, m *sfc.Model) {
				if len(m.PortChains) != 0 || len(m.ServiceGraphs) != 1 || len(m.ServiceGraphs[0].PortChains) != 0 {
					t.Errorf("chains %+v graphs %+v, want no chain and no graph edge", m.PortChains, m.ServiceGraphs)
				}
			}},
		{name: "range from 0 starts at 1", chains: map[string]*api.Chain{"a": chain("a", tcp(0, 80))},
			check: func(t *testing.T, m *sfc.Model) {
				if fc := m.FlowClassifiers[0]; fc.DestinationPortRangeMin != 1 || fc.DestinationPortRangeMax != 80 {
					t.Errorf("range %d-%d, want 1-80", fc.DestinationPortRangeMin, fc.DestinationPortRangeMax)
				}
			}},
		{name: "one-sided range kept open", chains: map[string]*api.Chain{"a": chain("a", tcp(8000, 65535))},
			check: func(t *testing.T, m *sfc.Model) {
				if fc := m.FlowClassifiers[0]; fc.DestinationPortRangeMin != 8000 || fc.DestinationPortRangeMax != 65535 {
					t.Errorf("range %d-%d, want 8000-65535", fc.DestinationPortRangeMin, fc.DestinationPortRangeMax)
				}
			}},
		{name: "port 0 alone refused", chains: map[string]*api.Chain{"a": chain("a", func() api.Classifier { c := tcp(0, 0); c.PortZero = true; return c }())},
			wantErr: "port 0"},
		{name: "weights above 64 scaled", chains: map[string]*api.Chain{"a": chain("a", tcp(80, 80))},
			check: func(t *testing.T, m *sfc.Model) {
				var got []int
				for _, pp := range m.PortPairs {
					got = append(got, pp.Weight)
				}
				if len(got) != 3 || got[0] != 64 || got[1] != 32 || got[2] != 0 {
					t.Errorf("weights %v, want [64 32 0]", got)
				}
			}},
		{name: "asymmetric chain: destination port equal to source port dropped", chains: map[string]*api.Chain{"a": chain("a",
			func() api.Classifier { c := tcp(80, 80); c.LogicalDestination = ref("c", "eth0"); return c }())},
			check: func(t *testing.T, m *sfc.Model) {
				if fc := m.FlowClassifiers[0]; fc.LogicalDestinationPort != "" {
					t.Errorf("logical destination port %q, want none", fc.LogicalDestinationPort)
				}
			}},
		{name: "symmetric chain: destination port equal to source port kept (and refused by Validate)", chains: map[string]*api.Chain{"a": func() *api.Chain {
			c := chain("a", func() api.Classifier { c := tcp(80, 80); c.LogicalDestination = ref("c", "eth0"); return c }())
			c.Symmetric = true
			return c
		}()},
			check: func(t *testing.T, m *sfc.Model) {
				if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "same port") {
					t.Errorf("Validate: %v, want the same-port refusal", err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Model(base, tc.chains, tc.graphs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Model: %v, want an error about %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, m)
		})
	}
}
