package kubernetes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/sfclab/sfclab/hosts"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime/netns"
	"github.com/sfclab/sfclab/sfc"
	"github.com/sfclab/sfclab/steer"
	"golang.org/x/sys/unix"
)

// The sfclab agent: a DaemonSet (namespace sfclab-system) whose pod on every Kubernetes node
// runs the sfclab program privileged, in the node's network and PID namespaces, with the
// node's /run/netns mounted (mount propagation both ways), its BPF file system and
// /run/sfclab. sfclab gives it the per-node part of a deploy through the API server's exec:
// one exec per agent pod stays open as a session (kubectl exec -i POD -- sfclab agent serve,
// session.go) that carries the requests (`sfclab agent REQUEST` takes one: a JSON request on
// stdin, a JSON answer on stdout), so the agent listens on no port and what it may be asked
// is what RBAC grants on pods/exec in its namespace.
//
// What the agent does: the requests below (AgentAttach, AgentLink, AgentHosts, AgentSteer,
// AgentDestroy): it names the lab's pods' network namespaces on its node, wires their
// segments (the netns runtime's Link, or package hosts' Build), installs transparent
// steering (package steer's Install) and removes all of it again. It does not yet wire
// segments across nodes (docs/kubernetes.md).
const (
	AgentNamespace = "sfclab-system"
	AgentName      = "sfclab-agent"
	// LabelAgent marks the agent's namespace and pods.
	LabelAgent = "sfclab.agent"
	// annotationBinary records the sfclab program the agent's pods run (a hostPath); a deploy
	// from another program replaces the DaemonSet.
	annotationBinary = "sfclab.agent/binary"
	agentContainer   = "agent"
	// agentSpecVersion changes whenever agentSpec does, so that a deploy replaces an agent
	// DaemonSet of an older spec (2: the node's BPF file system and /run/sfclab mounted; 3:
	// the node's cgroup file systems, for commands in pods' cgroups; 4: the node's root at
	// /host, for daemons' logs).
	agentSpecVersion = "4"
)

// agentRevision is what annotationBinary records: the program and the spec's version.
func agentRevision(self string) string { return self + " (spec " + agentSpecVersion + ")" }

// AgentRequest is what sfclab asks of the agent on one Kubernetes node.
type AgentRequest struct {
	Lab  string     `json:"lab"`
	Pods []AgentPod `json:"pods"`
	// UID is the lab's Kubernetes namespace's UID, recorded in the agent's mark of the lab
	// (sweep.go).
	UID string `json:"uid,omitempty"`
}

// AgentPod is one pod of a lab on the agent's node.
type AgentPod struct {
	Node      string `json:"node"`      // the lab node (pod name)
	Netns     string `json:"netns"`     // the name its network namespace gets (sfc.LAB.NODE)
	Container string `json:"container"` // its container's ID
}

// AgentAnswer is the agent's answer: the host PID of each pod's container init, by lab node.
type AgentAnswer struct {
	PIDs map[string]int `json:"pids"`
}

// Requests the agent takes (`sfclab agent REQUEST`, a JSON request on stdin, a JSON answer
// on stdout). Each one that builds undoes what it built when it fails; "destroy" removes what
// every other one built for a lab.
const (
	// AgentAttach names the pods' network namespaces and deletes their pod-network interfaces
	// (AgentRequest, AgentAnswer).
	AgentAttach = "attach"
	// AgentLink wires a plain lab's segments as the netns runtime does: veth pairs between
	// pods, bridges in the lab's fabric namespace, addresses (AgentLinkRequest).
	AgentLink = "link"
	// AgentHosts builds a lab's emulated hosts and ports with package hosts: a bridge per
	// segment per node, veths into the pods, VXLAN between hosts (AgentHostsRequest,
	// AgentHostsAnswer).
	AgentHosts = "hosts"
	// AgentSteer loads a transparent lab's steering programs and attaches them to the host
	// ends of its ports and to its tunnels (AgentSteerRequest).
	AgentSteer = "steer"
	// AgentDestroy removes what the agent made for a lab on its node: its network namespace
	// names, emulated hosts, fabric and pinned steering maps, and the processes started in
	// them (AgentDestroyRequest).
	AgentDestroy = "destroy"
	// AgentConfigure writes settings (addresses, sysctls, routes, policy rules) into the
	// lab's pods' namespaces (AgentConfigureRequest).
	AgentConfigure = "configure"
	// AgentBump makes transparent nodes bumps in the wire (steer.BumpInTheWire in each pod's
	// namespace; AgentBumpRequest).
	AgentBump = "bump"
	// AgentTables writes a transparent lab's compiled chains into its pinned steering maps
	// (AgentTablesRequest).
	AgentTables = "tables"
	// AgentCounters reads a transparent lab's per-hop counters and picks from its pinned maps
	// (AgentDestroyRequest names the lab; AgentCountersAnswer).
	AgentCounters = "counters"
	// AgentPorts reads where ports are (hosts.PortLink: the host-side ifindex and the pod-side
	// MAC; AgentPortsRequest, AgentHostsAnswer), for `sfclab serve`.
	AgentPorts = "ports"
)

