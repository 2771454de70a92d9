package kubernetes_test

import (
	"context"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/probe"
	iperf3probe "github.com/sfclab/sfclab/probe/iperf3"
	"github.com/sfclab/sfclab/runtime/kubernetes"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf"
	"github.com/sfclab/sfclab/vnf/httpserver"
)

// foreignLab is study A's fw-lb lab (examples/fw-lb.yaml: client -> iptables firewall ->
// HAProxy -> server) with an nginx origin as its server: two kinds that write files (Apache
// in a pod: TestBenchOnCluster).
const foreignLab = `name: k8r-far
runtime: kubernetes
links: bridge
endpoints:
  client: {kind: client}
  server:
    kind: http-server
    http: {server: nginx, port: 80, objects: [1k, 100k]}
functions:
  fw:
    kind: firewall
    params:
      backend: iptables
      masquerade: true
      rules:
        - {action: deny, protocol: tcp, port: 9999}
  lb:
    kind: l4lb
    params: {impl: haproxy, port: 5201, splice: true, threads: 1}
chains:
  - name: web
    from: client
    to: server
    classifier: {protocol: tcp, destination_port: 5201}
    hops: [fw, lb]
`

// TestForeignNode deploys foreignLab with the cluster's only node treated as another
// machine's (Runtime.ForeignNodes): there is no second machine here, so sfclab must not see
// the pods' files, and it does not write them: the pods mount the lab's directory on the node
// (NodeStateRoot/LAB, made by the agent), never the journal's node directory, and HAProxy's
// and nginx's configuration, objects, pid files and logs (and an iperf3 server's log) are
// written and read there by the agent. nginx's readiness GET goes through the agent
// (vnf.Exchanger: the image has no wget). iperf3 crosses the firewall and HAProxy to the
// server, a GET of an object from HAProxy's node reaches nginx; the files are in the node's lab
// directory and the journal's node directory stays empty; the pods cannot be entered (Do),
// so the probes take them for guests; destroy leaves nothing on the node or in the cluster.
func TestForeignNode(t *testing.T) {
	requireCluster(t)
	d := deployer(t)
	rt := d.Runtimes[spec.RuntimeKubernetes].(kubernetes.Runtime)
	rt.ForeignNodes = []string{"localhost"}
	d.Runtimes[spec.RuntimeKubernetes] = rt
	file := filepath.Join(t.TempDir(), "far.yaml")
	if err := os.WriteFile(file, []byte(foreignLab), 0o644); err != nil {
		t.Fatal(err)
	}
	lab := loadLab(t, file, "k8r-far", spec.RuntimeKubernetes)
	onNode := filepath.Join(kubernetes.NodeStateRoot, lab.Name)
	if _, err := os.Stat(onNode); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s exists before the deploy: %v", onNode, err)
	}
	_, rootErr := os.Stat(kubernetes.NodeStateRoot)
	// Registered before deployed's destroy, so checked after it.
	t.Cleanup(func() {
		if _, err := os.Stat(onNode); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the lab's directory on the node is left after destroy: %v", err)
			os.RemoveAll(onNode)
		}
		if _, err := os.Stat(kubernetes.NodeStateRoot); errors.Is(rootErr, fs.ErrNotExist) && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s, made for the lab, is left after destroy: %v", kubernetes.NodeStateRoot, err)
			os.Remove(kubernetes.NodeStateRoot)
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

	// HAProxy's and nginx's files are on the node, where the pods see them at the
	// journal's path.
	for _, f := range []string{"lb.haproxy.cfg", "lb.haproxy.pid", "lb.haproxy.log",
		"server.www/nginx.conf", "server.www/daemon.pid", "server.www/server.log", "server.www/objects/obj-1k", "server.www/objects/obj-100k"} {
		if _, err := os.Stat(filepath.Join(onNode, f)); err != nil {
			t.Errorf("%s is not in the node's lab directory: %v", f, err)
		}
	}
	if st, err := os.Stat(filepath.Join(onNode, "server.www/objects/obj-100k")); err != nil || st.Size() != 100<<10 || !st.ModTime().Equal(httpserver.ObjectTime) {
		t.Errorf("object 100k on the node: %v %v, want %d bytes dated %s", st, err, 100<<10, httpserver.ObjectTime)
	}
	cfg, err := os.ReadFile(filepath.Join(onNode, "lb.haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	inPod, err := lb.Output(ctx, nil, "cat", filepath.Join(journalDir, "lb.haproxy.cfg"))
	if err != nil || string(inPod) != string(cfg) || !strings.Contains(string(cfg), "frontend sfclab_in") {
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
	// The iperf3 probe's server in a pod on another machine is a guest's: found listening
	// with ss (the image has no netstat) and stopped through the agent.
	srv, err := iperf3probe.StartServer(server, "server", 5202, filepath.Join(journalDir, "iperf3-probe-5202.log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := iperf3probe.WaitServers(ctx, []iperf3probe.Server{srv}); err != nil {
		t.Errorf("the iperf3 probe's server in a pod on another machine: %v", err)
	}
	if err := iperf3probe.StopServers([]iperf3probe.Server{srv}); err != nil {
		t.Errorf("stop the iperf3 probe's server: %v", err)
	}
	if _, err := os.Stat(filepath.Join(onNode, "iperf3-probe-5202.log")); err != nil {
		t.Errorf("the probe's server log is not in the node's lab directory: %v", err)
	}

	if ents, err := os.ReadDir(journalDir); err != nil || len(ents) > 0 {
		t.Errorf("sfclab's journal node directory %s holds %v (%v): the pods' files must be on the node only", journalDir, ents, err)
	}

	// A GET from HAProxy's node (the client has no route to the origin: HAProxy is its
	// target) reaches nginx over their segment, through the agent (no HTTP client in the
	// image, no entering the pod).
	origin := p.Node("server").Interfaces[0].Address.Addr()
	reply, err := lb.(vnf.Exchanger).Exchange(ctx, netip.AddrPortFrom(origin, 80).String(), []byte("GET /obj-100k HTTP/1.0\r\n\r\n"), 0, 10*time.Second)
	if err != nil || !strings.HasPrefix(string(reply), "HTTP/1.1 200") || !strings.Contains(string(reply), "Content-Length: 102400") || len(reply) < 100<<10 {
		t.Errorf("GET /obj-100k from lb: %v (%d bytes)\n%.300s", err, len(reply), reply)
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
