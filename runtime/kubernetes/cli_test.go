package kubernetes_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/api"
	"github.com/sfclab/sfclab/bench"
	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/internal/cli"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe/firstpacket"
	"github.com/sfclab/sfclab/runtime/kubernetes"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// cliChild is the environment variable that makes the test binary the sfclab command line (for
// the kill -9 test, which needs a real process to kill).
const cliChild = "SFCLAB_K8S_CLI_CHILD"

// runCLIChild runs sfclab's command line when the test binary was started as its child, or as
// the agent: the agent's pods run the program that deployed (this binary, mounted at
// /usr/local/bin/sfclab).
func runCLIChild() {
	if os.Getenv(cliChild) != "1" && filepath.Base(os.Args[0]) != "sfclab" {
		return
	}
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// sfclab runs the command line in this process against the test cluster and a private journal
// (the caller has set SFCLAB_STATE_DIR).
func sfclab(t *testing.T, ctx context.Context, stdout io.Writer, args ...string) (int, string) {
	t.Helper()
	var errOut bytes.Buffer
	code := cli.Main(ctx, append([]string{"--kubeconfig", kubeconfig}, args...), stdout, &errOut)
	return code, errOut.String()
}

// benchLab is examples/fw.yaml (client -> iptables firewall -> server) with an Apache origin
// (http-server's default server) as its server.
const benchLab = `name: fw-apache
links: bridge
endpoints:
  client: {kind: client}
  server:
    kind: http-server
    http: {objects: [1k, 10k]}
functions:
  fw:
    kind: firewall
    params:
      backend: iptables
      masquerade: true
      rules:
        - {action: deny, protocol: tcp, port: 9999}
chains:
  - name: web
    from: client
    to: server
    hops: [fw]
`

// TestBenchOnCluster runs a short experiment (one repetition of the firewall lab, its server
// an Apache origin, on the cluster: ping, iperf3, tcprtt, HTTP GETs of both objects through
// the firewall and the nodes' CPU) through the bench runner `sfclab bench` uses: the trial
// succeeds, its samples carry the runtime, the probes measured through the pods (tcprtt's and
// the http probe's Go code in the pods' namespaces, entered because sfclab runs on their
// node: Node.Do), every GET was answered, the run's environment names the cluster, and the
// lab is gone afterwards. Apache in a pod logs its errors to its log file, not /dev/stderr,
// which does not resolve there (httpserver.ApacheConfig).
func TestBenchOnCluster(t *testing.T) {
	requireCluster(t)
	const lab = "k8t-bench"
	labFile := filepath.Join(t.TempDir(), "fw-apache.yaml")
	if err := os.WriteFile(labFile, []byte(benchLab), 0o644); err != nil {
		t.Fatal(err)
	}
	exp := []byte(`name: k8t-bench
repetitions: 1
warmup: 0s
scenarios:
  - {name: fw-k8s, lab: ` + labFile + `, runtime: kubernetes}
probes:
  iperf3: {duration: 1s}
  ping: {count: 5, interval: 10ms}
  tcprtt: {connects: 20, requests: 50}
  http: {requests: 20, objects: [1k, 10k]}
  cpu: true
`)
	load := func(path string) (*spec.Lab, error) {
		l, err := spec.Load(path, kinds.Spec())
		if err == nil {
			l.Name = lab
		}
		return l, err
	}
	e, err := experiment.Decode(exp, "k8t-bench.yaml", ".", load)
	if err != nil {
		t.Fatal(err)
	}
	d := deployer(t)
	dir := filepath.Join(t.TempDir(), "run")
	out, err := (&bench.Runner{Deployer: d, Version: "test", Log: t.Logf}).Run(context.Background(), e, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Trials != 1 || out.Failed != 0 {
		t.Fatalf("trials %d, failed %d", out.Trials, out.Failed)
	}
	checkLabGone(t, lab, "the bench")
	run, samples := runResults(t, dir)
	if v := run.Env["kubernetes"]; !strings.Contains(v, "v1.") || !strings.Contains(v, "127.0.0.1:16443") {
		t.Errorf("run environment kubernetes = %q, want the cluster's version and server", v)
	}
	got := map[string]int{}
	for _, s := range samples {
		if s.Probe == "deploy" && s.Labels["runtime"] != spec.RuntimeKubernetes {
			t.Errorf("deploy sample records runtime %q, want kubernetes", s.Labels["runtime"])
		}
		if n := s.Labels["node"]; s.Probe == "cpu" && n != "" {
			got["cpu node "+n]++ // read from the pod's cgroup
		}
		if s.Value > 0 {
			got[s.Probe+" "+s.Metric]++
		}
		if s.Probe == "http" && (s.Metric == "errors" || s.Metric == "non2xx") && s.Value != 0 {
			t.Errorf("http probe: %v %s of the GETs through the firewall to Apache (%v)", s.Value, s.Metric, s.Labels)
		}
		if s.Probe == "http" && s.Metric == "requests" && s.Value != 20 {
			t.Errorf("http probe: %v requests finished, want 20 (%v)", s.Value, s.Labels)
		}
	}
	// Forwarding is softirq work, charged to no cgroup: the firewall's own figure may be 0, the
	// endpoints' (iperf3 runs in their pods' cgroups) are not; every node has one.
	for _, want := range []string{"deploy deploy_time", "ping rtt", "iperf3 throughput", "cpu cpu_user", "cpu node client", "cpu node fw", "cpu node server", "tcprtt connect", "tcprtt rtt", "http requests", "http bytes"} {
		if got[want] == 0 {
			t.Errorf("no %q sample among %v", want, got)
		}
	}
}

// TestServeTransparent runs `sfclab serve` over a transparent lab on the cluster: before any
// chain UDP from the client reaches the server straight; a port chain created over the
// networking-sfc API takes it through f1 (its TTL drops by one); deleting the chain lets it go
// straight again.
func TestServeTransparent(t *testing.T) {
	requireCluster(t)
	root := stateDir(t)
	t.Setenv("KUBECONFIG", kubeconfig)
	file := filepath.Join(t.TempDir(), "lab.yaml")
	yaml := `name: k8t-api
runtime: kubernetes
steering: transparent
networks: [lan]
endpoints:
  client: {kind: client, ports: {eth0: lan}}
  server: {kind: server, ports: {eth0: lan}}
functions:
  f1: {kind: forwarder, ports: {ingress: lan, egress: lan}}
`
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if code, errOut := sfclab(t, ctx, io.Discard, "deploy", file); code != 0 {
		t.Fatalf("deploy: exit %d: %s", code, errOut)
	}
	t.Cleanup(func() {
		if code, errOut := sfclab(t, ctx, io.Discard, "destroy", "k8t-api"); code != 0 {
			t.Errorf("destroy: exit %d: %s", code, errOut)
		}
		if l, err := (kubernetes.Runtime{Kubeconfig: kubeconfig}).Leftovers(ctx, "k8t-api"); err != nil || len(l) > 0 {
			t.Errorf("lab k8t-api left in the cluster: %v %v", l, err)
		}
		if left, _ := netdev.ListNetns(plan.NetnsName("k8t-api", "")); len(left) > 0 {
			t.Errorf("namespaces of lab k8t-api left on the host: %v", left)
		}
	})
	do, create := restAPI(t, ctx)
	port := func(node, iface string) string { return api.PortID("k8t-api", node, iface) }

	d := deployer(t)
	d.Journal.Root = root
	p, err := d.ReadPlan("k8t-api")
	if err != nil {
		t.Fatal(err)
	}
	crosses, straight := firstPacket(t, p, "client", "server")
	if !straight() {
		t.Fatal("before any chain, UDP from the client did not reach the server straight")
	}
	pp := create("port_pairs", "port_pair", map[string]any{"name": "pp-f1", "ingress": port("f1", "ingress"), "egress": port("f1", "egress")})
	ppg := create("port_pair_groups", "port_pair_group", map[string]any{"name": "ppg-f1", "port_pairs": []string{pp}})
	fc := create("flow_classifiers", "flow_classifier", map[string]any{"name": "udp-in", "protocol": "udp",
		"logical_source_port": port("client", "eth0")})
	pc := create("port_chains", "port_chain", map[string]any{"name": "a", "port_pair_groups": []string{ppg}, "flow_classifiers": []string{fc}})
	if !crosses(1) {
		t.Fatal("with the chain created over the API, UDP from the client did not cross f1")
	}
	do("DELETE", "/v2.0/sfc/port_chains/"+pc, nil, 204)
	if !straight() {
		t.Fatal("after deleting the chain, UDP does not go straight to the server")
	}
}

// restAPI starts `sfclab serve` on a free loopback port (stopped when the test ends) and
// returns calls of its REST API: do sends a request and wants a status (its JSON answer
// decoded), create makes one networking-sfc resource and returns its ID.
func restAPI(t *testing.T, ctx context.Context) (do func(method, path string, body any, want int) map[string]any, create func(plural, singular string, body map[string]any) string) {
	// sfclab serve on a free loopback port; its first line names the address.
	sctx, stop := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		code, errOut := sfclab(t, sctx, pw, "serve", "--listen", "127.0.0.1:0")
		if code != 0 {
			t.Errorf("serve: exit %d: %s", code, errOut)
		}
		pw.Close()
	}()
	t.Cleanup(func() { stop(); wg.Wait() })
	line, err := bufio.NewReader(pr).ReadString('\n')
	go io.Copy(io.Discard, pr)
	m := regexp.MustCompile(`http://[0-9.:]+`).FindString(line)
	if err != nil || m == "" {
		t.Fatalf("serve's first line %q (%v) names no address", line, err)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	do = func(method, path string, body any, want int) map[string]any {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequest(method, m+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, data, want)
		}
		var v map[string]any
		_ = json.Unmarshal(data, &v)
		return v
	}
	create = func(plural, singular string, body map[string]any) string {
		t.Helper()
		v := do("POST", "/v2.0/sfc/"+plural, map[string]any{singular: body}, 201)
		return v[singular].(map[string]any)["id"].(string)
	}
	return do, create
}

// firstPacket opens a first-packet probe (UDP to port 40001) from node src to node dst of
// deployed transparent lab p, closed when the test ends: crosses says whether a probe crossed
// a chain of hops functions (its TTL lowered by that many) within 2 s, straight whether
// probes reached dst unsteered (their TTL kept) and none crossed within 0.5 s.
func firstPacket(t *testing.T, p *plan.Plan, src, dst string) (crosses func(hops int) bool, straight func() bool) {
	t.Helper()
	open := func(node string) *netdev.NS {
		ns, err := netdev.OpenNS(p.Transparent.Node(node).Netns)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Close() })
		return ns
	}
	to := netip.AddrPortFrom(p.Transparent.Node(dst).Ports[0].Address.Addr(), 40001)
	probe, err := firstpacket.Open(open(src), open(dst), to)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { probe.Close() })
	ctx := context.Background()
	crosses = func(hops int) bool {
		probe.Timeout = 2 * time.Second
		_, err := probe.Run(ctx, hops)
		return err == nil
	}
	straight = func() bool {
		probe.Timeout = 500 * time.Millisecond
		r, err := probe.Run(ctx, 1)
		return err != nil && r != nil && r.Direct > 0
	}
	return crosses, straight
}

