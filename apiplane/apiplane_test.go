package apiplane

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/sfclab/sfclab/api"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/sfc"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/steer"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// TestApplyRemove deploys a transparent lab without chains, adds a chain as the API would
// (client -> f1 -> server for ICMP), pings through it, removes it, and checks an overlapping
// chain is refused.
func TestApplyRemove(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED LOUDLY: deploys a real lab and loads eBPF: needs root")
	}
	lab, err := spec.Decode([]byte(`name: steer-api
steering: transparent
endpoints: {client: {kind: client}, server: {kind: server}}
functions: {f1: {kind: forwarder}}
port_pairs: {pp: {ingress: f1.eth0, egress: f1.eth0}}
`), "api.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(lab)
	if err != nil {
		t.Fatal(err)
	}
	j := journal.Journal{Root: t.TempDir()}
	d := &deploy.Deployer{Journal: j, Log: t.Logf}
	if _, err := d.Deploy(context.Background(), p, "test"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Destroy(context.Background(), p.Lab); err != nil {
			t.Error(err)
		}
	})
	ref := func(node, iface string) api.PortRef { return api.PortRef{ID: node + iface, Node: node, Iface: iface} }
	src := ref("client", "eth0")
	chain := &api.Chain{Lab: p.Lab, ID: "c1", Name: "c1",
		Classifiers: []api.Classifier{{ID: "fc1", Ethertype: "IPv4", Protocol: "icmp", LogicalSource: &src}},
		Groups:      []api.Group{{ID: "g1", Pairs: []api.Pair{{ID: "pp1", Weight: 1, Ingress: ref("f1", "eth0"), Egress: ref("f1", "eth0")}}}}}
	pl := &Plane{Journal: j}
	if err := pl.ApplyChain(context.Background(), chain); err != nil {
		t.Fatal(err)
	}
	server := p.Transparent.Node("server").Ports[0].Address.Addr().String()
	ping := func() {
		t.Helper()
		if out, err := exec.Command("ip", "netns", "exec", p.Transparent.Node("client").Netns, "ping", "-c", "2", "-i", "0.2", "-W", "2", server).CombinedOutput(); err != nil {
			t.Fatalf("ping: %v\n%s", err, out)
		}
	}
	hop0 := func() uint64 {
		dp, err := steer.Open(p.Lab)
		if err != nil {
			t.Fatal(err)
		}
		defer dp.Close()
		cs, err := dp.Counters()
		if err != nil {
			t.Fatal(err)
		}
		m, err := Model(p.Transparent.Model, map[string]*api.Chain{"c1": chain}, nil)
		if err != nil {
			t.Fatal(err)
		}
		tab, err := sfc.Compile(m, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.Path == tab.ChainPath("api-c1") && c.Hop == 0 {
				return c.Packets
			}
		}
		return 0
	}
	ping()
	if n := hop0(); n < 2 {
		t.Fatalf("the API chain steered %d echo requests into f1, want >= 2", n)
	}
	overlap := *chain
	overlap.ID, overlap.Name = "c2", "c2"
	overlap.Classifiers = []api.Classifier{{ID: "fc2", Ethertype: "IPv4", LogicalSource: &src}}
	if err := pl.ApplyChain(context.Background(), &overlap); !errors.Is(err, sfc.ErrClassifierOverlap) {
		t.Errorf("overlapping chain: %v, want %v", err, sfc.ErrClassifierOverlap)
	}
	if err := pl.RemoveChain(context.Background(), p.Lab, "c1"); err != nil {
		t.Fatal(err)
	}
	before := hop0()
	ping()
	if n := hop0(); n != before {
		t.Errorf("after RemoveChain the chain still steered %d packets", n-before)
	}
}

