// Package kubernetes is the kubernetes runtime: every node of a lab is a Pod of a Kubernetes
// cluster (namespace sfclab-LAB, pod NODE, container "node" running sfclab's node image),
// placed on the Kubernetes node its `host:` names. Everything created carries the labels
// sfclab.managed=true and sfclab.lab=LAB, which is all Destroy and `destroy --all` go by.
//
// Everything that goes into the pods' namespaces or onto their node is done by the sfclab
// agent, a DaemonSet on every node (agent.go), asked through the API server's exec: it names
// each pod's network namespace as a netns node's (/run/netns/sfc.LAB.NODE), wires the
// segments between them as the netns runtime does, or builds the emulated hosts and ports
// (package hosts) and attaches the steering programs (package steer) of a transparent lab;
// it writes the pods' addresses, sysctls, routes and rules (deploy.RemoteNodes), makes
// transparent functions bumps in the wire, writes and reads the steering maps, runs the
// kinds' commands and daemons in the pods (Node), and destroy has it remove what it made.
// sfclab's own process opens no pod's namespace for any of this (TestRoutedChain6 and
// TestTransparent deploy under a guard that proves it); only the probes' Go code enters a pod
// on sfclab's own machine (Node.Do).
// A lab placed on several Kubernetes nodes (one emulated host each) is wired by each node's
// agent building its own host, with VXLAN between the nodes' InternalIPs (halves.go). Pods on
// this machine mount the lab's node directory, where the kinds write their configuration
// files; a pod on another machine's node mounts the lab's directory on its node instead, and
// the kinds' files there are written and read by the agent (remote.go, RemoteNode).
//
// Commands run inside a pod's container through its namespaces (nsenter, by the agent on its
// node); `sfclab exec` goes through the API server's exec (kubectl exec).
package kubernetes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sfclab/sfclab/hosts"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/docker"
	"github.com/sfclab/sfclab/sfc"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/steer"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// Runtime is the kubernetes runtime.
type Runtime struct {
	// Kubeconfig is the kubeconfig file; "" means KubeconfigPath().
	Kubeconfig string
	// StateRoot is the deployer's journal root, whose node directory is mounted into pods at
	// the same path ("" = the default root).
	StateRoot string
	// Image is the pods' image; "" means sfclab's node image (docker.DefaultImage).
	Image string
	// ForeignNodes names Kubernetes nodes to treat as another machine's even when they are
	// this machine's (the tests: the project has one machine). Their pods mount the lab's
	// directory on the node (NodeStateRoot/LAB, made by the agent), never the journal's node
	// directory, the kinds' files there are written and read by the agent (RemoteNode,
	// vnf.Files), and Do refuses their pods, as for a node of another machine.
	ForeignNodes []string
	// Log receives what a deploy did on the cluster's nodes beside building the lab, for the
	// user's terminal: the destroyed labs' state it swept from them (sweepNodes); nil means
	// silent.
	Log func(format string, args ...any)
}

func (r Runtime) logf(format string, args ...any) {
	if r.Log != nil {
		r.Log(format, args...)
	}
}

// Labels on everything the runtime creates.
const (
	LabelManaged = "sfclab.managed"
	LabelLab     = "sfclab.lab"
	LabelNode    = "sfclab.node"
)

// ContainerName is the name of the container in every node's pod.
const ContainerName = "node"

// PodTimeout bounds the wait for a lab's pods to run, and for its namespace to go.
var PodTimeout = 2 * time.Minute

// Name is "kubernetes".
func (Runtime) Name() string { return spec.RuntimeKubernetes }

// Namespace is the Kubernetes namespace of a lab.
func Namespace(lab string) string { return "sfclab-" + lab }

func (r Runtime) kubeconfig() string {
	if r.Kubeconfig != "" {
		return r.Kubeconfig
	}
	return KubeconfigPath()
}

func (r Runtime) client() (*client, error) { return loadClient(r.kubeconfig()) }

// image is sfclab's node image, which the agent runs (and every pod of a lab without its own).
func (r Runtime) image() string {
	if r.Image != "" {
		return r.Image
	}
	return docker.DefaultImage()
}

// podImage is the image the pods of a lab run: the lab's own (docker.image), or sfclab's
// node image.
func (r Runtime) podImage(p *plan.Plan) string {
	if p.Image != "" {
		return p.Image
	}
	return r.image()
}

// journal is the deployer's journal (its root r.StateRoot, or the default).
func (r Runtime) journal() journal.Journal {
	root := r.StateRoot
	if root == "" {
		root = journal.StateRoot()
	}
	return journal.Journal{Root: root}
}

// nodeDir is the journal's node directory of a lab, mounted into its pods.
func (r Runtime) nodeDir(lab string) string { return r.journal().NodeDir(lab) }

// unreachable turns a cluster that does not answer into "nothing here" for labs the journal
// does not record as kubernetes labs (destroying a netns lab must not need a cluster that a
// kubeconfig names but that is down), and into the error for labs that are (or whose journal
// is gone: then only the cluster can say).
func (r Runtime) unreachable(lab string, err error) error {
	var u *unreachable
	if errors.As(err, &u) && r.labKnownElsewhere(lab) {
		return nil
	}
	return err
}

// labKnownElsewhere says whether the journal records lab on another runtime.
func (r Runtime) labKnownElsewhere(lab string) bool {
	p, err := r.journal().ReadPlan(lab)
	return err == nil && p.Runtime != spec.RuntimeKubernetes
}

// Reachable checks that the cluster answers; the error is one line naming the kubeconfig
// and the server.
func (r Runtime) Reachable(ctx context.Context) error {
	c, err := r.client()
	if err != nil {
		return err
	}
	var v struct{ GitVersion string }
	return c.do(ctx, "GET", "/version", nil, nil, &v)
}

