package deploy

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"time"

	"github.com/sfclab/sfclab/internal/labgen"
	"github.com/sfclab/sfclab/internal/nettest"
	"github.com/sfclab/sfclab/internal/plantest"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	nsrt "github.com/sfclab/sfclab/runtime/netns"
)

// A setup that fails midway unwinds everything created before it.
func TestFailureMidwayUnwinds(t *testing.T) {
	requireRoot(t)
	d := testDeployer(t)
	p := plantest.Decode(t, `name: t-fail
endpoints: {client: {}, server: {run: ["sleep 30"]}}
functions:
  ok: {kind: forwarder}
  bad: {kind: custom, params: {setup: ["echo going down >&2; false"]}}
chains: [{from: client, to: server, hops: [ok, bad]}]
`)
	_, err := d.Deploy(context.Background(), p, "test")
	if err == nil {
		d.Destroy(context.Background(), p.Lab)
		t.Fatal("deploy with a failing setup succeeded")
	}
	if !strings.Contains(err.Error(), "going down") {
		t.Errorf("error does not carry the command's stderr: %v", err)
	}
	assertClean(t, d, p.Lab)
}

// Cancelling the context (Ctrl-C) during a deploy unwinds it.
func TestCancelUnwinds(t *testing.T) {
	requireRoot(t)
	d := testDeployer(t)
	p := plantest.Decode(t, `name: t-cancel
endpoints: {client: {}, server: {}}
functions:
  slow: {kind: custom, params: {setup: ["sleep 20"]}}
chains: [{from: client, to: server, hops: [slow]}]
`)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := d.Deploy(ctx, p, "test")
	if err == nil {
		d.Destroy(context.Background(), p.Lab)
		t.Fatal("cancelled deploy succeeded")
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("cancelled deploy took %s to return", time.Since(start))
	}
	assertClean(t, d, p.Lab)
}

// Deploying a name that exists is refused and leaves the first lab intact; another name
// deploys beside it.
func TestNameClashAndSideBySide(t *testing.T) {
	requireRoot(t)
	d := testDeployer(t)
	p := plantest.LoadAs(t, "../examples/baseline.yaml", "t-clash")
	deploy(t, d, p)
	if _, err := d.Deploy(context.Background(), p, "again"); !errors.Is(err, journal.ErrExists) {
		t.Fatalf("second deploy of the same name: err = %v, want journal.ErrExists", err)
	}
	// The first lab still works.
	if bps := iperf3(t, d, p, p.Chains[0]); bps <= 0 {
		t.Fatal("first lab broken by the refused deploy")
	}
	other := plantest.LoadAs(t, "../examples/baseline.yaml", "t-beside")
	deploy(t, d, other)
	if bps := iperf3(t, d, other, other.Chains[0]); bps <= 0 {
		t.Fatal("second lab carries no traffic")
	}
}

// Destroy is idempotent; a lab that is not there is journal.ErrNotDeployed, and changes nothing.
func TestDestroyTwice(t *testing.T) {
	requireRoot(t)
	d := testDeployer(t)
	p := plantest.LoadAs(t, "../examples/fw.yaml", "t-twice")
	if _, err := d.Deploy(context.Background(), p, "test"); err != nil {
		t.Fatal(err)
	}
	if err := d.Destroy(context.Background(), p.Lab); err != nil {
		t.Fatal(err)
	}
	if err := d.Destroy(context.Background(), p.Lab); !errors.Is(err, journal.ErrNotDeployed) {
		t.Fatalf("second destroy: err = %v, want journal.ErrNotDeployed", err)
	}
	assertClean(t, d, p.Lab)
}

// A missing program is reported before anything is created, with the package to install.
func TestMissingProgram(t *testing.T) {
	requireRoot(t)
	d := testDeployer(t)
	p := plantest.LoadAs(t, "../examples/fw-lb.yaml", "t-missing")
	t.Setenv("PATH", t.TempDir())
	_, err := d.Deploy(context.Background(), p, "test")
	if err == nil || !strings.Contains(err.Error(), "haproxy") || !strings.Contains(err.Error(), "apt-get install") {
		t.Fatalf("err = %v, want haproxy missing with an install hint", err)
	}
	if _, err := os.Stat(d.Journal.Dir(p.Lab)); err == nil {
		t.Error("journal created although preflight failed")
	}
	assertClean(t, d, p.Lab)
}