// TestKill9ThenDestroyAll kills sfclab with SIGKILL while it deploys a lab on the cluster (its
// pods running and wired, a function's setup still going), then runs `sfclab destroy --all`:
// nothing of the lab is left in the cluster (namespace, pods) or on the host (network
// namespaces, the pods' processes). Two labs, deployed and killed at once, then one destroy
// --all: one with the journal as the killed deploy left it, one with the journal gone, when
// only the namespace's labels in the cluster name the lab.
func TestKill9ThenDestroyAll(t *testing.T) {
	requireCluster(t)
	root := stateDir(t)
	ctx := context.Background()
	type killed struct {
		name, lab     string
		removeJournal bool
		sleep         string // a setup that outlives the kill: the deploy is killed while it runs
		child         *exec.Cmd
		out           bytes.Buffer
		pids          []int
	}
	cases := []*killed{
		{name: "journal kept", lab: "k8t-kill", sleep: "sleep 47"},
		{name: "journal removed", lab: "k8t-killnj", removeJournal: true, sleep: "sleep 48"},
	}
	for _, tc := range cases {
		file := filepath.Join(t.TempDir(), "lab.yaml")
		yaml := fmt.Sprintf(`name: %s
runtime: kubernetes
endpoints: {client: {}, server: {}}
functions:
  a: {kind: forwarder}
  slow: {kind: custom, params: {setup: [%q]}}
chains: [{from: client, to: server, hops: [a, slow]}]
`, tc.lab, tc.sleep)
		if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sfclab(t, ctx, io.Discard, "destroy", tc.lab) })
		tc.child = exec.Command(os.Args[0], "--kubeconfig", kubeconfig, "deploy", file)
		tc.child.Env = append(os.Environ(), cliChild+"=1")
		tc.child.Stdout, tc.child.Stderr = &tc.out, &tc.out
		if err := tc.child.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tc.child.Process.Kill(); tc.child.Wait() })
	}
	deadline := time.Now().Add(90 * time.Second)
	for _, tc := range cases {
		for len(processes(tc.sleep)) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the deploy never reached the slow setup:\n%s", tc.name, tc.out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, tc := range cases {
		tc.child.Process.Signal(syscall.SIGKILL)
		tc.child.Wait()
	}
	k := kubernetes.Runtime{Kubeconfig: kubeconfig}
	for _, tc := range cases {
		if l, _ := k.Leftovers(ctx, tc.lab); len(l) == 0 {
			t.Fatalf("%s: test setup: the killed deploy left nothing in the cluster to clean", tc.name)
		}
		if ns, _ := netdev.ListNetns(plan.NetnsName(tc.lab, "")); len(ns) == 0 {
			t.Fatalf("%s: test setup: the killed deploy left no namespaces on the host to clean", tc.name)
		}
		if tc.pids = labProcesses(t, tc.lab); len(tc.pids) == 0 {
			t.Fatalf("%s: test setup: no process found in the killed deploy's pods", tc.name)
		}
		if tc.removeJournal {
			if err := os.RemoveAll(filepath.Join(root, "labs", tc.lab)); err != nil {
				t.Fatal(err)
			}
		}
	}
	t0 := time.Now()
	var out bytes.Buffer
	code, errOut := sfclab(t, ctx, &out, "destroy", "--all")
	if code != 0 {
		t.Fatalf("destroy --all: exit %d\n%s%s", code, out.String(), errOut)
	}
	t.Logf("destroy --all after kill -9: %s", time.Since(t0).Round(time.Millisecond))
	for _, tc := range cases {
		if !strings.Contains(out.String(), "destroyed lab "+tc.lab) {
			t.Errorf("%s: destroy --all did not destroy lab %s:\n%s%s", tc.name, tc.lab, out.String(), errOut)
		}
		if l, err := k.Leftovers(ctx, tc.lab); err != nil || len(l) > 0 {
			t.Errorf("%s: left in the cluster: %v %v", tc.name, l, err)
		}
		if ns, _ := netdev.ListNetns(plan.NetnsName(tc.lab, "")); len(ns) > 0 {
			t.Errorf("%s: namespaces left on the host: %v", tc.name, ns)
		}
		if _, err := os.Stat(filepath.Join(root, "labs", tc.lab)); err == nil {
			t.Errorf("%s: journal of %s left", tc.name, tc.lab)
		}
	}
	if agentNamespaceExists(t) {
		t.Errorf("destroy --all left the agent's namespace %s", kubernetes.AgentNamespace)
	}
	// The API server forgets force-deleted pods at once; the kubelet then stops their
	// containers, and the processes in them end. The cluster's namespace controller removes
	// the labs' namespaces (destroy does not wait for it).
	deadline = time.Now().Add(60 * time.Second)
	for _, tc := range cases {
		for len(processes(tc.sleep)) > 0 || len(alive(tc.pids)) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: processes of the lab's pods still run 60 s after destroy --all: %v %v", tc.name, processes(tc.sleep), alive(tc.pids))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	t.Logf("the pods' processes gone %s after destroy --all began", time.Since(t0).Round(time.Millisecond))
	for _, tc := range cases {
		for namespaceExists(t, kubernetes.Namespace(tc.lab)) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: namespace %s still there 60 s after destroy --all", tc.name, kubernetes.Namespace(tc.lab))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	t.Logf("the labs' namespaces gone %s after destroy --all began", time.Since(t0).Round(time.Millisecond))
}

// processes lists the PIDs whose command line is exactly cmdline (words joined by spaces).
func processes(cmdline string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		if strings.Join(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), " ") == cmdline {
			out = append(out, e.Name())
		}
	}
	return out
}