// TestModel: chains given over the API join the lab file's model: they reuse the file's
// groups and pairs they name (no copies), keep the path their chain_id gives them whatever
// other chains come and go, and a service graph over a file chain and an API chain compiles to
// the graph flag on the source path and a classifier rule at GraphKey|path.
func TestModel(t *testing.T) {
	lab, err := spec.Decode([]byte(`name: model
steering: transparent
endpoints: {client: {kind: client}, server: {kind: server}}
functions: {f1: {kind: forwarder}, f2: {kind: forwarder}}
port_pairs: {pp1: {ingress: f1.eth0, egress: f1.eth0}}
port_pair_groups: {g1: {port_pairs: [pp1]}}
flow_classifiers: {udp: {protocol: udp, logical_source_port: client.eth0}}
port_chains: {c-udp: {flow_classifiers: [udp], port_pair_groups: [g1]}}
`), "model.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(lab)
	if err != nil {
		t.Fatal(err)
	}
	ref := func(node, iface string) api.PortRef { return api.PortRef{Node: node, Iface: iface} }
	src := ref("client", "eth0")
	f2 := api.Group{ID: "g2", Pairs: []api.Pair{{ID: "pp2", Weight: 1, Ingress: ref("f2", "eth0"), Egress: ref("f2", "eth0")}}}
	g1 := api.Group{ID: "file-g1", LabFile: "g1", Pairs: []api.Pair{{ID: "file-pp1", LabFile: "pp1", Weight: 1, Ingress: ref("f1", "eth0"), Egress: ref("f1", "eth0")}}}
	chain := func(id string, chainID int, proto string, groups ...api.Group) *api.Chain {
		return &api.Chain{Lab: p.Lab, ID: id, ChainID: chainID, Groups: groups,
			Classifiers: []api.Classifier{{ID: "fc-" + id, Ethertype: "IPv4", Protocol: proto, LogicalSource: &src}}}
	}
	// A graph's destination chain classifies on its own logical source port as well: put it
	// where it does not overlap the source chain's.
	onServer := func(c *api.Chain) *api.Chain {
		dst := ref("server", "eth0")
		c.Classifiers[0].LogicalSource = &dst
		return c
	}
	for _, tc := range []struct {
		name   string
		chains map[string]*api.Chain
		graphs map[string]*api.Graph
		check  func(t *testing.T, m *sfc.Model, tab *sfc.Tables)
	}{
		{"file group reused", map[string]*api.Chain{"a": chain("a", 2, "tcp", g1, f2)}, nil, func(t *testing.T, m *sfc.Model, tab *sfc.Tables) {
			if len(m.PortPairGroups) != 2 || len(m.PortPairs) != 2 {
				t.Errorf("groups %v pairs %v: want the file's g1 once and the API's g2", m.PortPairGroups, m.PortPairs)
			}
			if got := m.PortChains[1].PortPairGroups; len(got) != 2 || got[0] != "g1" || got[1] != ModelName("g2") {
				t.Errorf("API chain groups %v", got)
			}
			if tab.ChainPath(ModelName("a")) != 4 || tab.ChainPath("c-udp") != 2 {
				t.Errorf("paths: api %d (want 4 = 2*chain_id), file %d (want 2)", tab.ChainPath(ModelName("a")), tab.ChainPath("c-udp"))
			}
		}},
		{"path kept when an earlier chain goes", map[string]*api.Chain{"b": chain("b", 3, "icmp", f2)}, nil, func(t *testing.T, m *sfc.Model, tab *sfc.Tables) {
			if tab.ChainPath(ModelName("b")) != 6 {
				t.Errorf("chain_id 3 compiled to path %d, want 6", tab.ChainPath(ModelName("b")))
			}
		}},
		{"graph", map[string]*api.Chain{"next": onServer(chain("next", 2, "udp", f2))},
			map[string]*api.Graph{"sg": {Lab: p.Lab, ID: "sg", Edges: map[string][]string{"file-c": {"next"}}, LabFile: map[string]string{"file-c": "c-udp"}}},
			func(t *testing.T, m *sfc.Model, tab *sfc.Tables) {
				var flags uint32
				for _, pa := range tab.Paths {
					if pa.ID == 2 {
						flags = pa.Flags
					}
				}
				rules := tab.Rules[sfc.GraphKey|2]
				if flags&sfc.PathGraph == 0 || len(rules) != 1 || rules[0].Path != 4 {
					t.Errorf("graph c-udp -> next: source flags %#x, rules at GraphKey|2 %+v; want the graph flag and one rule to path 4", flags, rules)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Model(p.Transparent.Model, tc.chains, tc.graphs)
			if err != nil {
				t.Fatal(err)
			}
			tab, err := sfc.Compile(m, nil)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, m, tab)
		})
	}
}
