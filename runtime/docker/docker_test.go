package docker_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/internal/nettest"
	"github.com/sfclab/sfclab/internal/plantest"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/lb"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	iperf3probe "github.com/sfclab/sfclab/probe/iperf3"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/docker"
	nsrt "github.com/sfclab/sfclab/runtime/netns"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// skipReason is set by TestMain when the tests cannot run here; every test then skips loudly.
var skipReason string

func TestMain(m *testing.M) {
	// This test binary stands in for sfclab inside containers: the docker runtime mounts the
	// running executable at SfclabPath and l4lb impl sfclab starts `sfclab lb --config FILE`.
	if len(os.Args) == 4 && os.Args[1] == "lb" && os.Args[2] == "--config" {
		if err := lb.Main(context.Background(), os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, "sfclab lb:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	switch {
	case os.Geteuid() != 0:
		skipReason = "SKIPPED LOUDLY: docker runtime tests need root (namespaces, iptables)"
	default:
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		if err := (docker.Runtime{}).Reachable(ctx); err != nil {
			skipReason = "SKIPPED LOUDLY: " + err.Error()
		} else {
			// The image build is slow (minutes): once per run, reused when present.
			start := time.Now()
			last := ""
			ref, err := docker.Runtime{}.BuildImage(ctx, docker.BuildOptions{Progress: func(p docker.BuildProgress) {
				if p.Phase != last {
					fmt.Fprintf(os.Stderr, "image build: %s (%s)\n", p.Phase, p.Message)
					last = p.Phase
				}
			}})
			if err != nil {
				fmt.Fprintf(os.Stderr, "build node image: %v\n", err)
				cancel()
				os.Exit(1)
			}
			fmt.Fprintf(os.Stderr, "node image %s ready in %s\n", ref, time.Since(start).Round(time.Second))
		}
		cancel()
	}
	if skipReason != "" {
		fmt.Fprintln(os.Stderr, "\n*** "+skipReason+" ***")
	}
	os.Exit(m.Run())
}

func requireEngine(t testing.TB) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

// deployer journals into a temporary directory and knows both runtimes; the docker runtime
// bind-mounts node directories from that journal.
func deployer(t testing.TB) *deploy.Deployer {
	root := t.TempDir()
	// Squid and Apache run as their own users and must reach the node directory.
	os.Chmod(root, 0o755)
	os.Chmod(filepath.Dir(root), 0o755)
	return &deploy.Deployer{Journal: journal.Journal{Root: root}, Log: t.Logf,
		Runtimes: map[string]runtime.Runtime{"netns": nsrt.Runtime{}, "docker": docker.Runtime{StateRoot: root}}}
}

// loadLab reads a lab file, names the lab for the test and runs it on docker.
func loadLab(t testing.TB, path, name string, edit func(*spec.Lab)) *plan.Plan {
	t.Helper()
	return plantest.LoadAs(t, path, name, func(lab *spec.Lab) {
		lab.Runtime = spec.RuntimeDocker
		if edit != nil {
			edit(lab)
		}
	})
}

// deployLab deploys and registers the lab's destruction, checking nothing is left.
func deployLab(t *testing.T, d *deploy.Deployer, p *plan.Plan) {
	t.Helper()
	t.Cleanup(func() {
		if err := d.Destroy(context.Background(), p.Lab); err != nil && !errors.Is(err, journal.ErrNotDeployed) {
			t.Errorf("destroy: %v", err)
		}
		assertClean(t, p.Lab)
	})
	timing, err := d.Deploy(context.Background(), p, "test")
	if err != nil {
		t.Fatalf("deploy %s: %v", p.Lab, err)
	}
	t.Logf("deployed %s on docker in %s", p.Lab, timing)
}

// assertClean fails if the engine or the host firewall holds anything of the lab.
func assertClean(t *testing.T, lab string) {
	t.Helper()
	left, err := docker.Runtime{}.Leftovers(context.Background(), lab)
	if err != nil {
		t.Errorf("list leftovers of %s: %v", lab, err)
	}
	if len(left) > 0 {
		t.Errorf("lab %s left %v", lab, left)
	}
	out, _ := exec.Command("docker", "ps", "-a", "--filter", "name=sfc."+lab+".", "--format", "{{.Names}}").Output()
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("docker ps -a shows %s", s)
	}
}

