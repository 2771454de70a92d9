package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/internal/nettest"
	"github.com/sfclab/sfclab/internal/plantest"
	"github.com/sfclab/sfclab/internal/testroot"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
	nsrt "github.com/sfclab/sfclab/runtime/netns"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/firewall"
	"github.com/sfclab/sfclab/vnf/kinds"
)

func requireRoot(t testing.TB) { testroot.Require(t, "deploy tests build real namespaces") }

// testDeployer journals into a temporary directory, so tests never see a user's labs.
func testDeployer(t *testing.T) *Deployer {
	return &Deployer{Journal: journal.Journal{Root: t.TempDir()}, Log: t.Logf}
}

// deploy builds a lab and registers its destruction, checking nothing is left afterwards.
func deploy(t *testing.T, d *Deployer, p *plan.Plan) {
	t.Helper()
	t.Cleanup(func() {
		if err := d.Destroy(context.Background(), p.Lab); err != nil && !errors.Is(err, journal.ErrNotDeployed) {
			t.Errorf("destroy: %v", err)
		}
		assertClean(t, d, p.Lab)
	})
	timing, err := d.Deploy(context.Background(), p, "test")
	if err != nil {
		t.Fatalf("deploy %s: %v", p.Lab, err)
	}
	t.Logf("deployed %s in %s", p.Lab, timing)
}

// assertClean fails if anything of the lab is left: namespaces, journal, cgroups.
func assertClean(t *testing.T, d *Deployer, lab string) {
	t.Helper()
	if ns, _ := (nsrt.Runtime{}).Leftovers(context.Background(), lab); len(ns) > 0 {
		t.Errorf("lab %s left namespaces %v", lab, ns)
	}
	if _, err := os.Stat(d.Journal.Dir(lab)); err == nil {
		t.Errorf("lab %s left its journal %s", lab, d.Journal.Dir(lab))
	}
	if r := cgroup.CpusetRoot(); r != "" {
		if _, err := os.Stat(filepath.Join(r, "labs", lab)); err == nil {
			t.Errorf("lab %s left its cpuset group %s", lab, filepath.Join(r, "labs", lab))
		}
	}
	if _, err := cgroup.Open("labs/" + lab); err == nil {
		t.Errorf("lab %s left its cgroup", lab)
	}
}