// AgentPortsRequest asks where ports are, by key.
type AgentPortsRequest struct {
	Ports map[string]AgentPortRef `json:"ports"`
}

// AgentPortRef names a port's two ends: its veth's host end in its emulated host's
// namespace, and the pod's end.
type AgentPortRef struct {
	HostNS string `json:"host_ns"`
	HostIf string `json:"host_if"`
	NodeNS string `json:"node_ns"`
	Ifname string `json:"ifname"`
}

// agentRequests are the requests AgentMain takes.
var agentRequests = []string{AgentAttach, AgentLink, AgentHosts, AgentSteer, AgentDestroy, AgentConfigure, AgentBump, AgentTables, AgentCounters, AgentPorts, AgentNode, AgentFiles, AgentSweep}

// AgentConfigureRequest asks for settings in the namespaces of a lab's pods on the node.
type AgentConfigureRequest struct {
	Lab   string              `json:"lab"`
	Nodes []AgentNodeSettings `json:"nodes"`
}

// AgentNodeSettings are one pod's settings.
type AgentNodeSettings struct {
	Node     string          `json:"node"`
	Netns    string          `json:"netns"`
	Settings netdev.Settings `json:"settings"`
}

// AgentBumpRequest asks for transparent nodes to be made bumps in the wire.
type AgentBumpRequest struct {
	Lab   string          `json:"lab"`
	Nodes []AgentBumpNode `json:"nodes"`
}

// AgentBumpNode is one transparent node: its ports and ways (Function left out) and its
// function's fast path (steer.FastPathOf).
type AgentBumpNode struct {
	Node *plan.TNode `json:"node"`
	Fast string      `json:"fast,omitempty"`
}

// AgentTablesRequest asks for a lab's chains in its steering maps.
type AgentTablesRequest struct {
	Lab    string      `json:"lab"`
	Tables *sfc.Tables `json:"tables"`
	Pin    string      `json:"pin,omitempty"` // as in AgentSteerRequest
}

// AgentCountersAnswer is a lab's steering counters and picks.
type AgentCountersAnswer struct {
	Counters []steer.HopCounter `json:"counters"`
	Picks    []steer.Pick       `json:"picks"`
}

// AgentLinkRequest asks for the segments of a plain lab (no hosts, no steering); Plan holds
// only what wiring reads: the nodes' names, namespaces and interfaces, the segments, the
// fabric and the MTU.
type AgentLinkRequest struct {
	Plan *plan.Plan `json:"plan"`
}

// AgentHostsRequest asks for a lab's emulated hosts and ports (package hosts).
type AgentHostsRequest struct {
	Topology *hosts.Topology `json:"topology"`
}

// AgentHostsAnswer says where every veth port is, by hosts.PortKey.
type AgentHostsAnswer struct {
	Ports map[string]hosts.PortAt `json:"ports"`
}

// AgentSteerRequest asks for a lab's steering programs (steer.Install).
type AgentSteerRequest struct {
	Lab        string           `json:"lab"`
	Attachment steer.Attachment `json:"attachment"`
	// Pin, when set, is where the maps of this node's part of a lab across nodes are pinned
	// (steer.NodePin(Lab, node)); else they are the lab's (steer.PinDir(Lab)).
	Pin string `json:"pin,omitempty"`
}

