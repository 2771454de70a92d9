package kubernetes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/api"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime/kubernetes"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/steer"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// The second node of the test cluster (scripts/kubecluster/node2.sh): its name, network
// namespace and underlay device there.
const (
	node2     = "kn2"
	node2NS   = "sfclab-kn2"
	node2Link = "ul0"
)

// startNode2 starts the cluster's second node for one test and stops it (with everything it
// made) when the test ends.
func startNode2(t *testing.T) {
	t.Helper()
	t0 := time.Now()
	out, err := exec.Command(scripts+"/node2.sh", "start").CombinedOutput()
	t.Cleanup(func() {
		if t.Failed() { // node2.sh stop removes the logs
			logs, _ := filepath.Glob("/var/lib/sfclab-kube/log/" + node2 + "-*.log")
			for _, l := range logs {
				out, _ := exec.Command("tail", "-n", "25", l).CombinedOutput()
				t.Logf("%s:\n%s", l, out)
			}
		}
		if out, err := exec.Command(scripts+"/node2.sh", "stop").CombinedOutput(); err != nil {
			t.Errorf("node2.sh stop: %v\n%s", err, out)
		}
		if _, err := os.Stat("/run/netns/" + node2NS); err == nil {
			t.Errorf("node2.sh stop left network namespace %s", node2NS)
		}
		// The cluster as the next test finds it: the agent DaemonSet wants no pod on kn2
		// (else every destroy waits for one), and nothing is bound to kn2.
		var desired string
		for try := 0; try < 40; try++ {
			out, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, "-n", kubernetes.AgentNamespace, "get", "daemonset", kubernetes.AgentName,
				"-o", "jsonpath={.status.desiredNumberScheduled}", "--ignore-not-found").Output()
			if desired = strings.TrimSpace(string(out)); err == nil && (desired == "" || desired == "1") {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if desired != "" && desired != "1" {
			t.Errorf("after node2.sh stop the agent DaemonSet still wants %s pods (one node left)", desired)
		}
	})
	if err != nil {
		t.Fatalf("node2.sh start: %v\n%s", err, out)
	}
	t.Logf("node %s started in %s:\n%s", node2, time.Since(t0).Round(100*time.Millisecond), out)
}

// underlayBytes reads the bytes node 2's underlay device has received and sent.
func underlayBytes(t *testing.T) uint64 {
	t.Helper()
	out, err := exec.Command("ip", "-n", node2NS, "-j", "-s", "link", "show", node2Link).Output()
	if err != nil {
		t.Fatalf("read %s in %s: %v", node2Link, node2NS, err)
	}
	var links []struct {
		Stats struct {
			RX struct{ Bytes uint64 } `json:"rx"`
			TX struct{ Bytes uint64 } `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("read %s in %s: %v\n%s", node2Link, node2NS, err, out)
	}
	return links[0].Stats.RX.Bytes + links[0].Stats.TX.Bytes
}

// vxlanDevices lists the VXLAN devices in node 2's network namespace.
func vxlanDevices(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", node2NS, "-o", "link", "show", "type", "vxlan").CombinedOutput()
	if err != nil {
		t.Fatalf("list VXLAN devices in %s: %v\n%s", node2NS, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestAcrossNodes runs labs across the cluster's two nodes, node 2 started once for all of
// them (subtests, in this order):
//   - transparent: a transparent lab steered across the nodes (transparentAcrossNodes);
//   - serve: `sfclab serve` on a transparent lab whose port pairs are on both nodes
//     (serveAcrossNodes);
//   - study C: the openstack-sfc data plane's hosts mapped onto the two nodes
//     (studyCAcrossNodes);
//   - routed: a routed lab whose function runs on node 2 and whose endpoints run on node 1:
//     each node's agent builds its own emulated host, and the segments cross VXLAN between
//     the nodes' InternalIPs (node 2's underlay veth carries the traffic). Ping crosses the
//     function (TTL 63) and iperf3 moves at least its bytes over the underlay; destroy leaves
//     nothing in the cluster, on the host or in node 2's namespace;
//   - node leaves: node 2 goes silent, then is deleted (nodeLeaves): last, it ends node 2.
func TestAcrossNodes(t *testing.T) {
	requireCluster(t)
	startNode2(t)
	dir := t.TempDir()
	d := deployer(t)
	t.Run("transparent", func(t *testing.T) { transparentAcrossNodes(t, d, dir) })
	t.Run("serve", func(t *testing.T) { serveAcrossNodes(t, dir) })
	t.Run("study C", studyCAcrossNodes)
	t.Run("routed", func(t *testing.T) { routedAcrossNodes(t, d, dir) })
	t.Run("node leaves", func(t *testing.T) { nodeLeaves(t, d, dir) })
}

// crossLab is a routed lab named name whose endpoints run on node 1 and whose forwarder f1
// runs on node 2: both segments of its chain cross the nodes.
func crossLab(t *testing.T, dir, name string) *spec.Lab {
	t.Helper()
	file := filepath.Join(dir, name+".yaml")
	yaml := "name: " + name + "\nruntime: kubernetes\nhosts: [localhost, " + node2 + "]\n" +
		"endpoints:\n  client: {kind: client, host: localhost}\n  server: {kind: server, host: localhost}\n" +
		"functions:\n  f1: {kind: forwarder, host: " + node2 + "}\n" +
		"chains:\n  - {name: c, from: client, to: server, hops: [f1]}\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	lab, err := spec.Load(file, kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	return lab
}

func routedAcrossNodes(t *testing.T, d *deploy.Deployer, dir string) {
	lab := crossLab(t, dir, "k8t-x2")
	t.Cleanup(func() { // after the lab's destroy (cleanups run last first)
		if v := vxlanDevices(t); v != "" {
			t.Errorf("VXLAN devices left in node %s's namespace:\n%s", node2, v)
		}
	})
	p, _ := deployed(t, d, lab)
	c := p.Chains[0]
	client, server, f1 := node(t, d, p, c.From), node(t, d, p, c.TargetNode), node(t, d, p, "f1")
	for n, want := range map[*kubernetes.Node]string{client.(*kubernetes.Node): "localhost", f1.(*kubernetes.Node): node2} {
		if n.KubeNode != want {
			t.Errorf("pod %s on Kubernetes node %s, want %s", n.Name, n.KubeNode, want)
		}
	}
	if got, want := pingTTL(t, client, c.Target), 64-len(c.Hops); got != want {
		t.Errorf("ping %s through f1 on node %s: TTL %d, want %d", c.Target, node2, got, want)
	}
	before := underlayBytes(t)
	bps := iperf3(t, client, server, c.Target, 5201, d.Journal.NodeDir(p.Lab))
	moved := underlayBytes(t) - before
	// Both of the chain's segments cross the nodes: each byte goes to node 2 and back.
	// Half of that, at least, whatever the headers and the ramp: without VXLAN between the
	// nodes the underlay would carry next to nothing.
	if min := uint64(bps / 8 * 2 * 2 / 2); moved < min {
		t.Errorf("node %s's underlay moved %d bytes during iperf3 (%.2f Gbit/s for 2 s, twice across): want at least %d", node2, moved, bps/1e9, min)
	}
	if v := vxlanDevices(t); v != "" {
		t.Errorf("the lab's VXLAN devices are in node %s's namespace, not its emulated host's:\n%s", node2, v)
	}
	t.Logf("iperf3 across nodes (client and server on localhost, f1 on %s): %.2f Gbit/s, %d bytes over %s", node2, bps/1e9, moved, node2Link)
}

// transparentAcrossNodes deploys a transparent lab whose function runs on node 2 and whose
// endpoints run on node 1: each node's agent steers its own emulated host's ports, and the
// frames between them cross the steering VXLAN between the nodes (path and hop in the VNI).
// Pings are steered into the function both ways (the reply's TTL, the per-hop counters, summed over the
// nodes, count them into the function and out to their destination in each direction; the
// function's pod received them; node 2's underlay carried them), and destroy leaves no
// pinned maps of either node.
func transparentAcrossNodes(t *testing.T, d *deploy.Deployer, dir string) {
	file := filepath.Join(dir, "transparent.yaml")
	yaml := "name: k8t-x2t\nruntime: kubernetes\nsteering: transparent\nnetworks: [n]\nhosts: [localhost, " + node2 + "]\n" +
		"endpoints:\n  client: {kind: client, host: localhost, ports: {eth0: n}}\n  server: {kind: server, host: localhost, ports: {eth0: n}}\n" +
		"functions:\n  v: {kind: forwarder, host: " + node2 + ", ports: {in: n, out: n}}\n" +
		"port_pairs:\n  pp: {ingress: v.in, egress: v.out}\nport_pair_groups:\n  g: {port_pairs: [pp]}\n" +
		"flow_classifiers:\n  icmp: {protocol: icmp, logical_source_port: client.eth0, logical_destination_port: server.eth0}\n" +
		"port_chains:\n  c: {flow_classifiers: [icmp], port_pair_groups: [g], chain_parameters: {symmetric: true}}\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	lab, err := spec.Load(file, kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the lab's destroy (cleanups run last first)
		left, _ := filepath.Glob(steer.PinDir(steer.NodePin(lab.Name, "*")))
		if _, err := os.Stat(steer.PinDir(lab.Name)); err == nil {
			left = append(left, steer.PinDir(lab.Name))
		}
		if len(left) > 0 {
			t.Errorf("destroy left pinned steering maps: %v", left)
		}
		if v := vxlanDevices(t); v != "" {
			t.Errorf("VXLAN devices left in node %s's namespace:\n%s", node2, v)
		}
	})
	p, _ := deployed(t, d, lab)
	if _, err := os.Stat(steer.PinDir(steer.NodePin(p.Lab, node2))); err != nil {
		t.Errorf("node %s's agent pinned no steering maps of its part: %v", node2, err)
	}
	client, v := node(t, d, p, "client"), node(t, d, p, "v")
	if kn := v.(*kubernetes.Node).KubeNode; kn != node2 {
		t.Fatalf("pod v on Kubernetes node %s, want %s", kn, node2)
	}
	if kn := client.(*kubernetes.Node).KubeNode; kn != "localhost" {
		t.Fatalf("pod client on Kubernetes node %s, want localhost", kn)
	}
	before := underlayBytes(t)
	ttl := pingTTL(t, client, serverAddr(t, p))
	// The forwarder routes what it is steered (its TTL drops by one): the server's reply
	// crossed v, on the reverse path of the symmetric chain; without steering client and
	// server meet on their bridge and the reply keeps TTL 64.
	if want := 64 - 1; ttl != want {
		t.Errorf("ping through v on %s: reply TTL %d, want %d (steered through v on the way back)", node2, ttl, want)
	}
	if moved := underlayBytes(t) - before; moved == 0 {
		t.Errorf("node %s's underlay carried nothing while client pinged server through v there", node2)
	}
	info, err := d.Inspect(context.Background(), p.Lab)
	if err != nil {
		t.Fatal(err)
	}
	if info.Steering == nil || info.Steering.Error != "" {
		t.Fatalf("inspect steering: %+v", info.Steering)
	}
	dirs := map[string]bool{}
	for _, pa := range info.Steering.Paths {
		if pa.Chain != "c" {
			continue
		}
		dirs[pa.Dir] = true
		if len(pa.Packets) != 2 || pa.Packets[0] == 0 || pa.Packets[1] == 0 {
			t.Errorf("path %d of chain c (%s): packets into v and out to the destination %v, want both counted", pa.ID, pa.Dir, pa.Packets)
		}
	}
	if len(dirs) != 2 {
		t.Errorf("inspect shows chain c in directions %v, want both (symmetric)", dirs)
	}
	// Each node's part counted its own hops (the test reads both parts' pinned maps: the
	// nodes share this machine's BPF file system), and inspect shows their sum.
	var inspected, summed uint64
	for _, pa := range info.Steering.Paths {
		for _, n := range pa.Packets {
			inspected += n
		}
	}
	for _, kn := range []string{"localhost", node2} {
		dp, err := steer.Open(steer.NodePin(p.Lab, kn))
		if err != nil {
			t.Fatalf("open node %s's part of the steering maps: %v", kn, err)
		}
		cs, err := dp.Counters()
		dp.Close()
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, c := range cs {
			n += c.Packets
		}
		if n == 0 {
			t.Errorf("node %s's part of the steering maps counted nothing: %+v", kn, cs)
		}
		t.Logf("node %s's part counted %d packets: %+v", kn, n, cs)
		summed += n
	}
	if summed != inspected {
		t.Errorf("inspect shows %d packets on the paths, the nodes' parts hold %d", inspected, summed)
	}
	for _, n := range info.Nodes {
		if n.Name != "v" {
			continue
		}
		var rx uint64
		for _, i := range n.Interfaces {
			rx += i.Stats.RxPackets
		}
		if n.Error != "" || rx == 0 {
			t.Errorf("inspect v on %s: received nothing on its ports (%s): %+v", node2, n.Error, n.Interfaces)
		}
	}
	t.Logf("ping through v on %s, steered across the nodes: reply TTL %d; paths %+v", node2, ttl, info.Steering.Paths)
}

// partPackets sums the packets node kn's part of lab's steering maps has counted (the test
// reads the pinned maps: the nodes share this machine's BPF file system).
func partPackets(t *testing.T, lab, kn string) uint64 {
	t.Helper()
	dp, err := steer.Open(steer.NodePin(lab, kn))
	if err != nil {
		t.Fatalf("open node %s's part of lab %s's steering maps: %v", kn, lab, err)
	}
	defer dp.Close()
	cs, err := dp.Counters()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, c := range cs {
		n += c.Packets
	}
	return n
}

// serveAcrossNodes runs `sfclab serve` over a transparent lab on both nodes with no chain in
// its file (client, server and function f1 on node 1, function f2 on node 2): before any
// chain UDP from the client reaches the server straight; a port chain created over the
// networking-sfc API through a port pair on each node takes it through f1 and f2 (its TTL
// lowered by two), both nodes' parts of the steering maps count it and node 2's underlay
// carries it; deleting the chain lets it go straight again.
func serveAcrossNodes(t *testing.T, dir string) {
	const lab = "k8t-x2api"
	root := stateDir(t)
	t.Setenv("KUBECONFIG", kubeconfig)
	file := filepath.Join(dir, lab+".yaml")
	yaml := "name: " + lab + "\nruntime: kubernetes\nsteering: transparent\nnetworks: [lan]\nhosts: [localhost, " + node2 + "]\n" +
		"endpoints:\n  client: {kind: client, host: localhost, ports: {eth0: lan}}\n  server: {kind: server, host: localhost, ports: {eth0: lan}}\n" +
		"functions:\n  f1: {kind: forwarder, host: localhost, ports: {ingress: lan, egress: lan}}\n" +
		"  f2: {kind: forwarder, host: " + node2 + ", ports: {ingress: lan, egress: lan}}\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Now()
	if code, errOut := sfclab(t, ctx, io.Discard, "deploy", file); code != 0 {
		t.Fatalf("deploy: exit %d: %s", code, errOut)
	}
	t.Logf("lab %s deployed in %s", lab, time.Since(t0).Round(time.Millisecond))
	t.Cleanup(func() {
		if code, errOut := sfclab(t, ctx, io.Discard, "destroy", lab); code != 0 {
			t.Errorf("destroy: exit %d: %s", code, errOut)
		}
		checkLabGone(t, lab, "destroy")
		if left, _ := filepath.Glob(steer.PinDir(steer.NodePin(lab, "*"))); len(left) > 0 {
			t.Errorf("destroy left pinned steering maps: %v", left)
		}
	})
	do, create := restAPI(t, ctx)
	port := func(node, iface string) string { return api.PortID(lab, node, iface) }
	d := deployer(t)
	d.Journal.Root = root
	p, err := d.ReadPlan(lab)
	if err != nil {
		t.Fatal(err)
	}
	crosses, straight := firstPacket(t, p, "client", "server")
	if !straight() {
		t.Fatal("before any chain, UDP from the client did not reach the server straight")
	}
	var groups []string
	for _, f := range []string{"f1", "f2"} {
		pp := create("port_pairs", "port_pair", map[string]any{"name": "pp-" + f, "ingress": port(f, "ingress"), "egress": port(f, "egress")})
		groups = append(groups, create("port_pair_groups", "port_pair_group", map[string]any{"name": "ppg-" + f, "port_pairs": []string{pp}}))
	}
	fc := create("flow_classifiers", "flow_classifier", map[string]any{"name": "udp-in", "protocol": "udp",
		"logical_source_port": port("client", "eth0")})
	before := underlayBytes(t)
	counted := map[string]uint64{"localhost": partPackets(t, lab, "localhost"), node2: partPackets(t, lab, node2)}
	pc := create("port_chains", "port_chain", map[string]any{"name": "a", "port_pair_groups": groups, "flow_classifiers": []string{fc}})
	if !crosses(2) {
		t.Fatalf("with the chain through f1 (localhost) and f2 (%s) created over the API, UDP from the client did not cross both", node2)
	}
	if moved := underlayBytes(t) - before; moved == 0 {
		t.Errorf("node %s's underlay carried nothing while UDP crossed f2 there", node2)
	}
	for kn, n := range counted {
		if now := partPackets(t, lab, kn); now <= n {
			t.Errorf("node %s's part of the steering maps counted nothing of the chain (%d packets before, %d after)", kn, n, now)
		}
	}
	do("DELETE", "/v2.0/sfc/port_chains/"+pc, nil, 204)
	if !straight() {
		t.Fatal("after deleting the chain, UDP does not go straight to the server")
	}
}

// studyCAcrossNodes: `reproduce openstack-sfc --part data-plane --runtime kubernetes` on the
// two nodes maps Fig. 3's four hosts onto them round-robin in name order (said on the
// terminal and in the run's environment) and runs one scenario whose chain crosses them, C1:
// its source and function are on contr01 (node kn2), its destination on comp04 (node
// localhost). Its throughput is measured, node 2's underlay carried at least half the bytes
// iperf3 reports, and nothing is left behind.
func studyCAcrossNodes(t *testing.T) {
	t.Setenv("SFCLAB_STATE_DIR", t.TempDir())
	dir := filepath.Join(t.TempDir(), "run")
	var out bytes.Buffer
	before := underlayBytes(t)
	t0 := time.Now()
	code, errOut := sfclab(t, context.Background(), &out, "reproduce", "openstack-sfc", "--quick", "--part", "data-plane",
		"--runtime", "kubernetes", "--scenario", "c1", "--repetitions", "1", "--duration", "1s", "--out", dir)
	moved := underlayBytes(t) - before
	if code != 0 {
		t.Fatalf("reproduce openstack-sfc --runtime kubernetes: exit %d: %s\n%s", code, errOut, out.String())
	}
	t.Logf("reproduce (c1 on two nodes) took %s; terminal:\n%s", time.Since(t0).Round(100*time.Millisecond), errOut)
	const want = "the study's four hosts on 2 node(s)"
	const pairs = "contr01->" + node2 + ", comp02->localhost, comp03->" + node2 + ", comp04->localhost"
	run, samples := runResults(t, dir)
	checkPlacement(t, errOut, run, want, pairs)
	var bps float64
	for _, s := range samples {
		if s.Scenario == "c1" && s.Metric == "throughput" {
			bps = max(bps, s.Value)
		}
	}
	if bps <= 0 {
		t.Fatalf("c1 across the nodes: no throughput above zero among %d samples", len(samples))
	}
	// Every byte from s (kn2) to d (localhost) crosses node 2's underlay once, in VXLAN.
	if min := uint64(bps / 8 / 2); moved < min {
		t.Errorf("node %s's underlay moved %d bytes during the run (c1 at %.2f Gbit/s for 1 s): want at least %d", node2, moved, bps/1e9, min)
	}
	t.Logf("c1 across the nodes: %.2f Gbit/s; node %s's underlay moved %d bytes", bps/1e9, node2, moved)
	checkLabGone(t, "sc-c1", "the run")
}

// nodeLeaves: node 2 leaves the cluster, first as a node gone silent with a lab's pod on it
// (its kubelet killed, Ready=Unknown as the node controller sets it: node2.sh silence), then
// deleted. The agent DaemonSet still wants a pod on node 2 and the API server still shows
// node 2's agent pod running, yet no deploy or destroy on node 1 waits for it or asks it
// (PodTimeout is 1 min here: a wait would fail them): a lab on node 1 deploys and destroys; a
// lab placed on node 2 is refused before anything is created, naming the node and its state
// (once it is deleted, at its place in the lab file); the destroy of the lab whose pod is on
// node 2 removes the rest and names node 2 and what its agent was not asked to remove, and a
// second destroy finds nothing left.
func nodeLeaves(t *testing.T, d *deploy.Deployer, dir string) {
	old := kubernetes.PodTimeout
	kubernetes.PodTimeout = time.Minute
	t.Cleanup(func() { kubernetes.PodTimeout = old })
	ctx := context.Background()
	deployLab := func(lab *spec.Lab) (*plan.Plan, error) {
		t.Helper()
		p, release, err := d.Plan(ctx, lab)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		t0 := time.Now()
		_, err = d.Deploy(ctx, p, "test")
		t.Logf("deploy %s: %s (%v)", lab.Name, time.Since(t0).Round(time.Millisecond), err)
		return p, err
	}
	// A lab on node 1 deploys and destroys without waiting for node 2's agent.
	onNode1 := func(name string) {
		t.Helper()
		p, err := deployLab(loadLab(t, "../../examples/baseline.yaml", name, spec.RuntimeKubernetes))
		if err != nil {
			t.Fatalf("deploy lab %s on node localhost with node %s gone: %v", name, node2, err)
		}
		t0 := time.Now()
		if err := d.Destroy(ctx, p.Lab); err != nil {
			t.Errorf("destroy lab %s on node localhost with node %s gone: %v", name, node2, err)
		}
		t.Logf("destroy %s: %s", name, time.Since(t0).Round(time.Millisecond))
		checkLabGone(t, name, "destroy")
	}
	// A lab with a host on node 2 is refused before anything is created.
	refused := func(name string, want ...string) {
		t.Helper()
		p, err := deployLab(crossLab(t, dir, name))
		if err == nil {
			d.Destroy(ctx, p.Lab)
			t.Fatalf("lab %s placed on node %s deployed; want it refused", name, node2)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("deploy lab %s on node %s: %v\nwant %q", name, node2, err, w)
			}
		}
		checkLabGone(t, name, "destroy")
	}
	desired := func() string {
		out, _ := exec.Command("kubectl", "--kubeconfig", kubeconfig, "-n", kubernetes.AgentNamespace, "get", "daemonset", kubernetes.AgentName,
			"-o", "jsonpath={.status.desiredNumberScheduled}").Output()
		return string(out)
	}

	p, err := deployLab(crossLab(t, dir, "k8n-gone"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Destroy(ctx, p.Lab) }) // when the test fails before its destroy
	if out, err := exec.Command(scripts+"/node2.sh", "silence").CombinedOutput(); err != nil {
		t.Fatalf("node2.sh silence: %v\n%s", err, out)
	}
	t.Logf("node %s silenced; the agent DaemonSet wants %s pods", node2, desired())
	onNode1("k8n-one")
	refused("k8n-refused", "k8n-refused.yaml:3:", "host "+node2+": place lab k8n-refused on Kubernetes node "+node2+": the node is not Ready (Ready=Unknown)")
	t0 := time.Now()
	err = d.Destroy(ctx, p.Lab)
	t.Logf("destroy %s (its pod f1 on silent node %s): %s: %v", p.Lab, node2, time.Since(t0).Round(time.Millisecond), err)
	if want := "remove lab k8n-gone from Kubernetes node " + node2 + " (its pods f1): the node is not Ready (Ready=Unknown), so its sfclab agent was not asked to remove what the lab made there"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("destroy of a lab with a pod on silent node %s: %v\nwant %q", node2, err, want)
	}
	if err := d.Destroy(ctx, p.Lab); err != nil {
		t.Errorf("second destroy of %s: %v, want none: the cluster has nothing of it left", p.Lab, err)
	}
	checkLabGone(t, p.Lab, "destroy")

	if out, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, "delete", "node", node2).CombinedOutput(); err != nil {
		t.Fatalf("kubectl delete node %s: %v\n%s", node2, err, out)
	}
	t.Logf("node %s deleted; the agent DaemonSet wants %s pods", node2, desired())
	onNode1("k8n-one2")
	refused("k8n-refused2", "k8n-refused2.yaml:3:", "host "+node2+": no such Kubernetes node")
}
