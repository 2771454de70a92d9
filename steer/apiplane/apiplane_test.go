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
		tab, err := sfc.Compile(Model(p.Transparent.Model, map[string]*api.Chain{"c1": chain}), nil)
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