func node(t *testing.T, d *Deployer, p *plan.Plan, name string) runtime.Node {
	t.Helper()
	n, err := d.Node(p, name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// iperf3 runs a short TCP test from the chain's source to its target and returns the bit rate
// the receiver saw. It starts a one-off iperf3 server on every destination instance.
func iperf3(t *testing.T, d *Deployer, p *plan.Plan, c *plan.Chain) float64 {
	t.Helper()
	for _, n := range p.Nodes {
		if n.Group == c.To {
			if _, err := node(t, d, p, n.Name).Daemon([]string{"iperf3", "-s", "-1"}, filepath.Join(t.TempDir(), "iperf3.log")); err != nil {
				t.Fatal(err)
			}
		}
	}
	client := node(t, d, p, c.From)
	var out []byte
	var err error
	for try := 0; try < 20; try++ {
		out, err = client.Output(context.Background(), nil, "iperf3", "-c", c.Target.String(), "-t", "1", "-J")
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3 through %s: %v\n%s", c.Name, err, out)
	}
	return receivedBps(t, out)
}

func stats(t *testing.T, p *plan.Plan, nodeName, ifname string) netdev.LinkStats {
	t.Helper()
	return nettest.LinkStats(t, p.Node(nodeName).Netns, ifname)
}

// TestExamplesCarryTraffic deploys every example, pushes iperf3 through its chain and checks
// that the traffic provably crossed every hop: each function's ingress received and its egress
// sent at least as many packets as the transfer needs.
func TestExamplesCarryTraffic(t *testing.T) {
	requireRoot(t)
	for _, ex := range []string{"baseline", "fw", "fw-lb", "chain-6"} {
		t.Run(ex, func(t *testing.T) {
			d := testDeployer(t)
			p := plantest.LoadAs(t, "../examples/"+ex+".yaml", "t-"+ex)
			deploy(t, d, p)
			c := p.Chains[0]
			before := map[string]netdev.LinkStats{}
			for _, n := range p.Nodes {
				if n.Role == plan.RoleFunction {
					before[n.Name+"/in"] = stats(t, p, n.Name, "ingress")
					before[n.Name+"/out"] = stats(t, p, n.Name, "egress")
				}
			}
			assertNoDefaultRoute(t, p)
			bps := iperf3(t, d, p, c)
			t.Logf("%s: iperf3 %.2f Gbit/s through %s", ex, bps/1e9, strings.Join(c.Path, " -> "))
			if bps <= 0 {
				t.Fatalf("no throughput through %s", ex)
			}
			for _, n := range p.Nodes {
				if n.Role != plan.RoleFunction {
					continue
				}
				in := stats(t, p, n.Name, "ingress").RxPackets - before[n.Name+"/in"].RxPackets
				out := stats(t, p, n.Name, "egress").TxPackets - before[n.Name+"/out"].TxPackets
				if in < 1000 || out < 1000 {
					t.Errorf("hop %s: ingress rx +%d, egress tx +%d packets; traffic did not cross it", n.Name, in, out)
				}
			}
		})
	}
}

// TestLoadBalancerSpreads checks that the nft load balancer of lb-3 spreads connections over
// all three backends.
func TestLoadBalancerSpreads(t *testing.T) {
	requireRoot(t)
	d := testDeployer(t)
	p := plantest.LoadAs(t, "../examples/lb-3.yaml", "t-lb-3")
	deploy(t, d, p)
	c := p.Chains[0]
	backends := p.Node("lb").Function.Backends
	before := map[string]uint64{}
	for _, b := range backends {
		nettest.ListenIn(t, node(t, d, p, b.Name), fmt.Sprintf("%s:%d", b.Addr, b.Port))
		before[b.Name] = stats(t, p, b.Name, "eth0").RxPackets
	}
	client := node(t, d, p, "client")
	for i := 0; i < 30; i++ {
		if err := nettest.DialFrom(client, fmt.Sprintf("%s:%d", c.Target, c.Port), time.Second); err != nil {
			t.Fatalf("connection %d through the load balancer: %v", i, err)
		}
	}
	for _, b := range backends {
		got := stats(t, p, b.Name, "eth0").RxPackets - before[b.Name]
		t.Logf("backend %s received %d packets", b.Name, got)
		if got < 3 {
			t.Errorf("backend %s received %d packets from 30 connections; flows are not spread", b.Name, got)
		}
	}
}

// TestFirewallDropsDeniedPort checks the fw example's deny rule really drops (its counter
// rises, the connection times out) while other traffic passes.
func TestFirewallDropsDeniedPort(t *testing.T) {
	requireRoot(t)
	for _, backend := range []string{spec.BackendIptables, spec.BackendNftables} {
		t.Run(backend, func(t *testing.T) {
			d := testDeployer(t)
			p := plantest.LoadAs(t, "../examples/fw.yaml", "t-fw-"+backend[:3], func(lab *spec.Lab) {
				lab.Functions["fw"].Params.(*firewall.FirewallParams).Backend = backend
			})
			deploy(t, d, p)
			nettest.CheckFirewallDrops(t, node(t, d, p, "client"), node(t, d, p, "server"), node(t, d, p, "fw"),
				p.Chains[0].Target.String(), p.Node("fw").Function)
		})
	}
}

// assertNoDefaultRoute checks that no node of the lab has a route out of the lab: no default
// route in any table a node uses.
func assertNoDefaultRoute(t *testing.T, p *plan.Plan) {
	t.Helper()
	for _, n := range p.Nodes {
		ns, err := netdev.OpenNS(n.Netns)
		if err != nil {
			t.Fatal(err)
		}
		for _, table := range []int{0, plan.TableBase} {
			routes, err := ns.Routes(table)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range routes {
				if !r.Dst.IsValid() || r.Dst.Bits() == 0 {
					t.Errorf("node %s has a default route %v", n.Name, r)
				}
			}
		}
		ns.Close()
	}
}

// TestLabsSideBySide deploys four copies of examples/fw-lb.yaml at once (each its own
// namespaces, so the same subnets), checks each carries its chain, destroys them at once and
// checks nothing of any is left.
func TestLabsSideBySide(t *testing.T) {
	requireRoot(t)
	d := testDeployer(t)
	const n = 4
	lab := func(i int) string { return fmt.Sprintf("t-side%d", i) }
	t.Cleanup(func() {
		for i := range n {
			_ = d.Destroy(context.Background(), lab(i))
			assertClean(t, d, lab(i))
		}
	})
	plans := make([]*plan.Plan, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := spec.Load("../examples/fw-lb.yaml", kinds.Spec())
			if err != nil {
				errs[i] = err
				return
			}
			l.Name = lab(i)
			p, release, err := d.Plan(context.Background(), l)
			if err != nil {
				errs[i] = err
				return
			}
			defer release()
			plans[i] = p
			_, errs[i] = d.Deploy(context.Background(), p, "test")
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("deploy %s beside the others: %v", lab(i), err)
		}
	}
	for _, p := range plans {
		c := p.Chains[0]
		dial := fmt.Sprintf("exec 3<>/dev/tcp/%s/%d", c.Target, c.Port)
		if out, err := node(t, d, p, "client").Output(context.Background(), nil, "bash", "-c", dial); err != nil {
			t.Errorf("lab %s: connect to %s:%d through the chain: %v %s", p.Lab, c.Target, c.Port, err, out)
		}
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = d.Destroy(context.Background(), lab(i))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("destroy %s beside the others: %v", lab(i), err)
		}
		assertClean(t, d, lab(i))
	}
}
