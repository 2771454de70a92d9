package sfc

import (
	"errors"
	"net/netip"
	"testing"
)

// base is a valid model: s -> f1 -> f2 -> d, plus a tap.
func base() *Model {
	return &Model{
		Ports: []Port{
			{Name: "s", Node: "s", Host: "h1"}, {Name: "d", Node: "d", Host: "h2"},
			{Name: "f1.in", Node: "f1", Host: "h1"}, {Name: "f1.out", Node: "f1", Host: "h1"},
			{Name: "f2", Node: "f2", Host: "h2"}, {Name: "t", Node: "t", Host: "h2"},
			{Name: "x", Node: "x", Host: "h2"},
		},
		FlowClassifiers: []FlowClassifier{
			{Name: "fc1", Protocol: "tcp", DestinationPortRangeMin: 80, DestinationPortRangeMax: 80,
				LogicalSourcePort: "s", LogicalDestinationPort: "d"},
			{Name: "fc2", Protocol: "udp", LogicalSourcePort: "s"},
		},
		PortPairs: []PortPair{
			{Name: "pp1", Ingress: "f1.in", Egress: "f1.out"},
			{Name: "pp2", Ingress: "f2", Egress: "f2", Weight: 2},
			{Name: "ppt", Ingress: "t", Egress: "t"},
		},
		PortPairGroups: []PortPairGroup{
			{Name: "g1", PortPairs: []string{"pp1"}},
			{Name: "g2", PortPairs: []string{"pp2"}, LBFields: []string{"ip_src", "ip_dst"}},
			{Name: "gt", PortPairs: []string{"ppt"}, TapEnabled: true},
		},
		PortChains: []PortChain{
			{Name: "c1", FlowClassifiers: []string{"fc1"}, PortPairGroups: []string{"g1", "gt", "g2"},
				ChainParameters: ChainParameters{Symmetric: true}},
			{Name: "c2", FlowClassifiers: []string{"fc2"}, PortPairGroups: []string{"g2"}},
		},
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(m *Model)
		kind  error
		where Ref
	}{
		{"valid", func(*Model) {}, nil, Ref{}},
		{"no logical source port", func(m *Model) { m.FlowClassifiers[1].LogicalSourcePort = "" },
			ErrNoLogicalSourcePort, Ref{"flow_classifiers", "fc2", "logical_source_port"}},
		{"overlap on one source port", func(m *Model) { m.FlowClassifiers[1].Protocol = "" },
			ErrClassifierOverlap, Ref{"flow_classifiers", "fc2", ""}},
		{"port pair across hosts", func(m *Model) { m.Ports[3].Host = "h2" },
			ErrPortPairAcrossHosts, Ref{"port_pairs", "pp1", "egress"}},
		{"unknown port", func(m *Model) { m.PortPairs[1].Ingress = "nope" },
			ErrUnknownPort, Ref{"port_pairs", "pp2", "ingress"}},
		{"tap first", func(m *Model) { m.PortChains[0].PortPairGroups = []string{"gt", "g1"} },
			ErrTapFirst, Ref{"port_chains", "c1", "port_pair_groups"}},
		{"symmetric needs destination port", func(m *Model) { m.FlowClassifiers[0].LogicalDestinationPort = "" },
			ErrNoLogicalDestinationPort, Ref{"flow_classifiers", "fc1", "logical_destination_port"}},
		{"classifier in two chains", func(m *Model) { m.PortChains[1].FlowClassifiers = []string{"fc1"} },
			ErrClassifierInUse, Ref{"port_chains", "c2", "flow_classifiers"}},
		{"port pair in two groups", func(m *Model) { m.PortPairGroups[1].PortPairs = []string{"pp1"} },
			ErrPortPairInUse, Ref{"port_pair_groups", "g2", "port_pairs"}},
		{"bad lb field", func(m *Model) { m.PortPairGroups[0].LBFields = []string{"ip_tos"} },
			ErrInvalid, Ref{"port_pair_groups", "g1", "lb_fields"}},
		{"port range without protocol", func(m *Model) {
			m.FlowClassifiers[1].Protocol = "icmp"
			m.FlowClassifiers[1].SourcePortRangeMin = 1
			m.FlowClassifiers[1].SourcePortRangeMax = 2
		},
			ErrInvalid, Ref{"flow_classifiers", "fc2", "source_port_range_min"}},
		{"correlation", func(m *Model) { m.PortChains[1].ChainParameters.Correlation = "mpls" },
			ErrCorrelation, Ref{"port_chains", "c2", "chain_parameters"}},
		{"graph loop", func(m *Model) {
			m.ServiceGraphs = []ServiceGraph{{Name: "g", PortChains: map[string][]string{"c1": {"c2"}, "c2": {"c1"}}}}
		}, ErrGraphLoop, Ref{"service_graphs", "g", "port_chains"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := base()
			tc.edit(m)
			err := m.Validate()
			if tc.kind == nil {
				if err != nil {
					t.Fatalf("valid model refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want %v", err, tc.kind)
			}
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("not an Errors: %T", err)
			}
			for _, e := range es {
				if errors.Is(e, tc.kind) && e.Ref == tc.where {
					return
				}
			}
			t.Errorf("no %v at %v in %v", tc.kind, tc.where, err)
		})
	}
}