// AgentDestroyRequest asks the agent to remove a lab's state on its node.
type AgentDestroyRequest struct {
	Lab string `json:"lab"`
	// Pin: as in AgentSteerRequest, for AgentCounters (AgentDestroy removes every part).
	Pin string `json:"pin,omitempty"`
}

// AgentMain runs `sfclab agent`: with no argument it is the DaemonSet's long-running process
// (it waits for SIGTERM); with a request name (AgentAttach, AgentLink, AgentHosts,
// AgentSteer, AgentDestroy) it reads the request on stdin, does it, and writes the answer on
// stdout. A failed request leaves nothing of what it made.
func AgentMain(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		<-ctx.Done()
		return nil
	}
	op := args[0]
	if len(args) != 1 || (op != AgentServe && !slices.Contains(agentRequests, op)) {
		return fmt.Errorf("agent: unknown request %q (the agent takes: %s)", strings.Join(args, " "), strings.Join(append(slices.Clone(agentRequests), AgentServe), ", "))
	}
	if op == AgentServe {
		return agentServe(stdin, stdout)
	}
	dec := json.NewDecoder(stdin)
	dec.DisallowUnknownFields()
	ans, err := agentDo(context.Background(), op, func(v any) error { return dec.Decode(v) })
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(ans)
}

// agentDo does one request op, its body read by read, and returns its answer.
func agentDo(ctx context.Context, op string, read func(any) error) (any, error) {
	decode := func(v any) error {
		if err := read(v); err != nil {
			return fmt.Errorf("read request: %w", err)
		}
		return nil
	}
	var ans any = struct{}{}
	var err error
	switch op {
	case AgentAttach:
		var req AgentRequest
		if err = decode(&req); err == nil {
			ans, err = attach(req)
		}
	case AgentLink:
		var req AgentLinkRequest
		if err = decode(&req); err == nil {
			err = agentLink(req)
		}
	case AgentHosts:
		var req AgentHostsRequest
		if err = decode(&req); err == nil {
			ans, err = agentHosts(req)
		}
	case AgentSteer:
		var req AgentSteerRequest
		if err = decode(&req); err == nil {
			err = agentSteer(req)
		}
	case AgentDestroy:
		var req AgentDestroyRequest
		if err = decode(&req); err == nil {
			err = agentDestroy(req.Lab)
		}
	case AgentConfigure:
		var req AgentConfigureRequest
		if err = decode(&req); err == nil {
			err = agentConfigure(req)
		}
	case AgentBump:
		var req AgentBumpRequest
		if err = decode(&req); err == nil {
			err = agentBump(req)
		}
	case AgentTables:
		var req AgentTablesRequest
		if err = decode(&req); err == nil {
			err = agentTables(req)
		}
	case AgentCounters:
		var req AgentDestroyRequest
		if err = decode(&req); err == nil {
			ans, err = agentCounters(req.Lab, req.Pin)
		}
	case AgentPorts:
		var req AgentPortsRequest
		if err = decode(&req); err == nil {
			ans, err = agentPorts(req)
		}
	case AgentNode:
		var req AgentNodeRequest
		if err = decode(&req); err == nil {
			ans, err = agentNode(ctx, req)
		}
	case AgentFiles:
		var req AgentFilesRequest
		if err = decode(&req); err == nil {
			ans, err = agentFiles(req)
		}
	case AgentSweep:
		var req AgentSweepRequest
		if err = decode(&req); err == nil {
			ans, err = agentSweep(req)
		}
	default:
		err = errors.New("unknown request")
	}
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", op, err)
	}
	return ans, nil
}

// agentUndo is the agent's undo stack for one request: unwound when the request fails.
type agentUndo struct {
	steps []func() error
}

func (u *agentUndo) Push(_ string, fn func() error) { u.steps = append(u.steps, fn) }

func (u *agentUndo) unwind() error {
	var errs []error
	for i := len(u.steps) - 1; i >= 0; i-- {
		errs = append(errs, u.steps[i]())
	}
	u.steps = nil
	return errors.Join(errs...)
}

