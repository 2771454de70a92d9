package deploy

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/internal/plantest"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
)

// TestShapingRate deploys examples/shaped.yaml: tbf sits on every interface of the shaped
// segments as the kernel reports it, inspect shows it, and destroy leaves nothing.
func TestShapingRate(t *testing.T) {
	requireRoot(t)
	d := testDeployer(t)
	p := plantest.LoadAs(t, "../examples/shaped.yaml", "t-shape")
	t.Cleanup(func() { _ = d.Destroy(context.Background(), p.Lab) })
	if _, err := d.Deploy(context.Background(), p, "shaped.yaml"); err != nil {
		t.Fatal(err)
	}
	info, err := d.Inspect(context.Background(), p.Lab)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // node/interface -> shaping
		"client/eth0": "tbf rate 10gbit burst 10", "f1/ingress": "tbf rate 10gbit burst 10",
		"f1/egress": "tbf rate 1gbit", "server/eth0": "tbf rate 1gbit",
	}
	for _, n := range info.Nodes {
		for _, i := range n.Interfaces {
			w, ok := want[n.Name+"/"+i.Name]
			if !ok {
				t.Errorf("unexpected interface %s/%s", n.Name, i.Name)
				continue
			}
			if !strings.HasPrefix(i.Shaping, w) {
				t.Errorf("%s/%s shaping %q, want %q", n.Name, i.Name, i.Shaping, w)
			}
		}
	}
	// And the kernel's own view, through tc.
	out, err := exec.Command("ip", "netns", "exec", p.Node("f1").Netns, "tc", "qdisc", "show", "dev", "egress").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "tbf") || !strings.Contains(string(out), "rate 1Gbit") {
		t.Errorf("tc qdisc show: %v %s", err, out)
	}
}

// TestShapingNetem: where the kernel has no netem, a lab with delay is refused before
// anything is created, naming the module; where it has netem, the delay is there and ping
// feels it.
func TestShapingNetem(t *testing.T) {
	requireRoot(t)
	d := testDeployer(t)
	p := plantest.Decode(t, `
name: t-netem
endpoints: {client: {}, server: {}}
chains: [{from: client, to: server, shaping: [{delay: 20ms, loss: 0%}]}]
`)
	t.Cleanup(func() { _ = d.Destroy(context.Background(), p.Lab) })
	_, err := d.Deploy(context.Background(), p, "test.yaml")
	if netdev.NetemAvailable() != nil {
		if !errors.Is(err, netdev.ErrNoNetem) || !strings.Contains(err.Error(), "sch_netem") {
			t.Fatalf("deploy without netem: err = %v, want ErrNoNetem naming sch_netem", err)
		}
		if ns, _ := netdev.ListNetns(plan.NetnsName(p.Lab, "")); len(ns) > 0 {
			t.Errorf("refused deploy left namespaces: %v", ns)
		}
		if _, err := d.Journal.ReadState(p.Lab); !errors.Is(err, journal.ErrNotDeployed) {
			t.Errorf("refused deploy left a journal: %v", err)
		}
		t.Logf("this kernel has no netem; refused as expected: %v", err)
		return
	}
	if err != nil {
		t.Fatalf("deploy with netem: %v", err)
	}
	node, err := d.Node(p, "client")
	if err != nil {
		t.Fatal(err)
	}
	out, err := node.Output(context.Background(), nil, "ping", "-n", "-c", "3", "-i", "0.2", "-W", "2", p.Chains[0].Target.String())
	if err != nil {
		t.Fatalf("ping: %v %s", err, out)
	}
	// Both directions get 20 ms: the RTT is at least 40 ms.
	i := strings.Index(string(out), "rtt min/avg/max/mdev = ")
	if i < 0 {
		t.Fatalf("no rtt in %s", out)
	}
	minRTT, _ := strconv.ParseFloat(strings.Split(string(out)[i+len("rtt min/avg/max/mdev = "):], "/")[0], 64)
	if minRTT < 40 {
		t.Errorf("min rtt %.2f ms, want >= 40 ms with 20 ms delay each way", minRTT)
	}
}
