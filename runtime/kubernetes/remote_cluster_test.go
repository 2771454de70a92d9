package kubernetes_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	nsrt "github.com/sfclab/sfclab/runtime/netns"
	"github.com/sfclab/sfclab/spec"
)

// guardLabs refuses this test process (sfclab's own process; the agents are others) every
// access to the labs' network namespaces by name and to any process's namespaces or cgroups
// under /proc, from now until the test's cleanups begin (before the labs are destroyed: the
// netns runtime beside the kubernetes one removes what carries a lab's tag on this machine).
// It checks first that the guard refuses what sfclab did before the agent did it: opening a
// pod's namespace by its name. release ends the guard early (a netns lab deployed after it).
func guardLabs(t *testing.T, labs ...string) (release func()) {
	t.Helper()
	prefixes := []string{"/proc/"}
	for _, l := range labs {
		prefixes = append(prefixes, plan.NetnsName(l, ""))
	}
	release = netdev.GuardNamespaces(prefixes...)
	t.Cleanup(release)
	if _, err := netdev.OpenNS(plan.NetnsName(labs[0], "client")); !errors.Is(err, netdev.ErrGuarded) {
		t.Fatalf("the guard let this process open %s: %v", plan.NetnsName(labs[0], "client"), err)
	}
	n := &nsrt.Node{Name: "client", Netns: plan.NetnsName(labs[0], "client")}
	if err := n.Do(func() error { return nil }); !errors.Is(err, netdev.ErrGuarded) {
		t.Fatalf("the guard let this process enter %s: %v", n.Netns, err)
	}
	return release
}

// deployedGuarded is deployed with the labs' namespaces guarded from the deploy on (guardLabs
// is registered after deployed's destroy, so it is released before it).
func deployedGuarded(t *testing.T, d *deploy.Deployer, lab *spec.Lab) *plan.Plan {
	t.Helper()
	release := netdev.GuardNamespaces("/proc/", plan.NetnsName(lab.Name, ""))
	p, _ := func() (*plan.Plan, deploy.Timing) {
		defer release()
		return deployed(t, d, lab)
	}()
	return p
}

// inspectThroughAgent checks that `inspect` of a transparent lab reads the pods' interfaces
// and the steering counters (through the agent: the callers hold the guard) and that a packet
// was counted into a chain.
func inspectThroughAgent(t *testing.T, d *deploy.Deployer, lab string) {
	t.Helper()
	info, err := d.Inspect(context.Background(), lab)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range info.Nodes {
		if n.Error != "" {
			t.Errorf("inspect node %s: %s", n.Name, n.Error)
		} else if len(n.Interfaces) == 0 || n.Interfaces[0].Stats.RxPackets == 0 {
			t.Errorf("inspect node %s: no packets received on its port: %+v", n.Name, n.Interfaces)
		}
	}
	if info.Steering == nil || info.Steering.Error != "" {
		t.Fatalf("inspect steering: %+v", info.Steering)
	}
	var steered uint64
	for _, pa := range info.Steering.Paths {
		if len(pa.Packets) > 0 {
			steered += pa.Packets[0]
		}
	}
	if steered == 0 {
		t.Errorf("inspect: no packet counted into a chain: %+v", info.Steering.Paths)
	}
}

func serverAddr(t *testing.T, p *plan.Plan) netip.Addr {
	t.Helper()
	for _, n := range p.Transparent.Nodes {
		if n.Name == "server" {
			return n.Ports[0].Address.Addr()
		}
	}
	t.Fatalf("lab %s has no server", p.Lab)
	return netip.Addr{}
}