// agentLink wires a plain lab's segments between its pods' namespaces (named by attach) with
// the netns runtime's Link, after creating the lab's fabric namespace when it has bridges.
func agentLink(req AgentLinkRequest) (err error) {
	p := req.Plan
	if p == nil {
		return errors.New("no plan")
	}
	var undo agentUndo
	defer func() {
		if err != nil {
			err = errors.Join(err, undo.unwind())
		}
	}()
	ns := map[string]*netdev.NS{}
	defer func() {
		for _, h := range ns {
			h.Close()
		}
	}()
	for _, n := range p.Nodes {
		h, err := netdev.OpenNS(n.Netns)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		ns[n.Name] = h
	}
	if p.Fabric != "" {
		if err := netdev.CreateNetns(p.Fabric); err != nil {
			return fmt.Errorf("create namespace: %w", err)
		}
		undo.Push("namespace "+p.Fabric, func() error { return netdev.DeleteNetns(p.Fabric) })
		h, err := netdev.OpenNS(p.Fabric)
		if err != nil {
			return err
		}
		ns[netns.FabricKey] = h
	}
	return netns.Runtime{}.Link(context.Background(), p, ns, &undo)
}

// agentHosts builds a lab's emulated hosts and the pods' ports with package hosts and reads
// where the ports are.
func agentHosts(req AgentHostsRequest) (_ *AgentHostsAnswer, err error) {
	t := req.Topology
	if t == nil || !t.NodesExist {
		return nil, errors.New("no topology of existing nodes")
	}
	// A node's half of a topology across nodes names its underlay address; its device is
	// the node's.
	if err := localUnderlay(t); err != nil {
		return nil, err
	}
	var undo agentUndo
	defer func() {
		if err != nil {
			err = errors.Join(err, undo.unwind())
		}
	}()
	built, err := hosts.Build(t, &undo)
	if built != nil {
		built.Close()
	}
	if err != nil {
		return nil, err
	}
	ports, err := t.PortLinks()
	if err != nil {
		return nil, err
	}
	return &AgentHostsAnswer{Ports: ports}, nil
}

// agentSteer installs a lab's steering programs. The maps are pinned in the node's BPF file
// system, which must be mounted on the node (and so in the agent's pod): one the agent
// mounted itself would be the pod's own, and sfclab and `sfclab serve` on the node would not
// see the maps.
func agentSteer(req AgentSteerRequest) error {
	var st unix.Statfs_t
	if err := unix.Statfs(bpffsDir, &st); err != nil || st.Type != unix.BPF_FS_MAGIC {
		return fmt.Errorf("install steering of lab %s: the node has no BPF file system at %s (mount it on the node: mount -t bpf bpf %s, as systemd does at boot)", req.Lab, bpffsDir, bpffsDir)
	}
	pin, err := pinOf(req.Lab, req.Pin)
	if err != nil {
		return err
	}
	if err := steer.Install(pin, req.Attachment); err != nil {
		return errors.Join(err, steer.Unpin(pin))
	}
	return nil
}

// bpffsDir is where the node's BPF file system is mounted, and mounted into the agent's pod.
const bpffsDir = "/sys/fs/bpf"

// cgroupDir is where the node's cgroup file systems are, mounted into the agent's pod.
const cgroupDir = "/sys/fs/cgroup"

// agentDestroy removes a lab's state on the agent's node: the processes in its pods'
// namespaces and their names, its emulated hosts, underlay and fabric (their veths, bridges,
// VXLAN devices and steering programs go with them), its cgroups (the netns runtime's
// Destroy, by the lab's tag), its pinned steering maps and its directory on the node
// (NodeStateRoot/LAB, for pods on another machine than sfclab's). The pods' own processes end
// too (they are in the pods' namespaces); deleting the pods is the API server's. Nothing there is
// not an error.
// Equivalent to: kill the processes in sfc.LAB.*; ip netns del sfc.LAB.* sfc.LAB;
// rm -r /sys/fs/bpf/sfclab/LAB /var/lib/sfclab-node/LAB
func agentDestroy(lab string) error {
	if lab == "" {
		return errors.New("no lab named")
	}
	var errs []error
	detachHostCopies(lab)
	errs = append(errs, netns.Runtime{}.Destroy(context.Background(), lab))
	if err := steer.Unpin(lab); err != nil && !errors.Is(err, steer.ErrNotLoaded) {
		errs = append(errs, err)
	}
	errs = append(errs, removeLabDir(lab))
	if err := errors.Join(errs...); err != nil {
		return err // marked still: a later sweep tries again
	}
	return unmarkLab(lab)
}

