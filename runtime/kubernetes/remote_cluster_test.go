package kubernetes_test

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/kubernetes"
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

// TestTwoTransparentLabs deploys two transparent labs on the cluster at once (the same lab
// file, two names, the same addresses) and moves traffic through each: their hosts, ports and
// steering maps must not collide on the node, and they hold different VXLAN slots (VNIs and
// steering port, slot.go), released by destroy. (On one node neither lab builds a VXLAN
// device: the slots' effect on the wire needs labs across nodes.)
func TestTwoTransparentLabs(t *testing.T) {
	requireCluster(t)
	d := deployer(t)
	labs := []string{"k8t-2a", "k8t-2b"}
	ps := make([]*plan.Plan, len(labs))
	var wg sync.WaitGroup
	var mu sync.Mutex
	errs := map[string]error{}
	for i, name := range labs { // at once: two deploys racing on the node
		lab := loadLab(t, "../../examples/transparent-fw.yaml", name, spec.RuntimeKubernetes)
		pl, release, err := d.Plan(context.Background(), lab)
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = pl
		t.Cleanup(func() {
			if err := d.Destroy(context.Background(), name); err != nil && !errors.Is(err, journal.ErrNotDeployed) {
				t.Errorf("destroy %s: %v", name, err)
			}
			if l, err := (kubernetes.Runtime{Kubeconfig: kubeconfig}).Leftovers(context.Background(), name); err != nil || len(l) > 0 {
				t.Errorf("lab %s left in the cluster: %v %v", name, l, err)
			}
			if _, held, err := kubernetes.LabSlot(kubernetes.Runtime{Kubeconfig: kubeconfig}, name); err != nil || held {
				t.Errorf("lab %s still holds its VXLAN slot after destroy (%v)", name, err)
			}
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer release()
			_, err := d.Deploy(context.Background(), pl, "test")
			mu.Lock()
			errs[name] = err
			mu.Unlock()
		}()
	}
	wg.Wait()
	for name, err := range errs {
		if err != nil {
			t.Fatalf("deploy %s beside another transparent lab: %v", name, err)
		}
	}
	rt := kubernetes.Runtime{Kubeconfig: kubeconfig}
	slots := map[int]string{}
	for _, name := range labs {
		s, ok, err := kubernetes.LabSlot(rt, name)
		if err != nil || !ok {
			t.Fatalf("lab %s holds no VXLAN slot: %v", name, err)
		}
		if other, dup := slots[s]; dup {
			t.Errorf("labs %s and %s hold VXLAN slot %d (VNIs and steering port collide on a node)", other, name, s)
		}
		slots[s] = name
	}
	t.Logf("VXLAN slots: %v", slots)
	bps := make([]float64, len(ps))
	for i, p := range ps { // both labs up: traffic through each in turn
		dst := serverAddr(t, p)
		var client, server runtime.Node = node(t, d, p, "client"), node(t, d, p, "server")
		pingTTL(t, client, dst)
		bps[i] = iperf3(t, client, server, dst, 5201, d.Journal.NodeDir(p.Lab))
	}
	t.Logf("iperf3 through two transparent labs deployed at once: %s %.2f Gbit/s, %s %.2f Gbit/s", labs[0], bps[0]/1e9, labs[1], bps[1]/1e9)
	for i, p := range ps {
		info, err := d.Inspect(context.Background(), p.Lab)
		if err != nil {
			t.Fatal(err)
		}
		var steered uint64
		for _, pa := range info.Steering.Paths {
			if len(pa.Packets) > 0 {
				steered += pa.Packets[0]
			}
		}
		if steered == 0 {
			t.Errorf("lab %s: no packet counted into its chains (its maps: %+v)", labs[i], info.Steering)
		}
	}
}
