package kubernetes_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	iperf3probe "github.com/sfclab/sfclab/probe/iperf3"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/docker"
	"github.com/sfclab/sfclab/runtime/kubernetes"
	nsrt "github.com/sfclab/sfclab/runtime/netns"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// The runtime hands segment wiring, and everything else that goes into the pods'
// namespaces, to its agent: deploy must see it as RemoteNodes (a SegmentWirer too).
var _ deploy.RemoteNodes = kubernetes.Runtime{}

// The cluster tests run against the single-node cluster of scripts/kubecluster, started here
// and stopped (with everything it created) when the package's tests end. Deploying tests
// measure nothing but share the host: run them under the suite lock when run by hand,
//
//	flock /tmp/sfclab-suite.lock go test -count=1 ./runtime/kubernetes/
var (
	skipReason string
	kubeconfig string
)

const scripts = "../../scripts/kubecluster"

func TestMain(m *testing.M) {
	runCLIChild()
	code := func() int {
		if os.Geteuid() != 0 {
			skipReason = "SKIPPED LOUDLY: the kubernetes runtime tests start a cluster and need root"
			return m.Run()
		}
		// kubectl (the agent's requests, `sfclab exec`): the cluster's own first.
		os.Setenv("PATH", "/var/cache/sfclab-kube/bin:"+os.Getenv("PATH"))
		state := "/var/lib/sfclab-kube"
		kubeconfig = filepath.Join(state, "admin.kubeconfig")
		if err := startCluster(); err != nil {
			fmt.Fprintln(os.Stderr, "start the test cluster:", err)
			stopCluster()
			return 1
		}
		defer stopCluster()
		return m.Run()
	}()
	if skipReason != "" {
		fmt.Fprintln(os.Stderr, "\n*** "+skipReason+" ***")
	}
	os.Exit(code)
}