func node(t *testing.T, d *deploy.Deployer, p *plan.Plan, name string) *docker.Node {
	t.Helper()
	n, err := d.Node(p, name)
	if err != nil {
		t.Fatal(err)
	}
	return n.(*docker.Node)
}

func linkStats(t *testing.T, n *docker.Node, ifname string) netdev.LinkStats {
	t.Helper()
	ns, err := n.OpenNS()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	s, err := ns.LinkStats(ifname)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// iperf3 starts a one-off iperf3 server on the chain's destination (as a daemon logging to the
// lab's node directory) and runs a TCP test from the source to target:port.
func iperf3(t *testing.T, d *deploy.Deployer, p *plan.Plan, c *plan.Chain, seconds int) (iperf3probe.Result, string) {
	t.Helper()
	server := node(t, d, p, c.To)
	log := filepath.Join(d.Journal.NodeDir(p.Lab), c.To+".iperf3.log")
	pid, err := server.Daemon([]string{"iperf3", "-s", "-1"}, log)
	if err != nil {
		t.Fatal(err)
	}
	assertHostPID(t, server, pid, "iperf3")
	args := []string{"iperf3", "-c", c.Target.String(), "-t", fmt.Sprint(seconds), "-J"}
	if c.Port != 0 {
		args = append(args, "-p", fmt.Sprint(c.Port))
	}
	var out []byte
	for try := 0; try < 20; try++ {
		out, err = node(t, d, p, c.From).Output(context.Background(), nil, args...)
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3 through %s: %v\n%s", c.Name, err, out)
	}
	res, err := iperf3probe.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50 && processAlive(pid); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	logText, _ := os.ReadFile(log)
	return res, string(logText)
}

func processAlive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(data), ") Z ")
}

// assertHostPID checks that a PID Daemon returned is a host PID of the named program running
// in the node's network namespace.
func assertHostPID(t *testing.T, n *docker.Node, pid int, comm string) {
	t.Helper()
	got, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		t.Fatalf("daemon pid %d is not a host process: %v", pid, err)
	}
	if strings.TrimSpace(string(got)) != comm {
		t.Errorf("daemon pid %d runs %q, want %q", pid, strings.TrimSpace(string(got)), comm)
	}
	a, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	b, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", n.PID))
	if a == "" || a != b {
		t.Errorf("daemon pid %d is in netns %s, the container in %s", pid, a, b)
	}
}

