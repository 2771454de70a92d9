package kubernetes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/sfclab/sfclab/steer"
)

// Which Kubernetes nodes must have a running agent. The DaemonSet's desired number is not the
// answer: it can stay stale after a node is deleted (the controller recounts when one of its
// pods changes), and it keeps counting a node that went NotReady (the DaemonSet tolerates every
// taint, also unreachable), whose agent pod the API server still shows running but cannot
// reach. So the runtime counts the nodes itself: those Ready and not being deleted that the
// DaemonSet's node selector and tolerations admit, and asks no agent elsewhere.

// agentDaemonSet is the part of the agent's DaemonSet that says where it places pods.
type agentDaemonSet struct {
	Spec struct {
		Template struct {
			Spec struct {
				NodeSelector map[string]string `json:"nodeSelector"`
				Tolerations  []toleration      `json:"tolerations"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

type toleration struct {
	Key      string `json:"key"`
	Operator string `json:"operator"`
	Value    string `json:"value"`
	Effect   string `json:"effect"`
}

type taint struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Effect string `json:"effect"`
}

// daemonTolerations are the tolerations the DaemonSet controller adds to every daemon pod
// (pkg/controller/daemon/util: AddOrUpdateDaemonPodTolerations; the agent has the host's
// network, so network-unavailable too): a node with only these taints gets an agent. The
// not-ready and unreachable ones do not matter here: such a node is not Ready.
var daemonTolerations = []toleration{
	{Key: "node.kubernetes.io/disk-pressure", Operator: "Exists", Effect: "NoSchedule"},
	{Key: "node.kubernetes.io/memory-pressure", Operator: "Exists", Effect: "NoSchedule"},
	{Key: "node.kubernetes.io/pid-pressure", Operator: "Exists", Effect: "NoSchedule"},
	{Key: "node.kubernetes.io/unschedulable", Operator: "Exists", Effect: "NoSchedule"},
	{Key: "node.kubernetes.io/network-unavailable", Operator: "Exists", Effect: "NoSchedule"},
}

// tolerates reports whether toleration o tolerates taint t (the scheduler's rule: an empty key
// with Exists matches every key, an empty effect every effect).
func (o toleration) tolerates(t taint) bool {
	if o.Effect != "" && o.Effect != t.Effect {
		return false
	}
	if o.Key != "" && o.Key != t.Key {
		return false
	}
	switch o.Operator {
	case "Exists":
		return true
	case "", "Equal":
		return o.Key != "" && o.Value == t.Value
	}
	return false
}

// agentView is what the runtime knows of the agent on the cluster's nodes: the running agent
// pod on each node that must have one (pods), and the nodes and the DaemonSet to say why any
// other node has none to ask (why).
type agentView struct {
	pods  map[string]string // Kubernetes node -> running agent pod
	nodes map[string]*kubeNode
	ds    *agentDaemonSet
}

// why says why Kubernetes node kn has no agent the runtime asks; "" when it must have one.
func (v *agentView) why(kn string) string {
	n := v.nodes[kn]
	switch {
	case n == nil:
		return "is no longer in the cluster"
	case n.Metadata.DeletionTimestamp != nil:
		return "is being deleted"
	case !n.ready():
		return "is not Ready (" + n.readyCondition() + ")"
	}
	spec := v.ds.Spec.Template.Spec
	for _, k := range slices.Sorted(maps.Keys(spec.NodeSelector)) {
		if l, ok := n.Metadata.Labels[k]; !ok || l != spec.NodeSelector[k] {
			return fmt.Sprintf("has no label %s=%s of the agent DaemonSet's node selector", k, spec.NodeSelector[k])
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Effect != "NoSchedule" && t.Effect != "NoExecute" {
			continue
		}
		if !slices.ContainsFunc(append(slices.Clone(spec.Tolerations), daemonTolerations...), func(o toleration) bool { return o.tolerates(t) }) {
			return fmt.Sprintf("has taint %s=%s:%s, which the agent DaemonSet does not tolerate", t.Key, t.Value, t.Effect)
		}
	}
	return ""
}

// expectAgents returns, from the cluster's nodes, the agent DaemonSet and its pods, the nodes
// that must run an agent (sorted) and the running agent pod on each of them that has one.
// Pods on other nodes (not Ready, gone) are left out: the runtime does not ask them.
func expectAgents(nodes []*kubeNode, ds *agentDaemonSet, pods []*agentPod) (want []string, v *agentView) {
	v = &agentView{pods: map[string]string{}, nodes: map[string]*kubeNode{}, ds: ds}
	for _, n := range nodes {
		v.nodes[n.Metadata.Name] = n
	}
	for _, n := range nodes {
		if v.why(n.Metadata.Name) == "" {
			want = append(want, n.Metadata.Name)
		}
	}
	slices.Sort(want)
	for _, p := range pods {
		if p.running() && slices.Contains(want, p.Spec.NodeName) {
			v.pods[p.Spec.NodeName] = p.Metadata.Name
		}
	}
	return want, v
}

// runningAgents waits until every Kubernetes node that must run an agent (expectAgents) has a
// running agent pod (a pod that died is replaced by the DaemonSet; PodTimeout) and returns
// them, with why other nodes have none; no DaemonSet gives no pod. A node that is not Ready
// or is gone is not waited for.
func runningAgents(ctx context.Context, c *client) (*agentView, error) {
	var ds agentDaemonSet
	err := c.do(ctx, "GET", "/apis/apps/v1/namespaces/"+AgentNamespace+"/daemonsets/"+AgentName, nil, nil, &ds)
	if isNotFound(err) {
		return &agentView{pods: map[string]string{}, ds: &ds}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find the sfclab agent: %w", err)
	}
	var v *agentView
	var missing []string
	q := url.Values{"labelSelector": {LabelAgent + "=true"}}
	err = poll(ctx, PodTimeout, func() (bool, error) {
		var nodes struct{ Items []*kubeNode }
		if err := c.do(ctx, "GET", "/api/v1/nodes", nil, nil, &nodes); err != nil {
			return false, fmt.Errorf("list Kubernetes nodes: %w", err)
		}
		var pods struct{ Items []*agentPod }
		if err := c.do(ctx, "GET", "/api/v1/namespaces/"+AgentNamespace+"/pods", q, nil, &pods); err != nil {
			return false, err
		}
		var want []string
		want, v = expectAgents(nodes.Items, &ds, pods.Items)
		missing = slices.DeleteFunc(want, func(kn string) bool { return v.pods[kn] != "" })
		return len(missing) == 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("wait for the sfclab agent on node %s (kubectl -n %s get pods -o wide): %w", strings.Join(missing, ", "), AgentNamespace, err)
	}
	return v, nil
}

// destroyOnNodes asks every running agent to remove lab's state on its node (AgentDestroy),
// waiting for agent pods the DaemonSet is replacing on Ready nodes. A node of the lab's pods
// whose agent cannot be asked (the node is not Ready, or gone) is not waited for: the error
// names it and what stays there, after the other nodes are done.
func destroyOnNodes(ctx context.Context, c *client, lab string) error {
	v, err := runningAgents(ctx, c)
	if err != nil {
		return fmt.Errorf("remove lab %s from its nodes: %w", lab, err)
	}
	var errs []error
	for _, kn := range slices.Sorted(maps.Keys(v.pods)) {
		errs = append(errs, agentCall(ctx, c, kn, v.pods[kn], AgentDestroy, AgentDestroyRequest{Lab: lab}, nil))
	}
	if v.nodes == nil { // no agent DaemonSet: no agent made anything
		return errors.Join(errs...)
	}
	var pods struct{ Items []*podStatus }
	if err := c.do(ctx, "GET", "/api/v1/namespaces/"+Namespace(lab)+"/pods", nil, nil, &pods); err != nil && !isNotFound(err) {
		return errors.Join(append(errs, fmt.Errorf("find the Kubernetes nodes of lab %s: %w", lab, err))...)
	}
	byNode := map[string][]string{}
	for _, ps := range pods.Items {
		if kn := ps.Spec.NodeName; kn != "" && v.pods[kn] == "" {
			byNode[kn] = append(byNode[kn], ps.Metadata.Name)
		}
	}
	for _, kn := range slices.Sorted(maps.Keys(byNode)) {
		errs = append(errs, fmt.Errorf("remove lab %s from Kubernetes node %s (its pods %s): the node %s, so its sfclab agent was not asked to remove what the lab made there (its pods' network namespace names sfc.%s.*, emulated hosts, steering maps %s): the next deploy that uses the node sweeps them should it come back; the lab's pods and namespace in the cluster are removed",
			lab, kn, strings.Join(byNode[kn], ", "), cmp.Or(v.why(kn), "has no running sfclab agent"), lab, steer.PinDir(steer.NodePin(lab, kn))))
	}
	return errors.Join(errs...)
}