// detachHostCopies detaches, in the agent's own mount namespace, the copies of the lab's
// netns names under its view of the node's root (hostRoot): an agent pod started while the
// lab existed copied them with the node's root, and without mount propagation they stay
// mounted there when the names are unmounted, which keeps the names busy (removing them
// fails with EBUSY). Nothing mounted there is not an error.
// Equivalent to: umount -l /host/run/netns/sfc.LAB.*
func detachHostCopies(lab string) {
	root := nodeRoot()
	if root == "" {
		return
	}
	names, _ := netdev.ListNetns(plan.NetnsName(lab, ""))
	names = append(names, plan.FabricName(lab))
	for _, n := range names {
		_ = unix.Unmount(filepath.Join(root, netdev.NetnsDir, n), unix.MNT_DETACH)
	}
}

// agentConfigure writes each pod's settings into its namespace (named by attach).
func agentConfigure(req AgentConfigureRequest) error {
	var errs []error
	for _, n := range req.Nodes {
		h, err := netdev.OpenNS(n.Netns)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", n.Node, err))
			continue
		}
		if err := h.Apply(n.Settings); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", n.Node, err))
		}
		h.Close()
	}
	return errors.Join(errs...)
}

// agentBump makes each node a bump in the wire in its pod's namespace.
func agentBump(req AgentBumpRequest) error {
	for _, b := range req.Nodes {
		if b.Node == nil {
			return errors.New("no node")
		}
		h, err := netdev.OpenNS(b.Node.Netns)
		if err != nil {
			return fmt.Errorf("node %s: %w", b.Node.Name, err)
		}
		err = steer.BumpInTheWire(h, b.Node, b.Fast)
		h.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// agentPorts reads where each port of req is.
func agentPorts(req AgentPortsRequest) (*AgentHostsAnswer, error) {
	out := map[string]hosts.PortAt{}
	for key, r := range req.Ports {
		idx, mac, err := hosts.PortLink(r.HostNS, r.HostIf, r.NodeNS, r.Ifname)
		if err != nil {
			return nil, err
		}
		out[key] = hosts.PortAt{Index: idx, MAC: mac}
	}
	return &AgentHostsAnswer{Ports: out}, nil
}

// agentTables writes a lab's chains into its pinned steering maps.
func agentTables(req AgentTablesRequest) error {
	if req.Tables == nil {
		return errors.New("no tables")
	}
	pin, err := pinOf(req.Lab, req.Pin)
	if err != nil {
		return err
	}
	dp, err := steer.Open(pin)
	if err != nil {
		return err
	}
	defer dp.Close()
	return dp.Apply(req.Tables)
}

// pinOf returns where a request's maps are pinned: the lab's, or the part pin names, which
// must be one of the lab's nodes' parts (steer.NodePin).
func pinOf(lab, pin string) (string, error) {
	if lab == "" {
		return "", errors.New("no lab named")
	}
	if pin == "" {
		return lab, nil
	}
	node, ok := strings.CutPrefix(pin, steer.NodePin(lab, ""))
	if !ok || node == "" || strings.ContainsAny(node, "/@") {
		return "", fmt.Errorf("steering maps %q are not a node's part of lab %s (%s)", pin, lab, steer.NodePin(lab, "NODE"))
	}
	return pin, nil
}

// agentCounters reads a lab's steering counters and picks.
func agentCounters(lab, pin string) (*AgentCountersAnswer, error) {
	pin, err := pinOf(lab, pin)
	if err != nil {
		return nil, err
	}
	dp, err := steer.Open(pin)
	if err != nil {
		return nil, err
	}
	defer dp.Close()
	cs, err := dp.Counters()
	if err != nil {
		return nil, err
	}
	picks, err := dp.Picks()
	if err != nil {
		return nil, err
	}
	return &AgentCountersAnswer{Counters: cs, Picks: picks}, nil
}

// attach names the network namespace of each pod of req and deletes its pod-network
// interfaces; on failure it removes the names it made.
func attach(req AgentRequest) (*AgentAnswer, error) {
	// Marked first: what follows is the lab's, to be swept should its destroy never reach
	// this node.
	if err := markLab(req.Lab, req.UID); err != nil {
		return nil, err
	}
	ids := map[string]string{}
	for _, p := range req.Pods {
		ids[p.Node] = p.Container
	}
	pids, err := containerPIDs(ids)
	if err != nil {
		return nil, err
	}
	var made []string
	undo := func() {
		for _, n := range made {
			_ = netdev.DeleteNetns(n)
		}
	}
	for _, p := range req.Pods {
		if err := netdev.BindNetns(p.Netns, fmt.Sprintf("/proc/%d/ns/net", pids[p.Node])); err != nil {
			undo()
			return nil, fmt.Errorf("node %s: %w", p.Node, err)
		}
		made = append(made, p.Netns)
		h, err := netdev.OpenNS(p.Netns)
		if err != nil {
			undo()
			return nil, fmt.Errorf("node %s: %w", p.Node, err)
		}
		err = dropPodNetwork(h)
		h.Close()
		if err != nil {
			undo()
			return nil, fmt.Errorf("node %s: %w", p.Node, err)
		}
	}
	return &AgentAnswer{PIDs: pids}, nil
}

// agentSpec is the agent's DaemonSet: the node image running `sfclab agent` from the sfclab
// program at self (a hostPath: the program must be at that path on every node), privileged,
// in the node's network and PID namespaces, with /run/netns shared both ways.
func (r Runtime) agentSpec(self string) map[string]any {
	labels := map[string]string{LabelManaged: "true", LabelAgent: "true"}
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "DaemonSet",
		"metadata": map[string]any{"name": AgentName, "namespace": AgentNamespace, "labels": labels,
			"annotations": map[string]string{annotationBinary: agentRevision(self)}},
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": map[string]string{LabelAgent: "true"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{
					"hostNetwork":                   true,
					"hostPID":                       true,
					"automountServiceAccountToken":  false,
					"enableServiceLinks":            false,
					"terminationGracePeriodSeconds": 0,
					"tolerations":                   []map[string]any{{"operator": "Exists"}},
					"containers": []map[string]any{{
						"name":            agentContainer,
						"image":           r.image(),
						"imagePullPolicy": "IfNotPresent",
						"command":         []string{"/usr/local/bin/sfclab", "agent"},
						"securityContext": map[string]any{"privileged": true},
						"volumeMounts": []map[string]any{
							{"name": "sfclab", "mountPath": "/usr/local/bin/sfclab", "readOnly": true},
							{"name": "netns", "mountPath": netdev.NetnsDir, "mountPropagation": "Bidirectional"},
							{"name": "bpffs", "mountPath": bpffsDir},
							{"name": "run", "mountPath": filepath.Dir(steer.MountLock)},
							// Over the container's own view: commands in pods run in the pods'
							// cgroups, found by their paths on the node.
							{"name": "cgroup", "mountPath": cgroupDir},
							// The node's files: daemons in pods log where their callers
							// ask, on the node.
							// No propagation (the kubelet refuses HostToContainer where "/"
							// is a private mount, as on this project's VM): agentDestroy
							// detaches the copies of a lab's netns names it holds.
							{"name": "host", "mountPath": hostRoot},
						},
					}},
					"volumes": []map[string]any{
						{"name": "sfclab", "hostPath": map[string]any{"path": self, "type": "File"}},
						{"name": "netns", "hostPath": map[string]any{"path": netdev.NetnsDir, "type": "DirectoryOrCreate"}},
						// The node's BPF file system, where steering maps are pinned, and the
						// directory of the lock sfclab takes around pinning.
						{"name": "bpffs", "hostPath": map[string]any{"path": bpffsDir, "type": "Directory"}},
						{"name": "run", "hostPath": map[string]any{"path": filepath.Dir(steer.MountLock), "type": "DirectoryOrCreate"}},
						{"name": "cgroup", "hostPath": map[string]any{"path": cgroupDir, "type": "Directory"}},
						{"name": "host", "hostPath": map[string]any{"path": "/", "type": "Directory"}},
					},
				},
			},
		},
	}
}