// labProcesses lists the host PIDs of the processes in the lab's network namespaces (those
// named /run/netns/sfc.LAB.*: the pods' and the fabric's), found by namespace inode.
func labProcesses(t *testing.T, lab string) []int {
	t.Helper()
	names, err := netdev.ListNetns(plan.NetnsName(lab, ""))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, n := range names {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join("/run/netns", n), &st); err == nil {
			inodes[fmt.Sprintf("net:[%d]", st.Ino)] = true
		}
	}
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns/net")); err == nil && inodes[l] {
			out = append(out, pid)
		}
	}
	return out
}

// alive lists the PIDs of pids that still run (not zombies).
func alive(pids []int) []int {
	var out []int
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		if _, rest, ok := strings.Cut(string(b), ") "); ok && !strings.HasPrefix(rest, "Z") {
			out = append(out, pid)
		}
	}
	return out
}

// TestReproduceStudyCOnCluster: `reproduce openstack-sfc --runtime kubernetes` on the one-node
// cluster runs both its parts (without --part; the data plane cut to its chain C1,
// transparent, one quick repetition; the deploy-time part quick, one repetition): it says on
// the terminal and in the run's environment that the study's four hosts went onto the
// cluster's one node and measures C1 on kubernetes; the deploy-time report records the runtime,
// the cluster and where its pods went, and has every REST step of every chain (1..3 functions)
// above zero and the first packet through each new chain arrived; nothing of either lab is
// left behind.
func TestReproduceStudyCOnCluster(t *testing.T) {
	requireCluster(t)
	stateDir(t)
	dir := filepath.Join(t.TempDir(), "run")
	var out bytes.Buffer
	code, errOut := sfclab(t, context.Background(), &out, "reproduce", "openstack-sfc", "--quick",
		"--runtime", "kubernetes", "--scenario", "c1", "--repetitions", "1", "--duration", "1s", "--out", dir)
	for _, lab := range []string{"sc-c1", "study-c"} {
		checkLabGone(t, lab, "the run")
	}
	if code != 0 {
		t.Fatalf("reproduce openstack-sfc --runtime kubernetes: exit %d: %s\n%s", code, errOut, out.String())
	}
	checkDeployTimeOnCluster(t, filepath.Join(dir, "deploy-time"), errOut, 1, 3)
	t.Logf("terminal:\n%s", errOut)
	const want = "the study's four hosts on 1 node(s)"
	const pairs = "contr01->localhost, comp02->localhost, comp03->localhost, comp04->localhost"
	run, samples := runResults(t, dir)
	checkPlacement(t, errOut, run, want, pairs)
	if v := run.Env["scenarios"]; v != "c1" {
		t.Errorf("run environment scenarios = %q, want c1", v)
	}
	if v := run.Env["reduced"]; !strings.Contains(v, "only scenarios c1") {
		t.Errorf("run environment reduced = %q, want it to say only c1 ran", v)
	}
	var deployed, throughput int
	for _, s := range samples {
		if s.Scenario != "c1" {
			t.Errorf("sample of scenario %q, want only c1", s.Scenario)
		}
		if s.Probe == "deploy" && s.Labels["runtime"] == spec.RuntimeKubernetes {
			deployed++
		}
		if s.Metric == "throughput" && s.Value > 0 {
			throughput++
		}
	}
	if deployed == 0 || throughput == 0 {
		t.Errorf("c1: %d deploy samples on kubernetes, %d throughput samples above zero; want both (%d samples)", deployed, throughput, len(samples))
	}
}

