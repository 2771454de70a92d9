package kubernetes_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/deploy"
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

// TestAcrossNodes deploys a routed lab whose function runs on the cluster's second node and
// whose endpoints run on the first: each node's agent builds its own emulated host, and the
// segments cross VXLAN between the nodes' InternalIPs (node 2's underlay veth carries the
// traffic). Ping crosses the function (TTL 63) and iperf3 moves at least its bytes over the
// underlay; destroy leaves nothing in the cluster, on the host or in node 2's namespace.
func TestAcrossNodes(t *testing.T) {
	requireCluster(t)
	startNode2(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "lab.yaml")
	yaml := "name: k8t-x2\nruntime: kubernetes\nhosts: [localhost, " + node2 + "]\n" +
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
	d := deployer(t)
	t.Run("transparent", func(t *testing.T) { transparentAcrossNodes(t, d, dir) })
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
