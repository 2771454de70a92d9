package kubernetes_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/runtime/docker"
	"github.com/sfclab/sfclab/runtime/kubernetes"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// containerdSock is the test cluster's containerd (scripts/kubecluster/env.sh).
const containerdSock = "/run/sfclab-kube/containerd.sock"

// TestLabImage: a lab's docker.image runs in every pod of a kubernetes lab. The image is
// sfclab's node image under another name, tagged in the cluster's containerd (no copy: the
// cheapest image that is not sfclab's by name), k8simage/own:1.
//   - A lab client - fw (nft firewall) - server with that image: every pod's spec runs it, the
//     programs check passes, ping crosses the firewall (TTL 63).
//   - The same lab with a run command needing tcpdump (the node image has none): refused
//     after the pods start, before any function is set up, naming tcpdump, the node needing
//     it and what to do; the deploy unwinds, nothing is left in the cluster or on the host.
//   - An image that is on no node: refused before anything is created, with the import hint
//     naming it.
//
// Cost: one tag, two deploys of three pods (one unwound), one refused plan.
func TestLabImage(t *testing.T) {
	requireCluster(t)
	const own = "docker.io/k8simage/own:1"
	src := "docker.io/" + docker.DefaultImage()
	if out, err := exec.Command("ctr", "-a", containerdSock, "-n", "k8s.io", "images", "tag", "--force", src, own).CombinedOutput(); err != nil {
		t.Fatalf("ctr images tag %s %s: %v: %s", src, own, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ctr", "-a", containerdSock, "-n", "k8s.io", "images", "rm", own).CombinedOutput(); err != nil {
			t.Errorf("ctr images rm %s: %v: %s", own, err, out)
		}
	})
	// Placement reads a node's images from its status, which the kubelet refreshes on its
	// own period (its image cache every 30 s, the node status every 10 s).
	t0 := time.Now()
	for {
		out, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, "get", "nodes", "-o", "jsonpath={.items[*].status.images[*].names}").CombinedOutput()
		if err == nil && strings.Contains(string(out), own) {
			break
		}
		if time.Since(t0) > 2*time.Minute {
			t.Fatalf("the nodes' status does not list %s after %s: %v %s", own, time.Since(t0).Round(time.Second), err, out)
		}
		time.Sleep(time.Second)
	}
	t.Logf("the node lists %s %s after the tag", own, time.Since(t0).Round(time.Second))
	const labYAML = `name: NAME
runtime: kubernetes
docker: {image: IMAGE}
endpoints:
  client: {kind: client}
  server: {kind: server}
functions:
  fw: {kind: firewall}
chains:
  - {name: c, from: client, to: server, hops: [fw]}
`
	load := func(name, image, extra string) (*spec.Lab, string) {
		file := filepath.Join(t.TempDir(), "lab.yaml")
		y := strings.NewReplacer("NAME", name, "IMAGE", image).Replace(labYAML)
		if extra != "" {
			y = strings.Replace(y, "server: {kind: server}", "server: {kind: server, "+extra+"}", 1)
		}
		if err := os.WriteFile(file, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		lab, err := spec.Load(file, kinds.Spec())
		if err != nil {
			t.Fatal(err)
		}
		return lab, file
	}
	d := deployer(t)

	t.Run("runs", func(t *testing.T) {
		lab, _ := load("k8simg-own", "k8simage/own:1", "")
		p, _ := deployed(t, d, lab)
		for _, n := range p.Nodes {
			out, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, "-n", kubernetes.Namespace(p.Lab), "get", "pod", n.Name,
				"-o", "jsonpath={.spec.containers[0].image}").CombinedOutput()
			if err != nil || string(out) != "k8simage/own:1" {
				t.Errorf("pod %s runs image %q (%v), want k8simage/own:1", n.Name, out, err)
			}
		}
		c := p.Chains[0]
		if got := pingTTL(t, node(t, d, p, c.From), c.Target); got != 63 {
			t.Errorf("ping %s through the firewall: TTL %d, want 63", c.Target, got)
		}
	})

	refused := func(t *testing.T, lab *spec.Lab, file string, want ...string) {
		t.Helper()
		p, err := deployRefused(t, d, lab, file, "deploy")
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q\ndoes not contain %q", err, w)
			}
		}
		checkLabGone(t, p.Lab, "the refused deploy")
	}
	t.Run("missing program", func(t *testing.T) {
		lab, file := load("k8simg-miss", "k8simage/own:1", `run: ["tcpdump -i eth0 -w /dev/null"]`)
		refused(t, lab, file, "check programs in image k8simage/own:1: missing: tcpdump (needed by server); add them to the image", "remove docker.image")
	})
	t.Run("absent", func(t *testing.T) {
		lab, file := load("k8simg-abs", "k8simage/absent:1", "")
		refused(t, lab, file, "image k8simage/absent:1 (the lab's docker.image, which its pods run) is not on Kubernetes node", "docker save k8simage/absent:1 | ctr -n k8s.io images import -")
	})
}