func TestOverlap(t *testing.T) {
	p := netip.MustParsePrefix
	for _, tc := range []struct {
		a, b FlowClassifier
		want bool
	}{
		{FlowClassifier{Protocol: "tcp"}, FlowClassifier{Protocol: "udp"}, false},
		{FlowClassifier{Protocol: "tcp"}, FlowClassifier{}, true},
		{FlowClassifier{Protocol: "tcp", DestinationPortRangeMin: 80, DestinationPortRangeMax: 90},
			FlowClassifier{Protocol: "tcp", DestinationPortRangeMin: 91, DestinationPortRangeMax: 100}, false},
		{FlowClassifier{Protocol: "tcp", DestinationPortRangeMin: 80, DestinationPortRangeMax: 90},
			FlowClassifier{Protocol: "tcp", DestinationPortRangeMin: 90, DestinationPortRangeMax: 100}, true},
		{FlowClassifier{SourceIPPrefix: p("198.18.0.0/24")}, FlowClassifier{SourceIPPrefix: p("198.18.1.0/24")}, false},
		{FlowClassifier{SourceIPPrefix: p("198.18.0.0/16")}, FlowClassifier{SourceIPPrefix: p("198.18.1.0/24")}, true},
		{FlowClassifier{Ethertype: "IPv6"}, FlowClassifier{}, false},
	} {
		if got := Overlap(tc.a, tc.b); got != tc.want {
			t.Errorf("Overlap(%+v, %+v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestCompile(t *testing.T) {
	m := base()
	m.ServiceGraphs = []ServiceGraph{{Name: "sg", PortChains: map[string][]string{"c2": {"c1"}}}}
	// c1's classifier must not overlap c2's on s for the graph test; it does not (tcp vs udp).
	tab, err := Compile(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	c1, c2 := tab.ChainPath("c1"), tab.ChainPath("c2")
	if c1 != 2 || c2 != 4 {
		t.Fatalf("paths %d %d, want 2 4", c1, c2)
	}
	var fwd, rev *PathEntry
	for i := range tab.Paths {
		switch tab.Paths[i].ID {
		case c1:
			fwd = &tab.Paths[i]
		case c1 | 1:
			rev = &tab.Paths[i]
		}
	}
	if fwd == nil || rev == nil || fwd.Flags&PathSymmetric == 0 || rev.Flags&PathReverse == 0 {
		t.Fatalf("symmetric chain paths: %+v %+v", fwd, rev)
	}
	if len(rev.Groups) != 3 || rev.Groups[0] != fwd.Groups[2] {
		t.Errorf("reverse groups %v, forward %v", rev.Groups, fwd.Groups)
	}
	// f1 leaves hop 0 forward by f1.out and hop 2 reverse by f1.in; the tap has no exit.
	if got := tab.HopOf[PathPort{c1, tab.PortID("f1.out")}]; got != 0 {
		t.Errorf("hop of f1.out on c1 = %d", got)
	}
	if got, ok := tab.HopOf[PathPort{c1 | 1, tab.PortID("f1.in")}]; !ok || got != 2 {
		t.Errorf("hop of f1.in on reverse c1 = %d %v", got, ok)
	}
	if _, ok := tab.HopOf[PathPort{c1, tab.PortID("t")}]; ok {
		t.Errorf("a tap has an exit hop")
	}
	if !tab.Ports[tab.PortID("t")-1].Tap {
		t.Errorf("tap port not flagged")
	}
	// Reverse classifier at d with swapped ports; graph rule keyed by c2's path.
	rs := tab.Rules[tab.PortID("d")]
	if len(rs) != 1 || rs[0].Path != c1|1 || rs[0].SportMin != 80 || rs[0].DportMin != 0 {
		t.Errorf("reverse rules at d: %+v", rs)
	}
	if g := tab.Rules[GraphKey|c2]; len(g) != 1 || g[0].Path != c1 {
		t.Errorf("graph rules: %+v", g)
	}
	// Weights: pp2 weight 2 -> two slots.
	for _, g := range tab.Groups {
		if g.Name == "g2" && len(g.Slots) != 2 {
			t.Errorf("g2 slots %v", g.Slots)
		}
	}
	// An IPv6 classifier compiles to IPv6 rules (both directions of a symmetric chain); the
	// IPv4 rules stay IPv4.
	m.FlowClassifiers[0].Ethertype = "IPv6"
	tab, err = Compile(m, nil)
	if err != nil {
		t.Fatalf("IPv6 classifier: %v", err)
	}
	for key, rs := range tab.Rules {
		for _, r := range rs {
			if want := r.Classifier == m.FlowClassifiers[0].Name; r.IPv6 != want {
				t.Errorf("rule %+v at %#x: IPv6 %v, want %v", r, key, r.IPv6, want)
			}
		}
	}
}

// TestCompileChainID: a chain's ChainID fixes its path at 2*ChainID; two chains on one path or
// a chain id beyond the VNI's range are refused.
func TestCompileChainID(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ids      [2]int
		wantErr  error
		wantPath [2]uint32
	}{
		{"positions", [2]int{0, 0}, nil, [2]uint32{2, 4}},
		{"c2 keeps chain id 7", [2]int{0, 7}, nil, [2]uint32{2, 14}},
		{"c2 on c1's position", [2]int{0, 1}, ErrDuplicate, [2]uint32{}},
		{"beyond the VNI", [2]int{0, MaxPaths / 2}, ErrTooMany, [2]uint32{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := base()
			m.PortChains[0].ChainID, m.PortChains[1].ChainID = tc.ids[0], tc.ids[1]
			tab, err := Compile(m, nil)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Compile: %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := [2]uint32{tab.ChainPath("c1"), tab.ChainPath("c2")}; got != tc.wantPath {
				t.Errorf("paths %v, want %v", got, tc.wantPath)
			}
		})
	}
}

// TestGroupWeights: a group's slot table holds each pair as often as its weight; a pair of
// weight 0 takes no flows, unless every pair of the group weighs 0 (then one slot each).
func TestGroupWeights(t *testing.T) {
	for _, tc := range []struct {
		name    string
		weights []int
		want    []int // slots per pair
	}{
		{"weighted", []int{1, 3}, []int{1, 3}},
		{"one at zero", []int{0, 2}, []int{0, 2}},
		{"all zero", []int{0, 0}, []int{1, 1}},
		{"largest", []int{MaxWeight, 1}, []int{MaxWeight, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := base()
			m.PortPairs[0].Weight, m.PortPairs[1].Weight = tc.weights[0], tc.weights[1]
			m.PortPairs[1].Ingress, m.PortPairs[1].Egress = "f1.in", "f1.out" // same node: one group
			m.PortPairGroups = []PortPairGroup{{Name: "g1", PortPairs: []string{"pp1", "pp2"}}}
			m.PortChains = []PortChain{{Name: "c2", FlowClassifiers: []string{"fc2"}, PortPairGroups: []string{"g1"}}}
			tab, err := Compile(m, nil)
			if err != nil {
				t.Fatal(err)
			}
			count := map[uint32]int{}
			for _, s := range tab.Groups[0].Slots {
				count[s]++
			}
			got := []int{count[1], count[2]}
			if got[0] != tc.want[0] || got[1] != tc.want[1] {
				t.Errorf("slots per pair %v, want %v", got, tc.want)
			}
		})
	}
}