// Describe names the cluster a run measured on, for the run's environment: the API server's
// version, its URL, the Kubernetes nodes and their kubelets, e.g. "v1.34.4 at
// https://127.0.0.1:16443, nodes: localhost (kubelet v1.34.4)".
func (r Runtime) Describe(ctx context.Context) (string, error) {
	c, err := r.client()
	if err != nil {
		return "", err
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := c.do(ctx, "GET", "/version", nil, nil, &v); err != nil {
		return "", err
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Status struct {
				NodeInfo struct {
					KubeletVersion string `json:"kubeletVersion"`
				} `json:"nodeInfo"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := c.do(ctx, "GET", "/api/v1/nodes", nil, nil, &list); err != nil {
		return "", err
	}
	var nodes []string
	for _, n := range list.Items {
		nodes = append(nodes, fmt.Sprintf("%s (kubelet %s)", n.Metadata.Name, n.Status.NodeInfo.KubeletVersion))
	}
	return fmt.Sprintf("%s at %s, nodes: %s", v.GitVersion, c.Server, strings.Join(nodes, ", ")), nil
}

// Nodes lists the names of the cluster's nodes, sorted.
func (r Runtime) Nodes(ctx context.Context) ([]string, error) {
	c, err := r.client()
	if err != nil {
		return nil, err
	}
	var list struct{ Items []*kubeNode }
	if err := c.do(ctx, "GET", "/api/v1/nodes", nil, nil, &list); err != nil {
		return nil, fmt.Errorf("list Kubernetes nodes: %w", err)
	}
	var names []string
	for _, n := range list.Items {
		names = append(names, n.Metadata.Name)
	}
	slices.Sort(names)
	return names, nil
}

// kubeNode is the part of a Kubernetes Node the runtime reads.
type kubeNode struct {
	Metadata struct {
		Name              string            `json:"name"`
		Labels            map[string]string `json:"labels"`
		DeletionTimestamp *string           `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		Taints []taint `json:"taints"`
	} `json:"spec"`
	Status struct {
		Addresses []struct {
			Type    string `json:"type"`
			Address string `json:"address"`
		} `json:"addresses"`
		Images []struct {
			Names []string `json:"names"`
		} `json:"images"`
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
		NodeInfo struct {
			BootID string `json:"bootID"`
		} `json:"nodeInfo"`
	} `json:"status"`
}

// internalIP returns the node's InternalIP (its underlay: the agents' VXLAN devices use it).
func (n *kubeNode) internalIP() (netip.Addr, bool) {
	for _, a := range n.Status.Addresses {
		if a.Type == "InternalIP" {
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				return ip, true
			}
		}
	}
	return netip.Addr{}, false
}

// sameKernel reports whether the Kubernetes node runs on this machine's kernel (its boot ID
// is this machine's): another kubelet on this machine, e.g. in a network namespace of its
// own, whose pods share sfclab's file system (the lab's node directory).
func (n *kubeNode) sameKernel() bool {
	id, err := bootID()
	return err == nil && id != "" && n.Status.NodeInfo.BootID == id
}

// bootID is this machine's boot ID: its kernel's, new at every boot.
func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b)), err
}

func (n *kubeNode) ready() bool { return n.readyCondition() == "Ready=True" }

// readyCondition says the node's Ready condition as Ready=STATUS (True, False, Unknown: the
// node controller's word for a kubelet that stopped reporting), or that it has none.
func (n *kubeNode) readyCondition() string {
	for _, c := range n.Status.Conditions {
		if c.Type == "Ready" {
			return "Ready=" + c.Status
		}
	}
	return "no Ready condition"
}

// hasImage reports whether the node's image list has ref (Docker Hub short names are
// normalized as the container runtime does).
func (n *kubeNode) hasImage(ref string) bool {
	full := normalizeRef(ref)
	for _, im := range n.Status.Images {
		for _, name := range im.Names {
			if name == ref || name == full {
				return true
			}
		}
	}
	return false
}

// normalizeRef writes a short image reference in full: sfclab/node:T is
// docker.io/sfclab/node:T, as containerd stores it.
func normalizeRef(ref string) string {
	first, _, found := strings.Cut(ref, "/")
	if !found {
		return "docker.io/library/" + ref
	}
	if strings.ContainsAny(first, ".:") || first == "localhost" {
		return ref
	}
	return "docker.io/" + ref
}

// local reports whether the Kubernetes node is this machine: one of its addresses is one of
// this machine's, or its hostname is this machine's.
func (n *kubeNode) local(hostname string, addrs []netip.Addr) bool {
	for _, a := range n.Status.Addresses {
		switch a.Type {
		case "Hostname":
			if a.Address == hostname {
				return true
			}
		case "InternalIP", "ExternalIP":
			if ip, err := netip.ParseAddr(a.Address); err == nil && slices.Contains(addrs, ip) {
				return true
			}
		}
	}
	return false
}

// machine returns this machine's hostname and addresses (host network namespace).
func machine() (string, []netip.Addr) {
	host, _ := os.Hostname()
	var out []netip.Addr
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				out = append(out, p.Addr())
			}
		}
	}
	return host, out
}

// placement maps each plan node to its Kubernetes node: the one its host names, or this
// machine's. It refuses, before anything is created, a host that names no Kubernetes node
// (at the host's place in the lab file), a node that is not Ready, a node without an
// InternalIP in a lab on several nodes (its VXLAN underlay) and an image absent on a node.
// A node of another machine is accepted: its pods mount the lab's directory on that node
// (RemoteNode).
func (r Runtime) placement(ctx context.Context, c *client, p *plan.Plan) (map[string]string, error) {
	var list struct{ Items []*kubeNode }
	if err := c.do(ctx, "GET", "/api/v1/nodes", nil, nil, &list); err != nil {
		return nil, fmt.Errorf("list Kubernetes nodes: %w", err)
	}
	byName := map[string]*kubeNode{}
	var names []string
	for _, n := range list.Items {
		byName[n.Metadata.Name] = n
		names = append(names, n.Metadata.Name)
	}
	slices.Sort(names)
	hostname, addrs := machine()
	localName := ""
	for _, n := range list.Items {
		if n.local(hostname, addrs) || n.Metadata.Name == "localhost" {
			localName = n.Metadata.Name
			break
		}
	}
	written := map[string]bool{} // hosts the file lists; an implicit one is this machine
	for _, h := range p.AllHosts() {
		if !placeRE.MatchString(h.Where) {
			continue // no line: the default host of a transparent lab
		}
		written[h.Name] = true
		if byName[h.Name] != nil {
			continue
		}
		return nil, fmt.Errorf("%s: host %s: no such Kubernetes node (the cluster has %s); a host of a kubernetes lab names a node of `kubectl get nodes`", h.Where, h.Name, strings.Join(names, ", "))
	}
	out := map[string]string{}
	used := map[string]bool{}
	for _, n := range p.Nodes {
		kn := n.Host
		if !written[kn] {
			if localName == "" {
				return nil, fmt.Errorf("place node %s: none of the cluster's nodes (%s) is this machine, where a lab without hosts: is placed: name the Kubernetes nodes in the lab's hosts:", n.Name, strings.Join(names, ", "))
			}
			kn = localName
		}
		out[n.Name] = kn
		used[kn] = true
	}
	images := []string{r.podImage(p)}
	if images[0] != r.image() {
		images = append(images, r.image()) // the agent's
	}
	for kn := range used {
		n := byName[kn]
		if _, ok := n.internalIP(); !ok && len(used) > 1 {
			return nil, fmt.Errorf("place lab %s on Kubernetes node %s: the node has no InternalIP, which the lab's VXLAN devices between its nodes use", p.Lab, kn)
		}
		if !n.ready() || n.Metadata.DeletionTimestamp != nil {
			state := "is not Ready (" + n.readyCondition() + ")"
			if n.Metadata.DeletionTimestamp != nil {
				state = "is being deleted"
			}
			return nil, fmt.Errorf("%splace lab %s on Kubernetes node %s: the node %s: no pod of the lab can run there; place its hosts on Ready nodes (kubectl get nodes)", hostPlace(p, kn), p.Lab, kn, state)
		}
		for i, image := range images {
			if n.hasImage(image) {
				continue
			}
			what := "sfclab's node image: the lab's pods and the sfclab agent run it"
			if i > 0 {
				what = "sfclab's node image, which the sfclab agent runs"
			} else if p.Image != "" {
				what = "the lab's docker.image, which its pods run"
			}
			return nil, fmt.Errorf("image %s (%s) is not on Kubernetes node %s (pods do not pull it): import it there, e.g. `docker save %s | ctr -n k8s.io images import -` on the node, or push it to a registry the node pulls from and set the image", image, what, kn, image)
		}
	}
	return out, nil
}