// TestFwLBCarriesTraffic deploys examples/fw-lb.yaml on docker (routed), checks that every
// container has the plan's interfaces, addresses and MTU and no default route, pushes iperf3
// through the firewall and HAProxy and checks that both functions' ingress and egress
// counters rose; then it exercises Node: Output with stdin and errors, Run's exit code, CPU
// from the cgroup beside docker stats.
func TestFwLBCarriesTraffic(t *testing.T) {
	requireEngine(t)
	d := deployer(t)
	p := loadLab(t, "../../examples/fw-lb.yaml", "t-dk-fwlb", nil)
	deployLab(t, d, p)

	for _, pn := range p.Nodes {
		n := node(t, d, p, pn.Name)
		ns, err := n.OpenNS()
		if err != nil {
			t.Fatal(err)
		}
		links, err := ns.Links()
		if err != nil {
			t.Fatal(err)
		}
		routes, err := ns.Routes(0)
		ns.Close()
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]netdev.LinkInfo{}
		for _, l := range links {
			byName[l.Name] = l
		}
		for _, i := range pn.Interfaces {
			l, ok := byName[i.Name]
			switch {
			case !ok:
				t.Errorf("node %s has no interface %s: %+v", pn.Name, i.Name, links)
			case len(l.Addrs) != 1 || l.Addrs[0] != i.Address:
				t.Errorf("node %s %s has %v, plan %s", pn.Name, i.Name, l.Addrs, i.Address)
			case l.MTU != 1500 || !l.Up:
				t.Errorf("node %s %s: mtu %d up %v", pn.Name, i.Name, l.MTU, l.Up)
			}
		}
		for _, r := range routes {
			if r.Dst.Bits() == 0 {
				t.Errorf("node %s keeps a default route: %s", pn.Name, r)
			}
		}
	}

	c := p.Chains[0]
	before := map[string]netdev.LinkStats{}
	for _, pn := range p.Nodes {
		if pn.Role == plan.RoleFunction {
			n := node(t, d, p, pn.Name)
			before[pn.Name+"/in"] = linkStats(t, n, pn.Function.Ingress)
			before[pn.Name+"/out"] = linkStats(t, n, pn.Function.Egress)
		}
	}
	lbCPU, err := node(t, d, p, "lb").CPU()
	if err != nil {
		t.Fatal(err)
	}
	iperfStart := time.Now()
	res, _ := iperf3(t, d, p, c, 2)
	iperfWall := time.Since(iperfStart)
	bps := res.ReceivedBPS
	t.Logf("fw-lb on docker: iperf3 %.2f Gbit/s through %s", bps/1e9, strings.Join(c.Path, " -> "))
	if bps <= 0 {
		t.Fatal("no throughput through fw-lb")
	}
	for _, pn := range p.Nodes {
		if pn.Role != plan.RoleFunction {
			continue
		}
		n := node(t, d, p, pn.Name)
		in := linkStats(t, n, pn.Function.Ingress).RxPackets - before[pn.Name+"/in"].RxPackets
		out := linkStats(t, n, pn.Function.Egress).TxPackets - before[pn.Name+"/out"].TxPackets
		t.Logf("hop %s: ingress rx +%d, egress tx +%d packets", pn.Name, in, out)
		if in < 1000 || out < 1000 {
			t.Errorf("hop %s: ingress rx +%d, egress tx +%d packets; traffic did not cross it", pn.Name, in, out)
		}
	}
	lbAfter, err := node(t, d, p, "lb").CPU()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("lb (HAProxy) cpu during iperf3: %s", lbAfter.Total()-lbCPU.Total())
	if lbAfter.Total() <= lbCPU.Total() {
		t.Errorf("lb cgroup cpu did not rise: %v -> %v", lbCPU, lbAfter)
	}
	// HAProxy forwarding a 2 s stream is busy, but a cgroup cannot use more than every core
	// of the host for the wall time that passed: more would be counting someone else's CPU.
	if used, most := lbAfter.Total()-lbCPU.Total(), iperfWall*time.Duration(goruntime.NumCPU()); used > most {
		t.Errorf("lb cgroup used %s of CPU in %s of wall time on %d cores (at most %s)", used, iperfWall.Round(time.Millisecond), goruntime.NumCPU(), most)
	} else if used < 50*time.Millisecond {
		t.Errorf("lb cgroup used only %s of CPU forwarding %.2f Gbit/s for 2 s: its CPU is not in its cgroup", used, bps/1e9)
	}

	t.Run("output", func(t *testing.T) {
		n := node(t, d, p, "client")
		out, err := n.Output(context.Background(), []byte("rules on stdin\n"), "cat")
		if err != nil || string(out) != "rules on stdin\n" {
			t.Errorf("cat with stdin: %q, %v", out, err)
		}
		out, err = n.Output(context.Background(), nil, "sh", "-c", "echo out; echo oops >&2; exit 3")
		var ee *docker.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(err.Error(), "oops") || string(out) != "out\n" {
			t.Errorf("failing command: out %q, err %v", out, err)
		}
		if _, err := n.Output(context.Background(), nil, "no-such-program"); err == nil || !strings.Contains(err.Error(), "executable file not found") {
			t.Errorf("missing program: %v", err)
		}
		// In lb's container: the engine holds the next exec in a container until such a child
		// has ended (2.5 s here), and the steps below and the next subtests exec in client and
		// server.
		start := time.Now()
		out, err = node(t, d, p, "lb").Output(context.Background(), nil, "sh", "-c", "sleep 4 & echo left a child")
		if err != nil || string(out) != "left a child\n" || time.Since(start) > 3*time.Second {
			t.Errorf("command leaving a child on stdout: %q, %v after %s", out, err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start = time.Now()
		if _, err := n.Output(ctx, nil, "sleep", "30"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("cancelled sleep: %v", err)
		}
		if time.Since(start) > 3*time.Second {
			t.Errorf("cancelled Output took %s", time.Since(start))
		}
		if out, _ := n.Output(context.Background(), nil, "sh", "-c", "ps -eo args | grep -c '^sleep [i3]' || true"); strings.TrimSpace(string(out)) != "1" {
			t.Errorf("the cancelled sleep still runs: %s sleeps (want only the container's own)", out)
		}
	})
	t.Run("run", func(t *testing.T) {
		var stdout strings.Builder
		cmd := exec.Command("sh", "-c", "read x; echo got $x; exit 7")
		cmd.Stdin = strings.NewReader("hello\n")
		cmd.Stdout = &stdout
		err := node(t, d, p, "server").Run(cmd)
		var ee interface{ ExitCode() int }
		if !errors.As(err, &ee) || ee.ExitCode() != 7 {
			t.Errorf("run: err %v, want exit code 7", err)
		}
		if stdout.String() != "got hello\n" {
			t.Errorf("run: stdout %q", stdout.String())
		}
	})
	t.Run("cpu", func(t *testing.T) {
		n := node(t, d, p, "client")
		log := filepath.Join(d.Journal.NodeDir(p.Lab), "client.stress.log")
		c0, err := n.CPU()
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		if _, err := n.Daemon([]string{"stress-ng", "--cpu", "1", "--timeout", "3"}, log); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		// The engine answers a stats request at its collector's next round (every second on
		// Docker 20.10, also one-shot ones): every request below goes at once, so they wait
		// for the same rounds instead of one or two each (7.7 s one after the other).
		server := node(t, d, p, "server")
		nodes := make([]*docker.Node, len(p.Nodes))
		for i, pn := range p.Nodes {
			nodes[i] = node(t, d, p, pn.Name)
		}
		var pct, pct2 float64
		var err2 error
		engine := make([]cgroup.EngineStats, len(nodes))
		engineErr := make([]error, len(nodes))
		var wg sync.WaitGroup
		wg.Go(func() { pct, err = n.StatsCPUPercent(context.Background()) })
		wg.Go(func() { pct2, err2 = server.StatsCPUPercent(context.Background()) })
		for i, pn := range nodes {
			wg.Go(func() { engine[i], engineErr[i] = pn.EngineCPU(context.Background()) })
		}
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		c1, err := n.CPU()
		if err != nil {
			t.Fatal(err)
		}
		cg := float64(c1.Total()-c0.Total()) / float64(time.Since(t0)) * 100
		t.Logf("one busy CPU: docker stats %.1f %%, cgroup %.1f %% (user %s, system %s)", pct, cg, c1.User-c0.User, c1.System-c0.System)
		// Both figures are the share of a core the busy thread got: 96-99 % on an idle host,
		// but 55-67 % beside two busy processes on the 2-core development host (stress-ng
		// --cpu 2, 2026-11-27; a floor of 50 % was 4.6 points from failing with the load, not
		// with the code). They come from two sources (the engine's stats API over 1 s, the
		// cgroup's counters since the start) and agreed within 10 % in every run seen
		// (98.4/97.1, 98.6/95.7, 66.9/67.3, 59.1/54.6): the check is their agreement within
		// 0.7-1.4, which fails a percent of all cores (x0.5 here), a fraction for a percent
		// (x0.01) or another container's CPU. Each alone: at most 150 % for one thread (a
		// figure doubled is 200 %), at least 20 % (a busy thread gets less only beside 9 others
		// on 2 cores).
		if pct < 20 || pct > 150 {
			t.Errorf("docker stats says %.1f %% for one busy CPU", pct)
		}
		if cg < 20 || cg > 150 {
			t.Errorf("cgroup says %.1f %% for one busy CPU", cg)
		}
		if r := pct / cg; r < 0.7 || r > 1.4 {
			t.Errorf("docker stats says %.1f %%, the cgroup %.1f %% for one busy CPU: %.2f times, want the same within 0.7-1.4", pct, cg, r)
		}
		// Every container, functions included, must have engine stats: renaming its
		// interfaces once left function containers with none (0 %, no PIDs).
		for i, pn := range p.Nodes {
			if st, err := engine[i], engineErr[i]; err != nil || st.Read.IsZero() || st.CPU == 0 {
				t.Errorf("docker stats of %s: %+v, %v; want a sample", pn.Name, st, err)
			}
		}
		if err2 != nil || pct2 > 20 {
			t.Errorf("idle server: docker stats %.1f %%, %v", pct2, err2)
		}
	})
	t.Run("leftovers", func(t *testing.T) {
		left, err := docker.Runtime{}.Leftovers(context.Background(), p.Lab)
		if err != nil {
			t.Fatal(err)
		}
		var cs, ns int
		for _, l := range left {
			switch {
			case strings.HasPrefix(l, "container "):
				cs++
			case strings.HasPrefix(l, "network "):
				ns++
			}
		}
		if cs != len(p.Nodes) || ns != len(p.Segments) {
			t.Errorf("leftovers %v: want %d containers and %d networks", left, len(p.Nodes), len(p.Segments))
		}
		labs, err := docker.Runtime{StateRoot: d.Journal.Root}.Labs(context.Background())
		if err != nil || !contains(labs, p.Lab) {
			t.Errorf("labs %v, %v: want %s", labs, err, p.Lab)
		}
		// Another journal's destroy --all does not see this lab.
		other, err := docker.Runtime{StateRoot: t.TempDir()}.Labs(context.Background())
		if err != nil || contains(other, p.Lab) {
			t.Errorf("labs of another journal root %v, %v: must not hold %s", other, err, p.Lab)
		}
	})
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestFirewallDropsDeniedPort checks on docker that the fw example's deny rule drops port 9999
// (its counter rises, the connection times out) while port 8080 passes.
func TestFirewallDropsDeniedPort(t *testing.T) {
	requireEngine(t)
	d := deployer(t)
	p := loadLab(t, "../../examples/fw.yaml", "t-dk-fw", nil)
	deployLab(t, d, p)
	nettest.CheckFirewallDrops(t, node(t, d, p, "client"), node(t, d, p, "server"), node(t, d, p, "fw"),
		p.Chains[0].Target.String(), p.Node("fw").Function)
}

// TestNATPublishedPort deploys client -> server with attach nat: the server's port 5201 is
// published on the host address of their network and iperf3 goes to that address. The
// kernel's DNAT must carry it, as it carries an external client's connection to a published
// port: sfclab's nat PREROUTING rule counts the connection, the server sees the client's own
// address (not the gateway, as through the userland proxy), docker-proxy reads and writes no
// byte, and destroy leaves no "sfclab lab=" rule in the host's tables.
func TestNATPublishedPort(t *testing.T) {
	requireEngine(t)
	d := deployer(t)
	p := plantest.Decode(t, `name: t-dk-nat
runtime: docker
docker: {attach: nat}
endpoints: {client: {kind: client}, server: {kind: server}}
chains:
  - name: direct
    from: client
    to: server
    classifier: {protocol: tcp, destination_port: 5201}
`)
	if len(p.Publish) != 1 {
		t.Fatalf("plan publishes %v", p.Publish)
	}
	pub := p.Publish[0]
	t.Cleanup(func() {
		// Registered before deployLab's cleanup, so it runs after the destroy.
		if lines := taggedHostRules(t, p.Lab); len(lines) > 0 {
			t.Errorf("destroy left host rules:\n%s", strings.Join(lines, "\n"))
		}
	})
	deployLab(t, d, p)
	c := p.Chains[0]
	if c.Target != pub.HostIP {
		t.Fatalf("chain target %s, published at %s", c.Target, pub.HostIP)
	}
	for _, name := range []string{"client", "server"} {
		ns, err := node(t, d, p, name).OpenNS()
		if err != nil {
			t.Fatal(err)
		}
		routes, err := ns.Routes(0)
		ns.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range routes {
			if r.Dst.Bits() == 0 {
				t.Errorf("node %s keeps a default route on a non-internal network: %s", name, r)
			}
		}
	}
	proxy := dockerProxy(pub.HostIP.String(), pub.HostPort)
	io0 := procIO(t, proxy)
	res, serverLog := iperf3(t, d, p, c, 1)
	io1 := procIO(t, proxy)
	bps := res.ReceivedBPS
	if bps <= 0 {
		t.Fatal("no throughput through the published port")
	}
	client := p.Node("client").Interfaces[0].Address.Addr()
	if !strings.Contains(serverLog, "Accepted connection from "+client.String()) {
		t.Errorf("server did not see the client's own address %s: the userland proxy carried it?\n%s", client, serverLog)
	}
	if proxy.pid != 0 && io1-io0 > 4096 {
		t.Errorf("docker-proxy (pid %d) read and wrote %d bytes during the test: it carried the traffic", proxy.pid, io1-io0)
	}
	var dnat []string
	for _, l := range taggedHostRules(t, p.Lab) {
		if strings.Contains(l, "-A PREROUTING") && strings.Contains(l, "DNAT") && !strings.HasPrefix(l, "[0:") {
			dnat = append(dnat, l)
		}
	}
	if len(dnat) != 1 {
		t.Errorf("sfclab's DNAT rule counted no packet (or is not there): %q", taggedHostRules(t, p.Lab))
	}
	t.Logf("nat: iperf3 %.2f Gbit/s to %s:%d, carried by the kernel's DNAT (%s); server saw %s; docker-proxy %q moved %d bytes",
		bps/1e9, pub.HostIP, pub.HostPort, strings.Join(dnat, ""), client, proxy.cmd, io1-io0)
}

// taggedHostRules returns the lines of iptables-save -c (every table, with counters) that
// carry the lab's comment.
func taggedHostRules(t *testing.T, lab string) []string {
	t.Helper()
	out, err := exec.Command("iptables-save", "-c").Output()
	if err != nil {
		t.Fatalf("iptables-save: %v", err)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, `"sfclab lab=`+lab+`"`) {
			lines = append(lines, l)
		}
	}
	return lines
}

// userlandProxy is the engine's userland proxy process for a published port.
type userlandProxy struct {
	pid int
	cmd string
}

// dockerProxy finds the engine's userland proxy for a published port (pid 0 when none runs).
func dockerProxy(hostIP string, port uint16) userlandProxy {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(strings.TrimRight(string(data), "\x00"), "\x00", " ")
		if strings.Contains(cmd, "docker-proxy") && strings.Contains(cmd, "-host-ip "+hostIP) && strings.Contains(cmd, fmt.Sprintf("-host-port %d", port)) {
			pid, _ := strconv.Atoi(e.Name())
			return userlandProxy{pid, cmd}
		}
	}
	return userlandProxy{}
}