// agentPod is the part of an agent pod the runtime reads.
type agentPod struct {
	Metadata struct {
		Name              string  `json:"name"`
		DeletionTimestamp *string `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		NodeName string `json:"nodeName"`
	} `json:"spec"`
	Status struct {
		ContainerStatuses []struct {
			Ready bool `json:"ready"`
			State struct {
				Running *struct{} `json:"running"`
			} `json:"state"`
		} `json:"containerStatuses"`
	} `json:"status"`
}

func (p *agentPod) running() bool {
	if p.Metadata.DeletionTimestamp != nil {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil {
			return true
		}
	}
	return false
}

// ensureAgent makes sure the agent DaemonSet runs the sfclab program at self and returns its
// running pod on each of the Kubernetes nodes kubeNodes, by node. A DaemonSet of another
// program is replaced.
// Equivalent to: kubectl create namespace sfclab-system; kubectl apply -f agent.yaml;
// kubectl -n sfclab-system rollout status daemonset/sfclab-agent
func (r Runtime) ensureAgent(ctx context.Context, c *client, self string, kubeNodes []string) (map[string]string, error) {
	dsPath := "/apis/apps/v1/namespaces/" + AgentNamespace + "/daemonsets/" + AgentName
	var ds struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			Template struct {
				Spec struct {
					NodeSelector map[string]string `json:"nodeSelector"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	err := c.do(ctx, "GET", dsPath, nil, nil, &ds)
	switch {
	case err == nil && ds.Metadata.Annotations[annotationBinary] == agentRevision(self):
		// A node selector (set by hand: sfclab's spec has none) that a node does not match
		// places no agent there: no use waiting for one.
		if sel := ds.Spec.Template.Spec.NodeSelector; len(sel) > 0 {
			for _, kn := range kubeNodes {
				var node struct {
					Metadata struct {
						Labels map[string]string `json:"labels"`
					} `json:"metadata"`
				}
				if err := c.do(ctx, "GET", "/api/v1/nodes/"+kn, nil, nil, &node); err != nil {
					return nil, fmt.Errorf("wait for the sfclab agent on node %s: %w", kn, err)
				}
				for k, v := range sel {
					if l, ok := node.Metadata.Labels[k]; !ok || l != v {
						return nil, fmt.Errorf("wait for the sfclab agent on node %s: its DaemonSet places no pod there: the node has no label %s=%s of its node selector (kubectl -n %s get daemonset %s -o yaml)", kn, k, v, AgentNamespace, AgentName)
					}
				}
			}
		}
	case err == nil || isNotFound(err):
		if err == nil { // another program's agent: replace it
			q := url.Values{"gracePeriodSeconds": {"0"}, "propagationPolicy": {"Foreground"}}
			if err := c.do(ctx, "DELETE", dsPath, q, nil, nil); err != nil && !isNotFound(err) {
				return nil, fmt.Errorf("replace the sfclab agent: %w", err)
			}
			if err := poll(ctx, PodTimeout, func() (bool, error) {
				err := c.do(ctx, "GET", dsPath, nil, nil, nil)
				return isNotFound(err), ignoreNotFound(err)
			}); err != nil {
				return nil, fmt.Errorf("replace the sfclab agent: wait for the old DaemonSet to go: %w", err)
			}
		}
		ns := map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": AgentNamespace, "labels": map[string]string{LabelManaged: "true", LabelAgent: "true"}}}
		if err := c.do(ctx, "POST", "/api/v1/namespaces", nil, ns, nil); err != nil && !isConflict(err) {
			return nil, fmt.Errorf("create namespace %s for the sfclab agent: %w", AgentNamespace, err)
		}
		if err := c.do(ctx, "POST", "/apis/apps/v1/namespaces/"+AgentNamespace+"/daemonsets", nil, r.agentSpec(self), nil); err != nil && !isConflict(err) {
			return nil, fmt.Errorf("create the sfclab agent DaemonSet: %w", err)
		}
	default:
		return nil, fmt.Errorf("find the sfclab agent: %w", err)
	}
	out := map[string]string{}
	q := url.Values{"labelSelector": {LabelAgent + "=true"}}
	err = poll(ctx, PodTimeout, func() (bool, error) {
		var list struct{ Items []*agentPod }
		if err := c.do(ctx, "GET", "/api/v1/namespaces/"+AgentNamespace+"/pods", q, nil, &list); err != nil {
			return false, err
		}
		clear(out)
		for _, p := range list.Items {
			if p.running() && slices.Contains(kubeNodes, p.Spec.NodeName) {
				out[p.Spec.NodeName] = p.Metadata.Name
			}
		}
		return len(out) == len(kubeNodes), nil
	})
	if err != nil {
		var missing []string
		for _, n := range kubeNodes {
			if out[n] == "" {
				missing = append(missing, n)
			}
		}
		return nil, fmt.Errorf("wait for the sfclab agent on node %s (kubectl -n %s get pods -o wide): %w", strings.Join(missing, ", "), AgentNamespace, err)
	}
	return out, nil
}

func ignoreNotFound(err error) error {
	if isNotFound(err) {
		return nil
	}
	return err
}

// agentCall sends one request to the agent pod pod on Kubernetes node kn and decodes its
// answer into ans (nil: none wanted), on the session to that pod (session.go; one is started
// when none is open). An agent whose program has no sessions is asked with one exec per
// request (agentExec).
func agentCall(ctx context.Context, c *client, kn, pod, op string, req, ans any) error {
	// A session outlives its pod's API object for as long as the kubelet takes to stop the
	// container: a pod deleted is gone for its requests at once, as for an exec of its own.
	err := c.do(ctx, "GET", "/api/v1/namespaces/"+AgentNamespace+"/pods/"+pod, nil, nil, nil)
	if err != nil {
		return fmt.Errorf("sfclab agent %s on node %s: %s: %w", pod, kn, op, err)
	}
	for try := 0; try < 2; try++ {
		var s *session
		if s, err = openSession(c, kn, pod); err == nil {
			err = s.call(ctx, op, req, ans)
		}
		if !errors.Is(err, errSessionClosing) {
			break
		}
	}
	if errors.Is(err, errNoSession) {
		return agentExec(ctx, c, kn, pod, op, req, ans)
	}
	if err != nil {
		return fmt.Errorf("sfclab agent %s on node %s: %s: %w", pod, kn, op, err)
	}
	return nil
}

// agentExec sends one request to the agent pod pod on Kubernetes node kn in an exec of its
// own and decodes its answer into ans (nil: none wanted).
// Equivalent to: kubectl exec -i -n sfclab-system POD -c agent -- sfclab agent OP <req.json
func agentExec(ctx context.Context, c *client, kn, pod, op string, req, ans any) error {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		return fmt.Errorf("ask the sfclab agent: sfclab reaches its agent through the API server's exec (kubectl exec), and kubectl is not on PATH: %w", err)
	}
	in, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("ask the sfclab agent %s: %w", op, err)
	}
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", c.Kubeconfig, "exec", "-i", "-n", AgentNamespace, pod, "-c", agentContainer,
		"--", "/usr/local/bin/sfclab", "agent", op)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &out, &errOut
	err = cmd.Run()
	if err == nil && ans != nil {
		err = json.Unmarshal(out.Bytes(), ans)
	}
	if err != nil {
		return fmt.Errorf("sfclab agent %s on node %s: %s: %w: %s", pod, kn, op, err, strings.TrimSpace(errOut.String()))
	}
	return nil
}

// agentAttach asks the agent pod on each Kubernetes node to attach that node's pods (in
// parallel, one request per node) and returns the pods' host PIDs by lab node.
func agentAttach(ctx context.Context, c *client, agents map[string]string, reqs map[string]AgentRequest) (map[string]int, error) {
	var mu sync.Mutex
	pids := map[string]int{}
	var wg sync.WaitGroup
	var errs []error
	for kn, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ans AgentAnswer
			err := agentCall(ctx, c, kn, agents[kn], AgentAttach, req, &ans)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("attach the pods of lab %s: %w", req.Lab, err))
				return
			}
			for n, pid := range ans.PIDs {
				pids[n] = pid
			}
		}()
	}
	wg.Wait()
	return pids, errors.Join(errs...)
}

// removeAgent deletes the agent's namespace (its DaemonSet and pods with it) and waits until
// it is gone; nothing to do when it does not exist.
func removeAgent(ctx context.Context, c *client) error {
	return deleteNamespace(ctx, c, AgentNamespace, true)
}
