package kubernetes_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/runtime/kubernetes"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf"
)

// TestForeignNode deploys study A's fw-lb lab (client -> iptables firewall -> HAProxy ->
// server) with the cluster's only node treated as another machine's (Runtime.ForeignNodes):
// there is no second machine here, so sfclab must not see the pods' files, and it does not
// write them: the pods mount the lab's directory on the node (NodeStateRoot/LAB, made by the
// agent), never the journal's node directory, and HAProxy's configuration, pid file and log
// (and an iperf3 server's log) are written and read there by the agent. iperf3 crosses the
// firewall and HAProxy to the server; the files are in the node's lab directory and the
// journal's node directory stays empty; the pods cannot be entered (Do), so the probes take
// them for guests; destroy leaves nothing on the node or in the cluster.
func TestForeignNode(t *testing.T) {
	requireCluster(t)
	d := deployer(t)
	rt := d.Runtimes[spec.RuntimeKubernetes].(kubernetes.Runtime)
	rt.ForeignNodes = []string{"localhost"}
	d.Runtimes[spec.RuntimeKubernetes] = rt
	lab := loadLab(t, "../../examples/fw-lb.yaml", "k8r-far", spec.RuntimeKubernetes)
	onNode := filepath.Join(kubernetes.NodeStateRoot, lab.Name)
	if _, err := os.Stat(onNode); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s exists before the deploy: %v", onNode, err)
	}
	// Registered before deployed's destroy, so checked after it.
	t.Cleanup(func() {
		if _, err := os.Stat(onNode); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the lab's directory on the node is left after destroy: %v", err)
			os.RemoveAll(onNode)
		}
	})
	p, _ := deployed(t, d, lab)
	journalDir := d.Journal.NodeDir(p.Lab)

	c := p.Chains[0]
	if c.TargetNode != "lb" {
		t.Fatalf("chain %s's target is %s, want HAProxy's node lb", c.Name, c.TargetNode)
	}
	client, server, lb := node(t, d, p, c.From), node(t, d, p, probe.DestinationNodes(p, c)[0]), node(t, d, p, "lb")
	for _, n := range []any{client, server, lb} {
		rn, ok := n.(*kubernetes.RemoteNode)
		if !ok {
			t.Fatalf("node of a foreign Kubernetes node is %T, want *kubernetes.RemoteNode", n)
		}
		if err := rn.Do(func() error { return nil }); err == nil || !strings.Contains(err.Error(), "another machine") {
			t.Errorf("Do in pod %s on a foreign node: %v, want a refusal", rn.Name, err)
		}
		if _, guest := probe.InGuest(rn); !guest {
			t.Errorf("probe.InGuest(%s) is false for a pod on another machine", rn.Name)
		}
	}

	// HAProxy's files are on the node, where the pod sees them at the journal's path.
	for _, f := range []string{"lb.haproxy.cfg", "lb.haproxy.pid", "lb.haproxy.log"} {
		if _, err := os.Stat(filepath.Join(onNode, f)); err != nil {
			t.Errorf("HAProxy's %s is not in the node's lab directory: %v", f, err)
		}
	}
	cfg, err := os.ReadFile(filepath.Join(onNode, "lb.haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	inPod, err := lb.Output(ctx, nil, "cat", filepath.Join(journalDir, "lb.haproxy.cfg"))
	if err != nil || string(inPod) != string(cfg) || !strings.Contains(string(cfg), "haproxy") {
		t.Errorf("the lb pod reads %q (%v) at the journal's path, the node has %q", inPod, err, cfg)
	}
	pidText, err := vnf.ReadFile(lb, filepath.Join(journalDir, "lb.haproxy.pid"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil || pid <= 1 || !vnf.Runs(lb, pid) {
		t.Errorf("HAProxy's pid file through the agent: %q %v; runs: %v", pidText, err, pid > 1 && vnf.Runs(lb, pid))
	}

	// Traffic: through the firewall and HAProxy to the server's iperf3, whose log (named in
	// the journal's node directory) lands on the node too.
	port := int(probe.TargetPort(p, c))
	bps := iperf3(t, client, server, c.Target, port, journalDir)
	t.Logf("iperf3 through fw and HAProxy, pods on a node treated as another machine's: %.2f Gbit/s", bps/1e9)
	if _, err := os.Stat(filepath.Join(onNode, "iperf3-"+strconv.Itoa(port)+".log")); err != nil {
		t.Errorf("the iperf3 server's log is not in the node's lab directory: %v", err)
	}
	if ents, err := os.ReadDir(journalDir); err != nil || len(ents) > 0 {
		t.Errorf("sfclab's journal node directory %s holds %v (%v): the pods' files must be on the node only", journalDir, ents, err)
	}

	// inspect reads the functions' state (HAProxy's pid file) through the agent.
	info, err := d.Inspect(context.Background(), p.Lab)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range info.Nodes {
		if n.Error != "" {
			t.Errorf("inspect node %s: %s", n.Name, n.Error)
		}
	}
}