// checkDeployTimeOnCluster checks study C's deploy-time report in dir, of a run on the test
// cluster with reps repetitions of chains of 1..functions functions: the report and the
// terminal (errOut) name the runtime, the cluster and the node its pods ran on; samples.csv
// has, per repetition and length, the four REST steps, their total and the first packet, each
// above zero and below a bound no healthy run reaches (a minute per step; the probe's own
// timeout for the first packet), the total the sum of the steps, and the first packet after
// the PC request the PC step plus the first packet.
func checkDeployTimeOnCluster(t *testing.T, dir, errOut string, reps, functions int) {
	t.Helper()
	rep, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	const runtime = "runtime kubernetes (cluster v1."
	for _, want := range []string{runtime, "at https://127.0.0.1:16443", "pods: client, f1, f2, f3, server on localhost", "transparent eBPF", "study C (published)"} {
		if !strings.Contains(string(rep), want) {
			t.Errorf("deploy-time report lacks %q:\n%s", want, rep)
		}
	}
	t.Logf("deploy-time report:\n%s", rep)
	if strings.Contains(string(rep), "**Incomplete**: repetition") {
		t.Errorf("deploy-time report is incomplete:\n%s", rep)
	}
	if !strings.Contains(errOut, "study C deploy time: "+runtime) {
		t.Errorf("the terminal does not say the deploy-time lab ran on kubernetes:\n%s", errOut)
	}
	data, err := os.ReadFile(filepath.Join(dir, "samples.csv"))
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		rep, n int
		step   string
	}
	got := map[key]float64{}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) == 0 || lines[0] != "repetition,functions,step,seconds" {
		t.Fatalf("samples.csv has no header:\n%s", data)
	}
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) != 4 {
			t.Fatalf("samples.csv line %q: want 4 fields", l)
		}
		r, err1 := strconv.Atoi(f[0])
		n, err2 := strconv.Atoi(f[1])
		v, err3 := strconv.ParseFloat(f[3], 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatalf("samples.csv line %q: %v", l, err)
		}
		got[key{r, n, f[2]}] = v
	}
	steps := []string{"FC", "PP", "PPG", "PC", "total", "first_packet", "first_packet_pc"}
	if len(got) != reps*functions*len(steps) {
		t.Errorf("samples.csv has %d samples, want %d (%d repetitions x %d lengths x %v):\n%s", len(got), reps*functions*len(steps), reps, functions, steps, data)
	}
	for r := 1; r <= reps; r++ {
		for n := 1; n <= functions; n++ {
			v := func(step string) float64 { return got[key{r, n, step}] }
			for _, step := range steps {
				bound := 60.0
				if strings.HasPrefix(step, "first_packet") {
					bound = 60 + firstpacket.DefaultTimeout.Seconds()
				}
				if x := v(step); !(x > 0 && x < bound) {
					t.Errorf("repetition %d, %d functions, %s: %g s, want above 0 and below %g s", r, n, step, x, bound)
				}
			}
			if x := v("first_packet"); x >= firstpacket.DefaultTimeout.Seconds() {
				t.Errorf("repetition %d, %d functions: first packet after %g s, beyond the probe's timeout %s", r, n, x, firstpacket.DefaultTimeout)
			}
			if sum := v("FC") + v("PP") + v("PPG") + v("PC"); math.Abs(sum-v("total")) > 1e-6 {
				t.Errorf("repetition %d, %d functions: total %g s, the steps sum to %g s", r, n, v("total"), sum)
			}
			if pc := v("PC") + v("first_packet"); math.Abs(pc-v("first_packet_pc")) > 1e-6 {
				t.Errorf("repetition %d, %d functions: first packet after the PC request %g s, want PC + first packet = %g s", r, n, v("first_packet_pc"), pc)
			}
		}
	}
}