// hostPlace is "FILE:LINE:COL: host H: " for the host of p's lab file that names Kubernetes
// node kn, or "" when no written host names it.
func hostPlace(p *plan.Plan, kn string) string {
	for _, h := range p.AllHosts() {
		if h.Name == kn && placeRE.MatchString(h.Where) {
			return h.Where + ": host " + h.Name + ": "
		}
	}
	return ""
}

// placeRE matches the end of a place in a lab file (FILE:LINE or FILE:LINE:COL).
var placeRE = regexp.MustCompile(`:[0-9]+(:[0-9]+)?$`)

// Preflight checks, before anything is created, that the cluster answers, that every node
// can be placed (see placement), that no node takes a device of a host (attachment drivers
// other than veth are the netns and docker runtimes') and that the lab's namespace is free
// (it waits for one the cluster is removing).
func (r Runtime) Preflight(ctx context.Context, p *plan.Plan) error {
	c, err := r.client()
	if err != nil {
		return err
	}
	for _, n := range p.Nodes {
		if n.Driver != nil {
			return fmt.Errorf("node %s: attachment driver %s: the kubernetes runtime wires veths only", n.Name, n.Driver.Type)
		}
	}
	// Shaping is written by sfclab through the namespaces (tc qdiscs), which it does not
	// enter on this runtime: the agent has no request for it yet.
	for _, s := range p.Segments {
		if s.Shape != nil {
			return fmt.Errorf("segment %s: shaping (%s) is not done on the kubernetes runtime yet: the sfclab agent sets the pods' namespaces, and it has no request for queueing disciplines", s.Name, s.Shape)
		}
	}
	for _, h := range p.AllHosts() {
		if h.Link != nil {
			return fmt.Errorf("host %s: a shaped link (%s) is not done on the kubernetes runtime yet: the sfclab agent has no request for queueing disciplines", h.Name, h.Link)
		}
	}
	if _, err := r.placement(ctx, c, p); err != nil {
		return err
	}
	found, deleting, err := getNamespace(ctx, c, Namespace(p.Lab))
	switch {
	case err != nil:
		return err
	case deleting:
		// A lab of the same name destroyed moments ago: the cluster removes its namespace.
		if err := waitNamespaceGone(ctx, c, Namespace(p.Lab)); err != nil {
			return fmt.Errorf("namespace %s of a destroyed lab %s is still being deleted by the cluster (kubectl get namespace %s -o yaml): %w", Namespace(p.Lab), p.Lab, Namespace(p.Lab), err)
		}
	case found:
		return fmt.Errorf("namespace %s exists already: destroy lab %s first (sfclab destroy %s)", Namespace(p.Lab), p.Lab, p.Lab)
	}
	return nil
}

// Leftovers lists the lab's namespace when the cluster has it, unless it is being deleted with
// no pod left in it (the cluster removes it: Destroy does not wait for that); without a
// kubeconfig there is no cluster and nothing.
func (r Runtime) Leftovers(ctx context.Context, lab string) ([]string, error) {
	c, err := r.client()
	if errors.Is(err, errNoKubeconfig) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	found, deleting, err := getNamespace(ctx, c, Namespace(lab))
	if err != nil {
		return nil, r.unreachable(lab, err)
	}
	if !found {
		return nil, nil
	}
	if deleting {
		// The cluster removes the namespace and its content (destroy deleted it): only pods
		// still in it are left to remove.
		var list struct{ Items []struct{} }
		if err := c.do(ctx, "GET", "/api/v1/namespaces/"+Namespace(lab)+"/pods", nil, nil, &list); err != nil && !isNotFound(err) {
			return nil, err
		}
		if len(list.Items) == 0 {
			return nil, nil
		}
		return []string{fmt.Sprintf("namespace %s (being deleted, %d pods in it)", Namespace(lab), len(list.Items))}, nil
	}
	return []string{"namespace " + Namespace(lab)}, nil
}

// Labs lists the labs whose namespaces the cluster has (by label), not being deleted, for
// `destroy --all`.
func (r Runtime) Labs(ctx context.Context) ([]string, error) {
	c, err := r.client()
	if errors.Is(err, errNoKubeconfig) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Labels            map[string]string `json:"labels"`
				DeletionTimestamp *string           `json:"deletionTimestamp"`
			} `json:"metadata"`
		}
	}
	q := url.Values{"labelSelector": {LabelManaged + "=true"}}
	if err := c.do(ctx, "GET", "/api/v1/namespaces", q, nil, &list); err != nil {
		return nil, err
	}
	var out []string
	for _, ns := range list.Items {
		// A namespace being deleted is a destroyed lab's (Destroy deleted its pods): the
		// cluster removes it.
		if l := ns.Metadata.Labels[LabelLab]; l != "" && ns.Metadata.DeletionTimestamp == nil {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out, nil
}

// InterfacesAfterSysctls is true: Link creates every interface, as the netns runtime does.
func (Runtime) InterfacesAfterSysctls() bool { return true }

// podSpec is the pod of a node: the lab's image (podImage) sleeping, pinned to its Kubernetes node, with
// the lab's node directory (and the sfclab program when its function runs it) mounted at the
// same paths as on the host, no service account token, no grace period. The node directory's
// content is hostDir on the Kubernetes node: nodeDir itself on this machine, the lab's
// directory there (nodeLabDir) on another machine's node.
func (r Runtime) podSpec(p *plan.Plan, n *plan.Node, kubeNode, nodeDir, hostDir, self string) map[string]any {
	labels := map[string]string{LabelManaged: "true", LabelLab: p.Lab, LabelNode: n.Name}
	mounts := []map[string]any{{"name": "nodedir", "mountPath": nodeDir}}
	volumes := []map[string]any{{"name": "nodedir", "hostPath": map[string]any{"path": hostDir, "type": "Directory"}}}
	if self != "" {
		mounts = append(mounts, map[string]any{"name": "sfclab", "mountPath": docker.SfclabPath, "readOnly": true})
		volumes = append(volumes, map[string]any{"name": "sfclab", "hostPath": map[string]any{"path": self, "type": "File"}})
	}
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": n.Name, "namespace": Namespace(p.Lab), "labels": labels},
		"spec": map[string]any{
			"nodeName":                      kubeNode,
			"restartPolicy":                 "Never",
			"automountServiceAccountToken":  false,
			"enableServiceLinks":            false,
			"terminationGracePeriodSeconds": 0,
			"containers": []map[string]any{{
				"name":            ContainerName,
				"image":           r.podImage(p),
				"imagePullPolicy": "IfNotPresent",
				"command":         []string{"sleep", "infinity"},
				"securityContext": map[string]any{"capabilities": map[string]any{"add": []string{"NET_ADMIN", "NET_RAW"}}},
				"volumeMounts":    mounts,
			}},
			"volumes": volumes,
		},
	}
}

// podStatus is the part of a pod the runtime reads.
type podStatus struct {
	Metadata struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		NodeName string `json:"nodeName"`
	} `json:"spec"`
	Status struct {
		Phase             string `json:"phase"`
		Message           string `json:"message"`
		ContainerStatuses []struct {
			Name        string `json:"name"`
			ContainerID string `json:"containerID"`
			State       struct {
				Running *struct{} `json:"running"`
				Waiting *struct {
					Reason  string `json:"reason"`
					Message string `json:"message"`
				} `json:"waiting"`
				Terminated *struct {
					Reason   string `json:"reason"`
					ExitCode int    `json:"exitCode"`
				} `json:"terminated"`
			} `json:"state"`
		} `json:"containerStatuses"`
	} `json:"status"`
}