// startCluster builds the binaries (the Go build cache makes it quick after `make deps`),
// exports sfclab's node image from Docker (built when missing) and starts the cluster with
// the image imported.
func startCluster() error {
	t0 := time.Now()
	if out, err := exec.Command(scripts + "/build.sh").CombinedOutput(); err != nil {
		return fmt.Errorf("build.sh: %w: %s", err, out)
	}
	fmt.Fprintf(os.Stderr, "kubernetes binaries ready in %s\n", time.Since(t0).Round(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ref, err := docker.Runtime{}.BuildImage(ctx, docker.BuildOptions{})
	if err != nil {
		return fmt.Errorf("build node image: %w", err)
	}
	dir, err := os.MkdirTemp("", "sfclab-kube-image")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	archive := filepath.Join(dir, "node.tar")
	if out, err := exec.Command("docker", "save", "-o", archive, ref).CombinedOutput(); err != nil {
		return fmt.Errorf("docker save %s: %w: %s", ref, err, out)
	}
	t1 := time.Now()
	cmd := exec.Command(scripts + "/start.sh")
	cmd.Env = append(os.Environ(), "KUBE_IMPORT="+archive)
	out, err := cmd.CombinedOutput()
	fmt.Fprintf(os.Stderr, "%s", out)
	if err != nil {
		return fmt.Errorf("start.sh: %w", err)
	}
	fmt.Fprintf(os.Stderr, "cluster started (image imported) in %s\n", time.Since(t1).Round(100*time.Millisecond))
	return nil
}

func stopCluster() {
	out, err := exec.Command(scripts + "/stop.sh").CombinedOutput()
	fmt.Fprintf(os.Stderr, "%s", out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stop.sh:", err)
	}
}

func requireCluster(t testing.TB) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

// podReadableDir is a temporary directory for a journal that the pods can read (they mount
// their lab's node directory from it): it and its parent are world-readable.
func podReadableDir(t testing.TB) string {
	root := t.TempDir()
	os.Chmod(root, 0o755)
	os.Chmod(filepath.Dir(root), 0o755)
	return root
}

// stateDir makes a podReadableDir sfclab's state directory (SFCLAB_STATE_DIR) for the rest of
// the test: the command line journals there.
func stateDir(t *testing.T) string {
	root := podReadableDir(t)
	t.Setenv("SFCLAB_STATE_DIR", root)
	return root
}

// deployer journals into a temporary directory and has the netns runtime beside the
// kubernetes one (as the CLI does: the netns runtime removes namespaces by the lab's tag).
func deployer(t testing.TB) *deploy.Deployer {
	root := podReadableDir(t)
	return &deploy.Deployer{Journal: journal.Journal{Root: root}, Log: t.Logf,
		Runtimes: map[string]runtime.Runtime{
			spec.RuntimeNetns:      nsrt.Runtime{},
			spec.RuntimeKubernetes: kubernetes.Runtime{Kubeconfig: kubeconfig, StateRoot: root, Log: t.Logf},
		}}
}

func loadLab(t testing.TB, path, name, rt string) *spec.Lab {
	t.Helper()
	lab, err := spec.Load(path, kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	lab.Name, lab.Runtime = name, rt
	return lab
}

// deployed deploys a lab and destroys it at the end of the test, checking that nothing of it
// is left: no namespace in the cluster, no network namespace on the host.
func deployed(t testing.TB, d *deploy.Deployer, lab *spec.Lab) (*plan.Plan, deploy.Timing) {
	t.Helper()
	p, release, err := d.Plan(context.Background(), lab)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	timing, err := d.Deploy(context.Background(), p, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		t0 := time.Now()
		if err := d.Destroy(context.Background(), p.Lab); err != nil {
			t.Errorf("destroy %s: %v", p.Lab, err)
		}
		t.Logf("lab %s (%s) destroyed in %s", p.Lab, p.Runtime, time.Since(t0).Round(time.Millisecond))
		checkLabGone(t, p.Lab, "destroy")
	})
	t.Logf("lab %s on %s deployed in %s (nodes %s, links %s, routing %s, functions %s)", p.Lab, p.Runtime,
		timing.Total.Round(time.Millisecond), timing.Nodes.Round(time.Millisecond), timing.Links.Round(time.Millisecond),
		timing.Routing.Round(time.Millisecond), timing.Functions.Round(time.Millisecond))
	return p, timing
}

// deployRefused plans lab and deploys it from file with d, a deploy that must fail: one that
// succeeds is destroyed and fails the test ("WHAT succeeded"). It returns the plan and the
// deploy's error.
func deployRefused(t testing.TB, d *deploy.Deployer, lab *spec.Lab, file, what string) (*plan.Plan, error) {
	t.Helper()
	p, release, err := d.Plan(context.Background(), lab)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	_, err = d.Deploy(context.Background(), p, file)
	if err == nil {
		d.Destroy(context.Background(), p.Lab)
		t.Fatalf("%s succeeded", what)
	}
	return p, err
}

// checkLabGone fails the test when anything of lab is left in the cluster, or any of its
// network namespaces on the host; who is what should have left nothing ("destroy", "the run").
func checkLabGone(t testing.TB, lab, who string) {
	t.Helper()
	if l, err := (kubernetes.Runtime{Kubeconfig: kubeconfig}).Leftovers(context.Background(), lab); err != nil || len(l) > 0 {
		t.Errorf("%s left lab %s in the cluster: %v %v", who, lab, l, err)
	}
	if left, err := netdev.ListNetns(plan.NetnsName(lab, "")); err != nil || len(left) > 0 {
		t.Errorf("%s left namespaces of lab %s on the host: %v %v", who, lab, left, err)
	}
}

// runResults opens the results store a run wrote in dir (closed when the test ends) and
// returns the run and its samples.
func runResults(t testing.TB, dir string) (results.Run, []results.Sample) {
	t.Helper()
	store, err := results.Open(filepath.Join(dir, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	run, err := store.Run()
	if err != nil {
		t.Fatal(err)
	}
	samples, err := store.Samples()
	if err != nil {
		t.Fatal(err)
	}
	return run, samples
}

// checkPlacement: a study's terminal output (errOut) and its run's environment both say where
// its hosts went: want (how many nodes) and pairs (host->node).
func checkPlacement(t testing.TB, errOut string, run results.Run, want, pairs string) {
	t.Helper()
	if !strings.Contains(errOut, want) || !strings.Contains(errOut, pairs) {
		t.Errorf("the terminal does not say where the hosts went (%q, %q):\n%s", want, pairs, errOut)
	}
	if v := run.Env["placement"]; !strings.Contains(v, want) || !strings.Contains(v, pairs) {
		t.Errorf("run environment placement = %q, want %q and %q", v, want, pairs)
	}
}

func node(t testing.TB, d *deploy.Deployer, p *plan.Plan, name string) runtime.Node {
	t.Helper()
	rt, err := d.Runtime(p.Runtime)
	if err != nil {
		t.Fatal(err)
	}
	n, err := rt.Node(context.Background(), p, name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

var ttlRE = regexp.MustCompile(`ttl=([0-9]+)`)

// pingTTL pings dst from node src and returns the TTL of the replies.
func pingTTL(t testing.TB, n runtime.Node, dst netip.Addr) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := n.Output(ctx, nil, "ping", "-c", "2", "-W", "2", dst.String())
	if err != nil {
		t.Fatalf("ping %s: %v\n%s", dst, err, out)
	}
	m := ttlRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("ping %s: no reply TTL in\n%s", dst, out)
	}
	ttl, _ := strconv.Atoi(string(m[1]))
	return ttl
}

// iperf3 runs a 2 s TCP transfer from src to an iperf3 server started in dstNode and returns
// the receiver's bits per second. The server logs to logDir, the lab's node directory (which
// pods mount).
func iperf3(t testing.TB, src, dstNode runtime.Node, dst netip.Addr, port int, logDir string) float64 {
	t.Helper()
	log := filepath.Join(logDir, fmt.Sprintf("iperf3-%d.log", port))
	pid, err := dstNode.Daemon([]string{"iperf3", "-s", "-1", "-p", strconv.Itoa(port)}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if pr, ok := dstNode.(vnf.Processes); ok { // on the pod's node
			_ = pr.StopGroup(pid, 0)
		} else if p, err := os.FindProcess(pid); err == nil {
			_ = p.Kill()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []byte
	for try := 0; try < 20; try++ { // the server may not listen yet
		out, err = src.Output(ctx, nil, "iperf3", "-c", dst.String(), "-p", strconv.Itoa(port), "-t", "2", "-J")
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3 to %s:%d: %v\n%s", dst, port, err, out)
	}
	r, err := iperf3probe.Parse(out)
	if err != nil {
		t.Fatalf("iperf3 output: %v\n%s", err, out)
	}
	if r.ReceivedBPS <= 0 {
		t.Fatalf("iperf3 to %s moved nothing:\n%s", dst, out)
	}
	return r.ReceivedBPS
}

// TestRoutedChain6 deploys chain-6 (six forwarders in a row) on the cluster and on netns: ping
// replies cross six routers each way (TTL 64-6 on both), iperf3 crosses the chain, and the
// kubernetes lab's throughput is logged beside netns's (same kernel datapath).
//
// The kubernetes lab is deployed and measured while this process, which is sfclab, is refused
// every access to the lab's namespaces and to /proc (netdev.GuardNamespaces): sysctls,
// addresses, routes and the functions' setup reach the pods through the agent, as they must
// for pods on another machine, and so do ping and iperf3 (the agent's exec); Do, the probes'
// way into a pod on this machine, is refused under the guard.
func TestRoutedChain6(t *testing.T) {
	requireCluster(t)
	d := deployer(t)
	bps := map[string]float64{}
	for _, rt := range []string{spec.RuntimeKubernetes, spec.RuntimeNetns} {
		lab := loadLab(t, "../../examples/chain-6.yaml", "k8t-c6-"+rt[:2], rt)
		release := func() {}
		var p *plan.Plan
		if rt == spec.RuntimeKubernetes {
			p = deployedGuarded(t, d, lab)
			release = guardLabs(t, p.Lab)
		} else {
			p, _ = deployed(t, d, lab)
		}
		c := p.Chains[0]
		client, server := node(t, d, p, c.From), node(t, d, p, c.TargetNode)
		if _, ok := client.(*kubernetes.Node); ok != (rt == spec.RuntimeKubernetes) {
			t.Fatalf("runtime %s gave node %T", rt, client)
		}
		if got, want := pingTTL(t, client, c.Target), 64-len(c.Hops); got != want {
			t.Errorf("%s: ping %s through %d routers: TTL %d, want %d", rt, c.Target, len(c.Hops), got, want)
		}
		if rt == spec.RuntimeKubernetes {
			if err := client.Do(func() error { return nil }); err == nil {
				t.Error("a kubernetes node let this process enter its namespace (Do) under the guard")
			}
		}
		bps[rt] = iperf3(t, client, server, c.Target, 5201, d.Journal.NodeDir(p.Lab))
		release()
	}
	t.Logf("iperf3 through chain-6 (one 2 s TCP stream): kubernetes %.2f Gbit/s, netns %.2f Gbit/s, ratio %.2f",
		bps[spec.RuntimeKubernetes]/1e9, bps[spec.RuntimeNetns]/1e9, bps[spec.RuntimeKubernetes]/bps[spec.RuntimeNetns])
}

// TestTransparent deploys the transparent firewall lab on the cluster twice at once (the same
// lab file, two names, the same addresses): the steering programs sit on the host ends of the
// pods' veths; in each lab ping (through the firewall) and iperf3 (port 5201, through
// forwarder, tap and firewall) reach the server, with the same TTL as on netns. The two labs'
// hosts, ports and steering maps must not collide on the node, and they hold different VXLAN
// slots (VNIs and steering port, slot.go), released by destroy. (On one node neither lab
// builds a VXLAN device: the slots' effect on the wire needs labs across nodes.)
//
// Both labs are deployed, measured and inspected under the guard TestRoutedChain6 describes:
// the bumps in the wire, the steering tables and inspect's counters go through the agent too.
func TestTransparent(t *testing.T) {
	requireCluster(t)
	d := deployer(t)
	rt := kubernetes.Runtime{Kubeconfig: kubeconfig}
	labs := []string{"k8t-tf-ku", "k8t-tf-ku2"}
	ps := make([]*plan.Plan, len(labs))
	errs := make([]error, len(labs))
	var wg sync.WaitGroup
	guards := []string{"/proc/"}
	for _, name := range labs {
		guards = append(guards, plan.NetnsName(name, ""))
	}
	release := netdev.GuardNamespaces(guards...)
	for i, name := range labs { // at once: two deploys racing on the node
		lab := loadLab(t, "../../examples/transparent-fw.yaml", name, spec.RuntimeKubernetes)
		pl, releasePlan, err := d.Plan(context.Background(), lab)
		if err != nil {
			release()
			t.Fatal(err)
		}
		ps[i] = pl
		t.Cleanup(func() {
			if err := d.Destroy(context.Background(), name); err != nil && !errors.Is(err, journal.ErrNotDeployed) {
				t.Errorf("destroy %s: %v", name, err)
			}
			checkLabGone(t, name, "destroy")
			if _, held, err := kubernetes.LabSlot(rt, name); err != nil || held {
				t.Errorf("lab %s still holds its VXLAN slot after destroy (%v)", name, err)
			}
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer releasePlan()
			var timing deploy.Timing
			timing, errs[i] = d.Deploy(context.Background(), pl, "test")
			t.Logf("lab %s on kubernetes deployed in %s (nodes %s, links %s, routing %s, functions %s)", name,
				timing.Total.Round(time.Millisecond), timing.Nodes.Round(time.Millisecond), timing.Links.Round(time.Millisecond),
				timing.Routing.Round(time.Millisecond), timing.Functions.Round(time.Millisecond))
		}()
	}
	wg.Wait()
	release()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("deploy %s beside another transparent lab: %v", labs[i], err)
		}
	}
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
	ttl := map[string]int{}
	releaseGuard := guardLabs(t, labs...)
	bps := make([]float64, len(ps))
	for i, p := range ps { // both labs up: traffic through each in turn
		dst := serverAddr(t, p)
		client, server := node(t, d, p, "client"), node(t, d, p, "server")
		ttl[p.Lab] = pingTTL(t, client, dst)
		bps[i] = iperf3(t, client, server, dst, 5201, d.Journal.NodeDir(p.Lab))
		inspectThroughAgent(t, d, p.Lab)
	}
	releaseGuard()
	t.Logf("iperf3 through two transparent labs deployed at once, guarded: %s %.2f Gbit/s, %s %.2f Gbit/s", labs[0], bps[0]/1e9, labs[1], bps[1]/1e9)
	p, _ := deployed(t, d, loadLab(t, "../../examples/transparent-fw.yaml", "k8t-tf-ne", spec.RuntimeNetns))
	client, server := node(t, d, p, "client"), node(t, d, p, "server")
	ttl[p.Lab] = pingTTL(t, client, serverAddr(t, p))
	iperf3(t, client, server, serverAddr(t, p), 5201, d.Journal.NodeDir(p.Lab))
	for _, name := range labs {
		if ttl[name] != ttl[p.Lab] {
			t.Errorf("ping TTL through the transparent chain: kubernetes (%s) %d, netns %d", name, ttl[name], ttl[p.Lab])
		}
	}
}

// TestHostNotANode refuses a host that names no Kubernetes node at its place in the lab file,
// before anything is created.
func TestHostNotANode(t *testing.T) {
	requireCluster(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "lab.yaml")
	yaml := "name: k8t-host\nruntime: kubernetes\nhosts: [nosuch]\nendpoints:\n  client: {kind: client}\n  server: {kind: server}\nfunctions:\n  f1: {kind: forwarder}\nchains:\n  - {name: c, from: client, to: server, hops: [f1]}\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	lab, err := spec.Load(file, kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	p, err := deployRefused(t, deployer(t), lab, file, "deploy on a host that is no Kubernetes node")
	if want := file + ":3:9: host nosuch: no such Kubernetes node"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
	if l, _ := (kubernetes.Runtime{Kubeconfig: kubeconfig}).Leftovers(context.Background(), p.Lab); len(l) > 0 {
		t.Errorf("refused lab left %v", l)
	}
}

// TestUnreachable: no cluster at the kubeconfig's server gives one line naming the kubeconfig
// and the server. Needs no cluster.
func TestUnreachable(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	body := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:1\"}\nusers:\n- name: u\n  user: {token: x}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"
	if err := os.WriteFile(kc, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	err := kubernetes.Runtime{Kubeconfig: kc}.Reachable(context.Background())
	if err == nil {
		t.Fatal("a cluster answered at 127.0.0.1:1")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, kc) || !strings.Contains(msg, "https://127.0.0.1:1") {
		t.Errorf("error is not one line naming kubeconfig and server: %q", msg)
	}
	// A cluster that is down does not stop the destroy of a lab the journal records on another
	// runtime; a kubernetes lab, or one without a journal, gets the error.
	root := filepath.Join(dir, "state")
	j := journal.Journal{Root: root}
	for lab, rt := range map[string]string{"on-netns": spec.RuntimeNetns, "on-k8s": spec.RuntimeKubernetes} {
		if err := os.MkdirAll(j.Dir(lab), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(j.Dir(lab), "plan.json"), []byte(`{"lab":"`+lab+`","runtime":"`+rt+`"}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	down := kubernetes.Runtime{Kubeconfig: kc, StateRoot: root}
	if err := down.Destroy(context.Background(), "on-netns"); err != nil {
		t.Errorf("destroy of a netns lab with the cluster down: %v", err)
	}
	if l, err := down.Leftovers(context.Background(), "on-netns"); err != nil || l != nil {
		t.Errorf("leftovers of a netns lab with the cluster down: %v, %v", l, err)
	}
	for _, lab := range []string{"on-k8s", "unjournaled"} {
		if err := down.Destroy(context.Background(), lab); err == nil || !strings.Contains(err.Error(), "https://127.0.0.1:1") {
			t.Errorf("destroy of %s with the cluster down: %v, want the unreachable cluster named", lab, err)
		}
	}
	// No kubeconfig at all: leftovers and destroy find no cluster and nothing to do.
	none := kubernetes.Runtime{Kubeconfig: filepath.Join(dir, "absent")}
	if l, err := none.Leftovers(context.Background(), "x"); err != nil || l != nil {
		t.Errorf("leftovers without a kubeconfig: %v, %v", l, err)
	}
	if err := none.Preflight(context.Background(), &plan.Plan{Lab: "x"}); err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("preflight without a kubeconfig: %v", err)
	}
}

// BenchmarkChain6 deploys chain-6 on the cluster and on netns, one after the other, and
// reports the kubernetes deploy's phases, its destroy, and the throughput of one 2 s TCP
// stream through the chain on kubernetes over netns (same kernel datapath; targets: deploy
// <= 15 s, destroy <= 10 s, ratio >= 0.9).
//
//	flock /tmp/sfclab-suite.lock go test ./runtime/kubernetes -run '^$' -bench Chain6 -benchtime 1x
func BenchmarkChain6(b *testing.B) {
	if skipReason != "" {
		b.Skip(skipReason)
	}
	for range b.N {
		bps := map[string]float64{}
		for _, rt := range []string{spec.RuntimeKubernetes, spec.RuntimeNetns} {
			d := deployer(b)
			lab, err := spec.Load("../../examples/chain-6.yaml", kinds.Spec())
			if err != nil {
				b.Fatal(err)
			}
			lab.Name, lab.Runtime = "k8b-c6-"+rt[:2], rt
			p, release, err := d.Plan(context.Background(), lab)
			if err != nil {
				b.Fatal(err)
			}
			release()
			timing, err := d.Deploy(context.Background(), p, "bench")
			if err != nil {
				b.Fatal(err)
			}
			c := p.Chains[0]
			bps[rt] = iperf3(b, node(b, d, p, c.From), node(b, d, p, c.TargetNode), c.Target, 5201, d.Journal.NodeDir(p.Lab))
			t0 := time.Now()
			if err := d.Destroy(context.Background(), p.Lab); err != nil {
				b.Fatal(err)
			}
			if rt == spec.RuntimeKubernetes {
				b.ReportMetric(timing.Total.Seconds(), "deploy-s")
				b.ReportMetric(timing.Nodes.Seconds(), "nodes-s")
				b.ReportMetric(timing.Links.Seconds(), "links-s")
				b.ReportMetric(timing.Routing.Seconds(), "routing-s")
				b.ReportMetric(timing.Functions.Seconds(), "functions-s")
				b.ReportMetric(time.Since(t0).Seconds(), "destroy-s")
			}
		}
		b.ReportMetric(bps[spec.RuntimeKubernetes]/bps[spec.RuntimeNetns], "k8s/netns")
		b.ReportMetric(bps[spec.RuntimeKubernetes]/1e9, "k8s-Gbit/s")
	}
}

// TestMissingRBAC: a user the cluster knows but grants nothing is refused before anything is
// created, with the verb and the resource named.
func TestMissingRBAC(t *testing.T) {
	requireCluster(t)
	dir := t.TempDir()
	pki := "/var/lib/sfclab-kube/pki"
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("openssl", args...).CombinedOutput(); err != nil {
			t.Fatalf("openssl %v: %v\n%s", args, err, out)
		}
	}
	key, csr, crt := filepath.Join(dir, "u.key"), filepath.Join(dir, "u.csr"), filepath.Join(dir, "u.crt")
	run("genrsa", "-out", key, "2048")
	run("req", "-new", "-key", key, "-subj", "/CN=sfclab-nobody", "-out", csr)
	run("x509", "-req", "-in", csr, "-CA", pki+"/ca.crt", "-CAkey", pki+"/ca.key", "-CAcreateserial", "-days", "1", "-out", crt)
	kc := filepath.Join(dir, "kubeconfig")
	body := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:16443\", certificate-authority: %s}\nusers:\n- name: u\n  user: {client-certificate: %s, client-key: %s}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n", pki+"/ca.crt", crt, key)
	if err := os.WriteFile(kc, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	d := deployer(t)
	d.Runtimes[spec.RuntimeKubernetes] = kubernetes.Runtime{Kubeconfig: kc, StateRoot: d.Journal.Root}
	lab := loadLab(t, "../../examples/baseline.yaml", "k8t-rbac", spec.RuntimeKubernetes)
	_, err := deployRefused(t, d, lab, "test", "deploy by a user with no permissions")
	for _, want := range []string{"forbidden", `cannot list resource "nodes"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}