// agentNamespaceExists asks the cluster whether the agent's namespace is there.
func agentNamespaceExists(t *testing.T) bool {
	t.Helper()
	return namespaceExists(t, kubernetes.AgentNamespace)
}

// namespaceExists asks the cluster whether namespace ns is there (being deleted or not).
func namespaceExists(t *testing.T, ns string) bool {
	t.Helper()
	out, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, "get", "namespace", ns, "-o", "name").CombinedOutput()
	if err != nil && strings.Contains(string(out), "NotFound") {
		return false
	}
	if err != nil {
		t.Fatalf("kubectl get namespace %s: %v: %s", ns, err, out)
	}
	return true
}

// TestAgent: a deploy runs the sfclab agent DaemonSet (privileged, host network and PID) on
// the pods' node, which names the pods' network namespaces; a command runs in a pod of the
// lab through the API server's exec (kubectl exec), its exit status passed on, as `sfclab
// exec` does; with no agent pod on the node the deploy fails, naming the node, and unwinds
// (no namespace in the cluster, none on the host).
func TestAgent(t *testing.T) {
	requireCluster(t)
	d := deployer(t)
	p, _ := deployed(t, d, loadLab(t, "../../examples/baseline.yaml", "k8t-agent", spec.RuntimeKubernetes))
	t.Run("exec through the API", func(t *testing.T) {
		t.Setenv("PATH", os.Getenv("PATH")+":/var/cache/sfclab-kube/bin")
		n := node(t, d, p, p.Chains[0].From)
		var out strings.Builder
		cmd := exec.Command("sh", "-c", "hostname; exit 3")
		cmd.Stdout = &out
		err := n.Run(cmd)
		var ee interface{ ExitCode() int }
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Errorf("exit status through kubectl exec: %v, want 3", err)
		}
		if got := strings.TrimSpace(out.String()); got != p.Chains[0].From {
			t.Errorf("hostname in the pod: %q, want the pod's name %q", got, p.Chains[0].From)
		}
	})
	out, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, "-n", kubernetes.AgentNamespace, "get", "pods", "-o",
		`jsonpath={range .items[*]}{.spec.nodeName} {.spec.hostNetwork} {.spec.hostPID} {.spec.containers[0].securityContext.privileged} {.status.phase}{"\n"}{end}`).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get the agent's pods: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "localhost true true true Running" {
		t.Errorf("agent pods (node hostNetwork hostPID privileged phase): %q, want one on localhost, all true, Running", got)
	}
	// No agent pod can run: a node selector no node has.
	patch := `{"spec":{"template":{"spec":{"nodeSelector":{"sfclab.test/none":"x"}}}}}`
	if out, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, "-n", kubernetes.AgentNamespace, "patch", "daemonset", kubernetes.AgentName, "-p", patch).CombinedOutput(); err != nil {
		t.Fatalf("kubectl patch: %v: %s", err, out)
	}
	t.Cleanup(func() { // the DaemonSet places its pod again; the next deploy waits for it
		unpatch := `{"spec":{"template":{"spec":{"nodeSelector":null}}}}`
		if out, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, "-n", kubernetes.AgentNamespace, "patch", "daemonset", kubernetes.AgentName, "-p", unpatch).CombinedOutput(); err != nil {
			t.Errorf("kubectl patch: %v: %s", err, out)
		}
	})
	old := kubernetes.PodTimeout
	kubernetes.PodTimeout = 15 * time.Second
	t.Cleanup(func() { kubernetes.PodTimeout = old })
	lab := loadLab(t, "../../examples/baseline.yaml", "k8t-noagent", spec.RuntimeKubernetes)
	p, err = deployRefused(t, d, lab, "test", "deploy without an agent pod on the node")
	if !strings.Contains(err.Error(), "wait for the sfclab agent on node localhost") {
		t.Errorf("error %q does not name the node the agent is missing on", err)
	}
	kubernetes.PodTimeout = old
	checkLabGone(t, p.Lab, "the failed deploy")
}