// procIO is how many bytes a process has read and written so far (rchar + wchar of
// /proc/PID/io); 0 for no process.
func procIO(t *testing.T, p userlandProxy) int64 {
	t.Helper()
	if p.pid == 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", p.pid))
	if err != nil {
		t.Fatalf("read docker-proxy's io: %v", err)
	}
	var sum int64
	for _, l := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(l, ": ")
		if k == "rchar" || k == "wchar" {
			n, _ := strconv.ParseInt(v, 10, 64)
			sum += n
		}
	}
	return sum
}

// TestOrphanRulesFound leaves a tagged nat rule whose bridge is gone, as a crash between the
// removal of a lab's networks and of its rules would: the runtime's Labs (what destroy --all
// asks) still lists the lab, with no journal, container or network of it, and Destroy
// removes the rule.
func TestOrphanRulesFound(t *testing.T) {
	requireEngine(t)
	const lab = "t-dk-orphan"
	rule := []string{"PREROUTING", "-i", "br-0rphan00000", "-d", "198.18.0.254/32", "-p", "tcp", "-m", "tcp", "--dport", "5201",
		"-m", "comment", "--comment", "sfclab lab=" + lab, "-j", "DNAT", "--to-destination", "198.18.0.2:5201"}
	if out, err := exec.Command("iptables", append([]string{"-w", "-t", "nat", "-I"}, rule...)...).CombinedOutput(); err != nil {
		t.Fatalf("insert orphan rule: %v: %s", err, out)
	}
	t.Cleanup(func() {
		for len(taggedHostRules(t, lab)) > 0 {
			if exec.Command("iptables", append([]string{"-w", "-t", "nat", "-D"}, rule...)...).Run() != nil {
				break
			}
		}
	})
	rt := docker.Runtime{StateRoot: t.TempDir()}
	labs, err := rt.Labs(context.Background())
	if err != nil || !slices.Contains(labs, lab) {
		t.Errorf("Labs = %v, %v; want %s among them", labs, err, lab)
	}
	if left, _ := rt.Leftovers(context.Background(), lab); len(left) != 1 {
		t.Errorf("Leftovers = %q, want the nat rule", left)
	}
	if err := rt.Destroy(context.Background(), lab); err != nil {
		t.Errorf("destroy: %v", err)
	}
	if left := taggedHostRules(t, lab); len(left) > 0 {
		t.Errorf("orphan rule left: %q", left)
	}
}