// running returns the pod's container ID once it runs; an error when it cannot run.
func (ps *podStatus) running(image string) (string, error) {
	for _, cs := range ps.Status.ContainerStatuses {
		if cs.Name != ContainerName {
			continue
		}
		switch {
		case cs.State.Running != nil:
			_, id, _ := strings.Cut(cs.ContainerID, "://")
			return id, nil
		case cs.State.Waiting != nil:
			switch cs.State.Waiting.Reason {
			case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName":
				return "", fmt.Errorf("pod %s on node %s: image %s: %s (%s): import it on the node (docker save %s | ctr -n k8s.io images import -) or push it to a registry the node pulls from", ps.Metadata.Name, ps.Spec.NodeName, image, cs.State.Waiting.Reason, cs.State.Waiting.Message, image)
			case "CreateContainerConfigError", "CreateContainerError", "RunContainerError", "CrashLoopBackOff":
				return "", fmt.Errorf("pod %s on node %s: %s: %s", ps.Metadata.Name, ps.Spec.NodeName, cs.State.Waiting.Reason, cs.State.Waiting.Message)
			}
		case cs.State.Terminated != nil:
			return "", fmt.Errorf("pod %s on node %s: its container ended (%s, exit code %d)", ps.Metadata.Name, ps.Spec.NodeName, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
		}
	}
	if ps.Status.Phase == "Failed" {
		return "", fmt.Errorf("pod %s on node %s failed: %s", ps.Metadata.Name, ps.Spec.NodeName, ps.Status.Message)
	}
	return "", nil
}

// CreateNodes creates the lab's namespace and a pod per node, waits until they run, and has
// the sfclab agent on their node name each pod's network namespace as the node's netns
// (sfc.LAB.NODE). Undo asks the agents to remove everything they made for the lab (the
// names, and what Link, BuildHosts and AttachSteering make later), then deletes the namespace.
// Equivalent to: kubectl create namespace sfclab-LAB; kubectl apply -f pods.yaml;
// kubectl wait --for=condition=Ready pod --all; kubectl exec AGENT -- sfclab agent attach
func (r Runtime) CreateNodes(ctx context.Context, p *plan.Plan, undo runtime.Undo) (map[string]*netdev.NS, error) {
	c, err := r.client()
	if err != nil {
		return nil, err
	}
	where, err := r.placement(ctx, c, p)
	if err != nil {
		return nil, err
	}
	nodeDir := r.nodeDir(p.Lab)
	if _, err := os.Stat(nodeDir); err != nil {
		return nil, fmt.Errorf("find node directory %s to mount into pods (Runtime.StateRoot must be the Deployer's journal root): %w", nodeDir, err)
	}
	ns := Namespace(p.Lab)
	nsObj := map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": ns, "labels": map[string]string{LabelManaged: "true", LabelLab: p.Lab}}}
	var created struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	if err := c.do(ctx, "POST", "/api/v1/namespaces", nil, nsObj, &created); err != nil {
		return nil, fmt.Errorf("create namespace %s: %w", ns, err)
	}
	undo.Push("namespace "+ns, func() error { return deleteNamespace(context.Background(), c, ns, false) })
	// The ServiceAccount admission refuses pods until the namespace's default account exists.
	if err := poll(ctx, PodTimeout, func() (bool, error) {
		err := c.do(ctx, "GET", "/api/v1/namespaces/"+ns+"/serviceaccounts/default", nil, nil, nil)
		if isNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}); err != nil {
		return nil, fmt.Errorf("wait for service account default in %s: %w", ns, err)
	}
	// The sfclab program: the agent runs it, and pods whose function runs it mount it.
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the sfclab program for the agent and the pods: %w", err)
	}
	// The agent on every node the lab uses, made ready while the pods are created.
	var kubeNodes []string
	for _, kn := range where {
		if !slices.Contains(kubeNodes, kn) {
			kubeNodes = append(kubeNodes, kn)
		}
	}
	slices.Sort(kubeNodes)
	// The agent's names under /run/netns reach this machine only if it is a shared mount
	// point before the agent's pod mounts it.
	if err := netdev.ShareNetnsDir(); err != nil {
		return nil, fmt.Errorf("make %s a shared mount for the sfclab agent: %w", netdev.NetnsDir, err)
	}
	foreign, err := r.foreignNodes(ctx, c, kubeNodes)
	if err != nil {
		return nil, err
	}
	var agents map[string]string
	agentErr := make(chan error, 1)
	go func() {
		var err error
		agents, err = r.ensureAgent(ctx, c, self, kubeNodes)
		agentErr <- err
	}()
	waited, agentsErr := false, error(nil)
	waitAgents := func() error {
		if !waited {
			waited, agentsErr = true, <-agentErr
		}
		return agentsErr
	}
	undoOnNodes := false
	if len(foreign) > 0 {
		// Pods on another machine mount the lab's directory there, which the agent makes
		// first (and its destroy, the undo, removes).
		if err := waitAgents(); err != nil {
			return nil, err
		}
		undo.Push("the lab's state on its nodes", func() error { return destroyOnNodes(context.Background(), c, p.Lab) })
		undoOnNodes = true
		for _, kn := range slices.Sorted(maps.Keys(foreign)) {
			req := AgentFilesRequest{Op: FileMkdir, Lab: p.Lab, Path: "."}
			if err := agentCall(ctx, c, kn, agents[kn], AgentFiles, req, nil); err != nil {
				return nil, fmt.Errorf("make the directory of lab %s on Kubernetes node %s: %w", p.Lab, kn, err)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(p.Nodes))
	sem := make(chan struct{}, 8)
	for i, n := range p.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			s := ""
			if docker.RunsSfclab(n) {
				s = self
			}
			hostDir := nodeDir
			if foreign[where[n.Name]] {
				hostDir = nodeLabDir(p.Lab)
			}
			if err := c.do(ctx, "POST", "/api/v1/namespaces/"+ns+"/pods", nil, r.podSpec(p, n, where[n.Name], nodeDir, hostDir, s), nil); err != nil {
				errs[i] = fmt.Errorf("create pod %s: %w", n.Name, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errors.Join(errs...), waitAgents()); err != nil {
		return nil, err
	}
	ids, err := r.waitRunning(ctx, c, p)
	if err != nil {
		return nil, err
	}
	// What destroyed labs left on these nodes while they were away goes first.
	if err := r.sweepNodes(ctx, c, agents); err != nil {
		return nil, err
	}
	// The agent on each pod's node names the pod's network namespace (sfc.LAB.NODE) and
	// deletes its pod-network interface; the names propagate to the node's /run/netns.
	reqs := map[string]AgentRequest{}
	for _, n := range p.Nodes {
		kn := where[n.Name]
		rq := reqs[kn]
		rq.Lab, rq.UID = p.Lab, created.Metadata.UID
		rq.Pods = append(rq.Pods, AgentPod{Node: n.Name, Netns: n.Netns, Container: ids[n.Name]})
		reqs[kn] = rq
	}
	// What the agents make for the lab from here on (names, segments, hosts, steering) is
	// removed by them, also when an agent pod died meanwhile: the DaemonSet replaces it, and
	// the undo waits for the new one.
	if !undoOnNodes {
		undo.Push("the lab's state on its nodes", func() error { return destroyOnNodes(context.Background(), c, p.Lab) })
	}
	// The rest of the deploy talks to these agent pods: one that dies fails the deploy (its
	// request may be half done), and the unwinding waits for the DaemonSet's new pod.
	deployAgents.Store(p.Lab, agents)
	if _, err := agentAttach(ctx, c, agents, reqs); err != nil {
		return nil, err
	}
	if p.Image != "" {
		n := p.Nodes[0]
		pod := &Node{Name: n.Name, Lab: p.Lab, Netns: n.Netns, Container: ids[n.Name], KubeNode: where[n.Name], Agent: agents[where[n.Name]], c: c}
		if err := checkPrograms(ctx, p, pod); err != nil {
			return nil, err
		}
	}
	if afterAttach != nil {
		afterAttach(agents)
	}
	// sfclab opens none of the pods' namespaces: deploy hands what goes into them to the
	// agents (Configure, BumpInTheWire), and the nodes run commands through them (Node).
	return map[string]*netdev.NS{}, nil
}

// deployAgents holds, by lab, the agent pods (by Kubernetes node) the lab's deploy in this
// process started with.
var deployAgents sync.Map

// afterAttach, when set (by tests), is called with the agent pods by Kubernetes node once
// they have named the pods' namespaces, before the segments are wired.
var afterAttach func(agents map[string]string)

// dropPodNetwork deletes the pod's own interfaces (the cluster network's eth0): lab traffic
// never leaves the lab, and the plan's interface names are free. The kubelet does not need
// them once the pod runs; its CNI plugin's teardown finds nothing to delete.
// Equivalent to: ip -n sfc.LAB.NODE link del eth0
func dropPodNetwork(ns *netdev.NS) error {
	links, err := ns.Links()
	if err != nil {
		return err
	}
	for _, l := range links {
		if l.Name == "lo" {
			continue
		}
		if err := ns.DelLink(l.Name); err != nil {
			return fmt.Errorf("delete the pod network's interface: %w", err)
		}
	}
	return nil
}

// waitRunning waits until every pod of the lab runs and returns their container IDs by
// node; a pod that cannot run (image, error, ended) fails the wait at once.
func (r Runtime) waitRunning(ctx context.Context, c *client, p *plan.Plan) (map[string]string, error) {
	ids := map[string]string{}
	q := url.Values{"labelSelector": {LabelLab + "=" + p.Lab}}
	err := poll(ctx, PodTimeout, func() (bool, error) {
		var list struct{ Items []*podStatus }
		if err := c.do(ctx, "GET", "/api/v1/namespaces/"+Namespace(p.Lab)+"/pods", q, nil, &list); err != nil {
			return false, err
		}
		for _, ps := range list.Items {
			id, err := ps.running(r.podImage(p))
			if err != nil {
				return false, err
			}
			if id != "" {
				ids[ps.Metadata.Labels[LabelNode]] = id
			}
		}
		return len(ids) == len(p.Nodes), nil
	})
	if err != nil {
		var missing []string
		for _, n := range p.Nodes {
			if ids[n.Name] == "" {
				missing = append(missing, n.Name)
			}
		}
		return nil, fmt.Errorf("wait for the pods of lab %s to run (not running: %s): %w", p.Lab, strings.Join(missing, ", "), err)
	}
	return ids, nil
}

// poll calls check every 50 ms until it is done, fails, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, check func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, err := check()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// containerPIDs finds a host process of each container by its ID in /proc/PID/cgroup (the
// container runtime names a container's cgroup after its ID), one pass over /proc: the
// lowest PID, its init. A container not found runs on another machine.
func containerPIDs(ids map[string]string) (map[string]int, error) {
	if err := netdev.CheckGuard("/proc/"); err != nil {
		return nil, fmt.Errorf("find the pods' processes: %w", err)
	}
	out := map[string]int{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("find the pods' processes: %w", err)
	}
	byID := map[string]string{}
	for node, id := range ids {
		byID[id] = node
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil {
			continue
		}
		for id, node := range byID {
			if strings.Contains(string(b), id) {
				if old, ok := out[node]; !ok || pid < old {
					out[node] = pid
				}
			}
		}
	}
	for node, id := range ids {
		if out[node] == 0 {
			return nil, fmt.Errorf("find the processes of pod %s (container %s) on this node: none (the pod runs elsewhere, or its container ended)", node, id)
		}
	}
	return out, nil
}

// Link has the sfclab agent on the pods' node wire the segments between the pods' network
// namespaces as the netns runtime wires its namespaces (veth pairs, bridges in the lab's
// fabric namespace, addresses): sfclab sends it the part of the plan wiring reads.
func (r Runtime) Link(ctx context.Context, p *plan.Plan, _ map[string]*netdev.NS, _ runtime.Undo) error {
	if len(p.Segments) == 0 {
		return nil // a transparent lab: its ports are the hosts' (BuildHosts)
	}
	c, kn, agent, err := r.labAgent(ctx, p)
	if err != nil {
		return err
	}
	wp := &plan.Plan{Lab: p.Lab, Runtime: p.Runtime, MTU: p.MTU, Fabric: p.Fabric, Segments: p.Segments}
	for _, n := range p.Nodes {
		wp.Nodes = append(wp.Nodes, &plan.Node{Name: n.Name, Netns: n.Netns, Interfaces: n.Interfaces})
	}
	return agentCall(ctx, c, kn, agent, AgentLink, AgentLinkRequest{Plan: wp}, nil)
}

// BuildHosts has the sfclab agent build a lab's emulated hosts and the pods' ports (package
// hosts: a bridge per segment, veths into the pods) on the pods' node (deploy.SegmentWirer).
// A lab on several Kubernetes nodes (one emulated host each) is split by nodeHalves: each
// node's agent builds its own host, with VXLAN devices between the nodes' InternalIPs.
// The lab's undo (the agents' destroy) removes them.
func (r Runtime) BuildHosts(ctx context.Context, p *plan.Plan, topo *hosts.Topology, undo runtime.Undo) (map[string]hosts.PortAt, error) {
	c, where, agents, err := r.labAgents(ctx, p)
	if err != nil {
		return nil, err
	}
	// The lab's VNIs and steering port are its slot's, unique on the cluster (slot.go).
	slot, err := claimSlot(ctx, c, p.Lab)
	if err != nil {
		return nil, err
	}
	undo.Push("VXLAN slot", func() error { return releaseSlot(context.Background(), c, p.Lab) })
	if topo, err = inSlot(topo, slot); err != nil {
		return nil, err
	}
	reqs := map[string]AgentHostsRequest{}
	if len(agents) == 1 {
		for kn := range agents {
			reqs[kn] = AgentHostsRequest{Topology: topo}
		}
	} else {
		hostNode := map[string]string{}
		for _, n := range p.Nodes {
			hostNode[n.Host] = where[n.Name]
		}
		addrs, err := internalIPs(ctx, c, slices.Collect(maps.Keys(agents)))
		if err != nil {
			return nil, err
		}
		halves, err := nodeHalves(topo, hostNode, addrs)
		if err != nil {
			return nil, err
		}
		for kn, half := range halves {
			reqs[kn] = AgentHostsRequest{Topology: half}
		}
	}
	answers := map[string]*AgentHostsAnswer{}
	for kn := range reqs {
		answers[kn] = &AgentHostsAnswer{}
	}
	if err := callEach(ctx, c, agents, AgentHosts, reqs, func(kn string) any { return answers[kn] }); err != nil {
		return nil, err
	}
	ports := map[string]hosts.PortAt{}
	for _, a := range answers {
		maps.Copy(ports, a.Ports)
	}
	return ports, nil
}

// AttachSteering has the sfclab agent load a transparent lab's steering programs and attach
// them to the host ends of its ports on the pods' node (deploy.SegmentWirer). The maps are
// pinned in the node's BPF file system; deploy and `sfclab serve` write the chains into them.
//
// A lab across Kubernetes nodes (one emulated host each) is split as BuildHosts splits it:
// each node's agent loads the program of its own host only, attaches it to its host's ports
// and steering VXLAN device, and records the other hosts' tunnels by their nodes' InternalIPs
// (the underlay BuildHosts gave their VXLAN devices); its maps are the node's part of the
// lab's (steer.NodePin), which the chains' tables are written to on every node.
func (r Runtime) AttachSteering(ctx context.Context, p *plan.Plan, a steer.Attachment, _ runtime.Undo) error {
	parts, err := r.steeringParts(ctx, p)
	if err != nil {
		return err
	}
	if parts.single() {
		return agentCall(ctx, parts.c, parts.kn[0], parts.agents[parts.kn[0]], AgentSteer, AgentSteerRequest{Lab: p.Lab, Attachment: a}, nil)
	}
	reqs := map[string]AgentSteerRequest{}
	for _, kn := range parts.kn {
		var half steer.Attachment
		for _, h := range a.Hosts {
			if parts.hostNode[h] == kn {
				half.Hosts = append(half.Hosts, h)
			}
		}
		for _, pt := range a.Ports {
			if parts.hostNode[pt.Host] == kn {
				half.Ports = append(half.Ports, pt)
			}
		}
		for _, t := range a.Tunnels {
			on := parts.hostNode[t.Host]
			if on == "" {
				return fmt.Errorf("steer lab %s: host %d is on no Kubernetes node", p.Lab, t.Host)
			}
			t.Underlay = parts.addrs[on]
			t.Remote = on != kn
			half.Tunnels = append(half.Tunnels, t)
		}
		reqs[kn] = AgentSteerRequest{Lab: p.Lab, Attachment: half, Pin: steer.NodePin(p.Lab, kn)}
	}
	return callEach(ctx, parts.c, parts.agents, AgentSteer, reqs, nil)
}

// steeringParts is where a transparent lab's steering is: its Kubernetes nodes (sorted),
// their agents, each emulated host's node (by host id) and, on several nodes, each node's
// InternalIP.
type steeringParts struct {
	c        *client
	kn       []string
	agents   map[string]string
	hostNode map[uint32]string
	addrs    map[string]netip.Addr
}

// single reports whether the lab is on one Kubernetes node (its maps are the lab's own).
func (s *steeringParts) single() bool { return len(s.kn) == 1 }

// pin returns where the maps of node kn's part are pinned ("" for a lab on one node).
func (s *steeringParts) pin(lab, kn string) string {
	if s.single() {
		return ""
	}
	return steer.NodePin(lab, kn)
}

// steeringParts finds where a deployed transparent lab's steering is (steeringParts).
func (r Runtime) steeringParts(ctx context.Context, p *plan.Plan) (*steeringParts, error) {
	if p.Transparent == nil {
		return nil, fmt.Errorf("steer lab %s: it is not transparent", p.Lab)
	}
	c, where, agents, err := r.labAgents(ctx, p)
	if err != nil {
		return nil, err
	}
	s := &steeringParts{c: c, agents: agents, kn: slices.Sorted(maps.Keys(agents)), hostNode: map[uint32]string{}}
	for _, n := range p.Transparent.Nodes {
		h := p.Transparent.Host(n.Host)
		if h == nil {
			return nil, fmt.Errorf("steer lab %s: node %s: %w", p.Lab, n.Name, hosts.ErrNoHost)
		}
		kn := where[n.Name]
		if other := s.hostNode[h.ID]; other != "" && other != kn {
			return nil, fmt.Errorf("steer lab %s: host %s has pods on Kubernetes nodes %s and %s (one node per host)", p.Lab, h.Name, other, kn)
		}
		s.hostNode[h.ID] = kn
	}
	if !s.single() {
		if s.addrs, err = internalIPs(ctx, c, s.kn); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// labAgent returns the Kubernetes node of a lab's pods and the agent pod there: the one the
// lab's deploy in this process started with (deployAgents), else the one running there now
// (inspect, serve: they never create or replace the agent). For what is wired on one node
// only (a plain routed lab's Link): a lab whose pods are on several nodes is refused (a lab
// on several nodes has hosts, which BuildHosts and the steering wire per node).
func (r Runtime) labAgent(ctx context.Context, p *plan.Plan) (c *client, kn, pod string, err error) {
	c, err = r.client()
	if err != nil {
		return nil, "", "", err
	}
	if v, ok := deployAgents.Load(p.Lab); ok {
		if agents := v.(map[string]string); len(agents) == 1 {
			for kn, pod := range agents {
				return c, kn, pod, nil
			}
		}
	}
	var list struct{ Items []*podStatus }
	q := url.Values{"labelSelector": {LabelLab + "=" + p.Lab}}
	if err := c.do(ctx, "GET", "/api/v1/namespaces/"+Namespace(p.Lab)+"/pods", q, nil, &list); err != nil {
		return nil, "", "", fmt.Errorf("find the pods of lab %s: %w", p.Lab, err)
	}
	var kubeNodes []string
	for _, ps := range list.Items {
		if n := ps.Spec.NodeName; n != "" && !slices.Contains(kubeNodes, n) {
			kubeNodes = append(kubeNodes, n)
		}
	}
	slices.Sort(kubeNodes)
	if len(kubeNodes) != 1 {
		return nil, "", "", fmt.Errorf("reach the sfclab agent of lab %s: its pods are on Kubernetes nodes [%s]; this request is wired on one node only", p.Lab, strings.Join(kubeNodes, ", "))
	}
	agent, err := agentOn(ctx, c, p.Lab, kubeNodes[0])
	if err != nil {
		return nil, "", "", err
	}
	return c, kubeNodes[0], agent, nil
}

// Node returns a deployed node: its pod's container, reached through the agent on the pod's
// Kubernetes node (the one the lab's deploy started with, else the one running there now); a
// *Node, or a *RemoteNode for a pod on another machine's node (foreign).
func (r Runtime) Node(ctx context.Context, p *plan.Plan, name string) (runtime.Node, error) {
	pn := p.Node(name)
	if pn == nil {
		return nil, fmt.Errorf("find node %q in lab %q: no such node", name, p.Lab)
	}
	c, err := r.client()
	if err != nil {
		return nil, err
	}
	var ps podStatus
	if err := c.do(ctx, "GET", "/api/v1/namespaces/"+Namespace(p.Lab)+"/pods/"+name, nil, nil, &ps); err != nil {
		return nil, fmt.Errorf("find node %s: %w", name, err)
	}
	id, err := ps.running(r.podImage(p))
	if err != nil {
		return nil, err
	}
	if id == "" {
		return nil, fmt.Errorf("find node %s: pod %s/%s is not running", name, Namespace(p.Lab), name)
	}
	kn := ps.Spec.NodeName
	agent, err := agentOn(ctx, c, p.Lab, kn)
	if err != nil {
		return nil, fmt.Errorf("find node %s: %w", name, err)
	}
	node := &Node{Name: name, Lab: p.Lab, Netns: pn.Netns, Container: id, KubeNode: kn, Agent: agent, Kubeconfig: c.Kubeconfig, c: c}
	foreign, err := r.foreignNodes(ctx, c, []string{kn})
	if err != nil {
		return nil, fmt.Errorf("find node %s: %w", name, err)
	}
	if foreign[kn] {
		return &RemoteNode{Node: node, StateDir: r.nodeDir(p.Lab), NodeDir: nodeLabDir(p.Lab)}, nil
	}
	return node, nil
}

// agentOn returns the agent pod on Kubernetes node kn for lab: the one the lab's deploy in
// this process started with, else the one running there now.
func agentOn(ctx context.Context, c *client, lab, kn string) (string, error) {
	if v, ok := deployAgents.Load(lab); ok {
		if pod := v.(map[string]string)[kn]; pod != "" {
			return pod, nil
		}
	}
	v, err := runningAgents(ctx, c)
	if err != nil {
		return "", err
	}
	if v.pods[kn] == "" {
		if why := v.why(kn); why != "" && v.nodes != nil {
			return "", fmt.Errorf("reach the sfclab agent on Kubernetes node %s: the node %s", kn, why)
		}
		return "", fmt.Errorf("no sfclab agent runs on Kubernetes node %s (kubectl -n %s get pods -o wide)", kn, AgentNamespace)
	}
	return v.pods[kn], nil
}

// Configure has the agent on each of the lab's Kubernetes nodes write its pods' settings
// into their namespaces (deploy.RemoteNodes), one request per node, the nodes in parallel.
func (r Runtime) Configure(ctx context.Context, p *plan.Plan, set map[string]netdev.Settings) error {
	c, where, agents, err := r.labAgents(ctx, p)
	if err != nil {
		return err
	}
	reqs := map[string]AgentConfigureRequest{}
	for _, n := range p.Nodes {
		if s, ok := set[n.Name]; ok {
			kn := where[n.Name]
			req := reqs[kn]
			req.Lab = p.Lab
			req.Nodes = append(req.Nodes, AgentNodeSettings{Node: n.Name, Netns: n.Netns, Settings: s})
			reqs[kn] = req
		}
	}
	return callEach(ctx, c, agents, AgentConfigure, reqs, nil)
}

// BumpInTheWire has the agent on each node of the pods make them bumps in the wire
// (deploy.RemoteNodes): each node travels without its function's parameters, with the fast
// path they ask for.
func (r Runtime) BumpInTheWire(ctx context.Context, p *plan.Plan, nodes []*plan.TNode) error {
	if len(nodes) == 0 {
		return nil
	}
	c, where, agents, err := r.labAgents(ctx, p)
	if err != nil {
		return err
	}
	reqs := map[string]AgentBumpRequest{}
	for _, n := range nodes {
		bare := *n
		bare.Function = nil
		kn := where[n.Name]
		req := reqs[kn]
		req.Lab = p.Lab
		req.Nodes = append(req.Nodes, AgentBumpNode{Node: &bare, Fast: steer.FastPathOf(n)})
		reqs[kn] = req
	}
	return callEach(ctx, c, agents, AgentBump, reqs, nil)
}

// SteeringMaps reaches a transparent lab's steering maps, pinned on its pods' node, through
// the agent there (deploy.RemoteNodes).
// On several nodes the maps are each node's part: the tables go to every part, and the
// counters are summed over them (each hop is counted on the node that steers it).
func (r Runtime) SteeringMaps(ctx context.Context, p *plan.Plan) (steer.Maps, error) {
	parts, err := r.steeringParts(ctx, p)
	if err != nil {
		return nil, err
	}
	var ms nodeMaps
	for _, kn := range parts.kn {
		ms = append(ms, &agentMaps{ctx: ctx, c: parts.c, kn: kn, agent: parts.agents[kn], lab: p.Lab, pin: parts.pin(p.Lab, kn)})
	}
	if len(ms) == 1 {
		return ms[0], nil
	}
	return ms, nil
}

// PortsAt reads where every port of a transparent lab is (the host-side ifindex and the
// pod-side MAC, by hosts.PortKey), on its pods' node through the agent there: `sfclab serve`
// binds the chains it is given to them.
func (r Runtime) PortsAt(ctx context.Context, p *plan.Plan) (map[string]hosts.PortAt, error) {
	t := p.Transparent
	if t == nil {
		return nil, fmt.Errorf("read the ports of lab %s: it is not transparent", p.Lab)
	}
	parts, err := r.steeringParts(ctx, p)
	if err != nil {
		return nil, err
	}
	reqs := map[string]AgentPortsRequest{}
	for _, n := range t.Nodes {
		h := t.Host(n.Host)
		kn := parts.hostNode[h.ID]
		req := reqs[kn]
		if req.Ports == nil {
			req.Ports = map[string]AgentPortRef{}
		}
		for _, pt := range n.Ports {
			req.Ports[hosts.PortKey(n.Name, pt.Ifname)] = AgentPortRef{HostNS: h.Netns, HostIf: pt.HostIf, NodeNS: n.Netns, Ifname: pt.Ifname}
		}
		reqs[kn] = req
	}
	answers := map[string]*AgentHostsAnswer{}
	for kn := range reqs {
		answers[kn] = &AgentHostsAnswer{}
	}
	if err := callEach(ctx, parts.c, parts.agents, AgentPorts, reqs, func(kn string) any { return answers[kn] }); err != nil {
		return nil, err
	}
	out := map[string]hosts.PortAt{}
	for _, a := range answers {
		maps.Copy(out, a.Ports)
	}
	return out, nil
}

// agentMaps is a lab's steering maps on its node, read and written by the agent there.
type agentMaps struct {
	ctx       context.Context
	c         *client
	kn, agent string
	lab       string
	pin       string               // the node's part of a lab across nodes (AgentSteerRequest)
	counters  *AgentCountersAnswer // read once for Counters and Picks
}

func (m *agentMaps) Apply(t *sfc.Tables) error {
	return agentCall(m.ctx, m.c, m.kn, m.agent, AgentTables, AgentTablesRequest{Lab: m.lab, Tables: t, Pin: m.pin}, nil)
}

func (m *agentMaps) read() (*AgentCountersAnswer, error) {
	if m.counters == nil {
		var ans AgentCountersAnswer
		if err := agentCall(m.ctx, m.c, m.kn, m.agent, AgentCounters, AgentDestroyRequest{Lab: m.lab, Pin: m.pin}, &ans); err != nil {
			return nil, err
		}
		m.counters = &ans
	}
	return m.counters, nil
}

func (m *agentMaps) Counters() ([]steer.HopCounter, error) {
	a, err := m.read()
	if err != nil {
		return nil, err
	}
	return a.Counters, nil
}

func (m *agentMaps) Picks() ([]steer.Pick, error) {
	a, err := m.read()
	if err != nil {
		return nil, err
	}
	return a.Picks, nil
}

func (m *agentMaps) Close() error { return nil }

// nodeMaps is a lab's steering maps on several Kubernetes nodes, one part per node: the
// chains' tables are written to every part, and a hop's counters are summed over the parts
// (the frames of a hop are counted where they are steered: at the host that sends them on,
// as one kernel's shared maps count them on emulated hosts). Picks are every part's (each
// host's program picks for the flows it steers).
type nodeMaps []*agentMaps

func (ms nodeMaps) Apply(t *sfc.Tables) error {
	var errs []error
	for _, m := range ms {
		errs = append(errs, m.Apply(t))
	}
	return errors.Join(errs...)
}

func (ms nodeMaps) Counters() ([]steer.HopCounter, error) {
	type hop struct{ path, hop uint32 }
	sum := map[hop]*steer.HopCounter{}
	var out []steer.HopCounter
	var order []hop
	for _, m := range ms {
		cs, err := m.Counters()
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			k := hop{c.Path, c.Hop}
			if s := sum[k]; s != nil {
				s.Packets += c.Packets
				s.Bytes += c.Bytes
				continue
			}
			c := c
			sum[k] = &c
			order = append(order, k)
		}
	}
	slices.SortFunc(order, func(a, b hop) int {
		if a.path != b.path {
			return cmp.Compare(a.path, b.path)
		}
		return cmp.Compare(a.hop, b.hop)
	})
	for _, k := range order {
		out = append(out, *sum[k])
	}
	return out, nil
}

func (ms nodeMaps) Picks() ([]steer.Pick, error) {
	var out []steer.Pick
	for _, m := range ms {
		ps, err := m.Picks()
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	return out, nil
}

func (ms nodeMaps) Close() error { return nil }

// Sweep removes the sfclab agent (its namespace sfclab-system, with its DaemonSet and pods)
// when the cluster has no sfclab lab left; `destroy --all` calls it after destroying every lab.
// Without a kubeconfig there is nothing to do.
func (r Runtime) Sweep(ctx context.Context) error {
	c, err := r.client()
	if errors.Is(err, errNoKubeconfig) {
		return nil
	}
	if err != nil {
		return err
	}
	labs, err := r.Labs(ctx)
	var u *unreachable
	if errors.As(err, &u) {
		return nil // a cluster that does not answer: nothing this run can remove
	}
	if err != nil {
		return err
	}
	if len(labs) > 0 {
		return nil
	}
	if err := removeAgent(ctx, c); err != nil {
		return fmt.Errorf("remove the sfclab agent: %w", err)
	}
	return nil
}

// Destroy deletes the lab's pods (the API server removes them at once) and namespace (the
// cluster removes it, and what is left in it, some seconds later: deleteNamespace). The
// lab's namespaces on this machine (the pods' netns names, the fabric, emulated
// hosts) and the processes in them carry the lab's tag sfc.LAB.*: the netns runtime, which
// every deployer has beside this one, removes them at the same time (doing it here too would
// race it). Without a kubeconfig there is no cluster and nothing to do; an unreachable
// cluster is an error.
func (r Runtime) Destroy(ctx context.Context, lab string) error {
	var errs []error
	c, err := r.client()
	switch {
	case errors.Is(err, errNoKubeconfig):
	case err != nil:
		errs = append(errs, err)
	default:
		deployAgents.Delete(lab)
		// The agents remove what they made for the lab on their nodes first (only for a
		// lab the cluster has: its namespace is created before any agent is asked), then
		// the pods and the namespace go.
		err := c.do(ctx, "GET", "/api/v1/namespaces/"+Namespace(lab), nil, nil, nil)
		if err == nil {
			// A slot claim without the lab's namespace is taken over by the next claim.
			errs = append(errs, destroyOnNodes(ctx, c, lab), releaseSlot(ctx, c, lab))
		} else if !isNotFound(err) {
			errs = append(errs, r.unreachable(lab, err))
			break
		}
		errs = append(errs, r.unreachable(lab, deleteNamespace(ctx, c, Namespace(lab), false)))
	}
	return errors.Join(errs...)
}

// deleteNamespace deletes a namespace's pods at once (no grace period) and the namespace;
// with wait it waits until the API server has removed the namespace. The cluster's namespace
// controller removes what is left in a deleted namespace, and the namespace, only 5 s after the
// deletion (its namespaceDeletionGracePeriod, for HA API servers): a lab's destroy does not
// wait for that (Leftovers and Preflight know a namespace being deleted), the agent's removal
// does (a deploy cannot create the agent again in a namespace being deleted).
func deleteNamespace(ctx context.Context, c *client, ns string, wait bool) error {
	q := url.Values{"gracePeriodSeconds": {"0"}}
	// Pods first, all at once, with no grace period; then the namespace.
	if err := c.do(ctx, "DELETE", "/api/v1/namespaces/"+ns+"/pods", q, nil, nil); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete the pods of namespace %s: %w", ns, err)
	}
	err := c.do(ctx, "DELETE", "/api/v1/namespaces/"+ns, q, nil, nil)
	if isNotFound(err) {
		return nil
	}
	// 409: being deleted already.
	if err != nil && !isConflict(err) {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	if !wait {
		return nil
	}
	if err := waitNamespaceGone(ctx, c, ns); err != nil {
		return fmt.Errorf("wait for namespace %s to go: %w", ns, err)
	}
	return nil
}

// waitNamespaceGone waits until the API server has removed namespace ns (PodTimeout).
func waitNamespaceGone(ctx context.Context, c *client, ns string) error {
	return poll(ctx, PodTimeout, func() (bool, error) {
		err := c.do(ctx, "GET", "/api/v1/namespaces/"+ns, nil, nil, nil)
		if isNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// namespaceObj is the part of a namespace the runtime reads.
type namespaceObj struct {
	Metadata struct {
		DeletionTimestamp *string `json:"deletionTimestamp"`
	} `json:"metadata"`
}

// getNamespace reads namespace ns: found says whether it exists, deleting whether it is being
// deleted.
func getNamespace(ctx context.Context, c *client, ns string) (found, deleting bool, err error) {
	var obj namespaceObj
	err = c.do(ctx, "GET", "/api/v1/namespaces/"+ns, nil, nil, &obj)
	if isNotFound(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return true, obj.Metadata.DeletionTimestamp != nil, nil
}

var _ runtime.Runtime = Runtime{}

// checkPrograms verifies, before any function is set up, that the lab's own image
// (docker.image) has every program its functions and run commands need (kinds.Needs), in
// one request to the agent running `command -v` for each in pod (a pod of the lab: they all
// run that image). The error names the missing programs, the nodes needing them and what to
// do, as the docker runtime's does.
// Equivalent to: kubectl exec POD -- sh -c 'command -v PROG...'
func checkPrograms(ctx context.Context, p *plan.Plan, pod runtime.Node) error {
	needs, err := kinds.Needs(p)
	if err != nil {
		return err
	}
	who := map[string][]string{}
	for _, n := range needs {
		who[n.Program] = n.Nodes
	}
	return runtime.CheckImagePrograms(ctx, pod, p.Image, who, "(and import it on the cluster's nodes)")
}