// Processes a lab starts run in their node's cgroup and die with the lab.
func TestRunInCgroupAndDie(t *testing.T) {
	requireRoot(t)
	d := testDeployer(t)
	p := plantest.Decode(t, `name: t-run
endpoints: {client: {}, server: {run: ["sleep 30"]}}
chains: [{from: client, to: server}]
`)
	deploy(t, d, p)
	n := node(t, d, p, "server").(*nsrt.Node)
	pids, err := n.Cgroup.Procs()
	if err != nil || len(pids) != 1 {
		t.Fatalf("server cgroup procs = %v, %v; want the one sleep", pids, err)
	}
	comm, _ := os.ReadFile("/proc/" + itoa(pids[0]) + "/comm")
	if strings.TrimSpace(string(comm)) != "sleep" {
		t.Errorf("process in the cgroup is %q, want sleep", comm)
	}
	if err := d.Destroy(context.Background(), p.Lab); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/proc/" + itoa(pids[0])); err == nil {
		t.Errorf("process %d survived destroy", pids[0])
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// The nat kind on its own: destination NAT of a port to the chain's destination and
// masquerade, for both backends; the server sees the NAT's egress address as the source.
func TestNATForwardsAndMasquerades(t *testing.T) {
	requireRoot(t)
	for _, backend := range []string{"nftables", "iptables"} {
		t.Run(backend, func(t *testing.T) {
			d := testDeployer(t)
			p := plantest.Decode(t, `name: t-nat-`+backend[:3]+`
endpoints: {client: {}, server: {}}
functions:
  n: {kind: nat, params: {backend: `+backend+`, masquerade: true, dnat: [{protocol: tcp, port: 8080, to: server, to_port: 5201}]}}
chains: [{from: client, to: server, hops: [n]}]
`)
			deploy(t, d, p)
			server := node(t, d, p, "server")
			srvAddr := p.Chains[0].Target.String()
			var l net.Listener
			if err := server.Do(func() (err error) { l, err = net.Listen("tcp", srvAddr+":5201"); return err }); err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			peer := make(chan string, 1)
			go func() {
				c, err := l.Accept()
				if err != nil {
					peer <- err.Error()
					return
				}
				peer <- c.RemoteAddr().String()
				c.Close()
			}()
			natIn := p.Node("n").Function.IngressAddr
			if err := nettest.DialFrom(node(t, d, p, "client"), natIn.String()+":8080", 2*time.Second); err != nil {
				t.Fatalf("connect to the NAT's port 8080: %v", err)
			}
			select {
			case got := <-peer:
				want := p.Node("n").Function.EgressAddr.String() + ":"
				if !strings.HasPrefix(got, want) {
					t.Errorf("server saw the connection from %s, want the NAT's egress %s (masquerade)", got, want)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("server never accepted the DNATed connection")
			}
		})
	}
}

// Cancelling (Ctrl-C) a 1,000-node deploy midway unwinds all of it.
func TestCancelBigUnwinds(t *testing.T) {
	requireRoot(t)
	d := testDeployer(t)
	p := plantest.Decode(t, labgen.Big("t-c1k", 5, 190, 8))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Cancel once a good part of the namespaces exist.
		for ctx.Err() == nil {
			if ns, _ := netdev.ListNetns(plan.NetnsName(p.Lab, "")); len(ns) >= 300 {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	_, err := d.Deploy(ctx, p, "test")
	if err == nil {
		d.Destroy(context.Background(), p.Lab)
		t.Skip("SKIPPED LOUDLY: the 1,000-node deploy finished before it could be cancelled")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled deploy: %v, want context.Canceled", err)
	}
	assertClean(t, d, p.Lab)
}