// TestCancelUnwinds cancels a deploy (Ctrl-C) while a custom function's setup runs: deploy
// unwinds, and Destroy afterwards finds nothing; no container and no network is left.
func TestCancelUnwinds(t *testing.T) {
	requireEngine(t)
	d := deployer(t)
	p := plantest.Decode(t, `name: t-dk-cancel
runtime: docker
endpoints: {client: {}, server: {}}
functions:
  slow: {kind: custom, params: {setup: ["sleep 27.5"]}}
chains: [{from: client, to: server, hops: [slow]}]
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if findProcess("sleep", "27.5") {
				time.Sleep(200 * time.Millisecond)
				cancel()
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	start := time.Now()
	_, err := d.Deploy(ctx, p, "test")
	if err == nil {
		d.Destroy(context.Background(), p.Lab)
		t.Fatal("cancelled deploy succeeded")
	}
	t.Logf("cancelled deploy returned after %s: %v", time.Since(start).Round(time.Millisecond), err)
	if !strings.Contains(err.Error(), context.Canceled.Error()) { // function kinds format errors with %v
		t.Errorf("error does not say it was cancelled: %v", err)
	}
	if err := d.Destroy(context.Background(), p.Lab); err != nil && !errors.Is(err, journal.ErrNotDeployed) {
		t.Errorf("destroy after cancel: %v", err)
	}
	assertClean(t, p.Lab)
	if findProcess("sleep", "27.5") {
		t.Error("the setup command still runs")
	}
}

// findProcess reports whether a host process runs argv exactly.
func findProcess(argv ...string) bool {
	want := strings.Join(argv, "\x00") + "\x00"
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && string(data) == want {
			return true
		}
	}
	return false
}

// TestForeignNameClash puts a container and a network sfclab did not create on the names a
// lab needs: the deploy is refused before anything is created, and both stay untouched.
func TestForeignNameClash(t *testing.T) {
	requireEngine(t)
	ctx := context.Background()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	p := loadLab(t, "../../examples/baseline.yaml", "t-dk-clash", nil)
	cname := docker.ContainerName(p.Lab, "client")
	res, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: cname,
		Config: &container.Config{Image: docker.DefaultImage(), Cmd: []string{"true"}, Labels: map[string]string{"owner": "someone-else"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.ContainerRemove(ctx, res.ID, client.ContainerRemoveOptions{Force: true}) })
	nname := docker.NetworkName(p.Lab, p.Segments[0].Name)
	nres, err := cli.NetworkCreate(ctx, nname, client.NetworkCreateOptions{Driver: "bridge", Internal: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.NetworkRemove(ctx, nres.ID, client.NetworkRemoveOptions{}) })

	d := deployer(t)
	_, err = d.Deploy(ctx, p, "test")
	if err == nil {
		d.Destroy(ctx, p.Lab)
		t.Fatal("deploy over a foreign container succeeded")
	}
	t.Logf("refused: %v", err)
	if !errors.Is(err, docker.ErrNameClash) || !strings.Contains(err.Error(), cname) || !strings.Contains(err.Error(), nname) {
		t.Errorf("error does not name the clash: %v", err)
	}
	if err := d.Destroy(ctx, p.Lab); err != nil && !errors.Is(err, journal.ErrNotDeployed) {
		t.Errorf("destroy: %v", err)
	}
	if _, err := cli.ContainerInspect(ctx, res.ID, client.ContainerInspectOptions{}); err != nil {
		t.Errorf("the foreign container is gone: %v", err)
	}
	if _, err := cli.NetworkInspect(ctx, nres.ID, client.NetworkInspectOptions{}); err != nil {
		t.Errorf("the foreign network is gone: %v", err)
	}
	if _, err := os.Stat(d.Journal.Dir(p.Lab)); err == nil {
		t.Error("the refused deploy left a journal")
	}
}

// TestOwnImage runs a lab on an image of the user's (here: sfclab's, committed with haproxy
// removed, an entrypoint that exits and a non-root user): the entrypoint and user are
// overridden, a lab that needs no haproxy runs, one that needs it is refused before any
// function starts, naming the missing program.
func TestOwnImage(t *testing.T) {
	requireEngine(t)
	ctx := context.Background()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	const ref = "sfclab-test/own:nohaproxy"
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: &container.Config{
		Image: docker.DefaultImage(), Cmd: []string{"rm", "-f", "/usr/sbin/haproxy"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
	if _, err := cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	w := cli.ContainerWait(ctx, c.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case <-w.Result:
	case err := <-w.Error:
		t.Fatal(err)
	}
	if _, err := cli.ContainerCommit(ctx, c.ID, client.ContainerCommitOptions{Reference: ref,
		Changes: []string{`ENTRYPOINT ["/bin/false"]`, "USER nobody"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.ImageRemove(ctx, ref, client.ImageRemoveOptions{Force: true}) })

	own := func(l *spec.Lab) { l.Docker.Image = ref }
	d := deployer(t)
	p := loadLab(t, "../../examples/fw.yaml", "t-dk-own", own)
	deployLab(t, d, p)
	server, client := node(t, d, p, "server"), node(t, d, p, "client")
	target := p.Chains[0].Target.String()
	nettest.ListenIn(t, server, target+":8080")
	if err := nettest.DialFrom(client, target+":8080", 2*time.Second); err != nil {
		t.Fatalf("through the firewall on the own image: %v", err)
	}
	if out, err := server.Output(ctx, nil, "id", "-u"); err != nil || strings.TrimSpace(string(out)) != "0" {
		t.Errorf("exec user: %q %v", out, err)
	}

	// Beside the first lab: the engine refuses overlapping subnets, so another pool.
	p2 := loadLab(t, "../../examples/fw-lb.yaml", "t-dk-own2", func(l *spec.Lab) { own(l); l.Addressing.Pool = "198.19.0.0/16" })
	_, err = d.Deploy(ctx, p2, "test")
	if err == nil {
		d.Destroy(ctx, p2.Lab)
		t.Fatal("fw-lb deployed on an image without haproxy")
	}
	t.Logf("refused: %v", err)
	if !strings.Contains(err.Error(), "haproxy (needed by lb)") {
		t.Errorf("error does not name the missing program: %v", err)
	}
	assertClean(t, p2.Lab)
}

// TestLabsSideBySide deploys four copies of examples/fw-lb.yaml at once, all from the default
// pool: each is planned around the subnets the others hold (deploy.Deployer.Plan), so all four
// come up on disjoint subnets and carry traffic; then they are destroyed at once and nothing of
// any is left.
func TestLabsSideBySide(t *testing.T) {
	requireEngine(t)
	d := deployer(t)
	const n = 4
	lab := func(i int) string { return fmt.Sprintf("t-dk-side%d", i) }
	t.Cleanup(func() {
		for i := range n {
			_ = d.Destroy(context.Background(), lab(i))
			assertClean(t, lab(i))
		}
	})
	plans := make([]*plan.Plan, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := spec.Load("../../examples/fw-lb.yaml", kinds.Spec())
			if err != nil {
				errs[i] = err
				return
			}
			l.Name, l.Runtime = lab(i), spec.RuntimeDocker
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
	seen := map[netip.Prefix]string{}
	for _, p := range plans {
		for _, s := range p.Segments {
			for q, owner := range seen {
				if q.Overlaps(s.Subnet) {
					t.Errorf("segment %s of %s (%s) overlaps %s of %s", s.Name, p.Lab, s.Subnet, q, owner)
				}
			}
			seen[s.Subnet] = p.Lab
		}
		// Every copy carries its chain: the client connects through the firewall to the
		// balancer's port.
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
		assertClean(t, lab(i))
	}
}
