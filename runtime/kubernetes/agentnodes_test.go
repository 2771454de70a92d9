package kubernetes

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// testNode is a Kubernetes node for the tests: name, Ready condition status ("" for none),
// labels, taints ("key=value:Effect") and whether it is being deleted.
func testNode(name, ready string, labels map[string]string, deleting bool, taints ...string) *kubeNode {
	n := &kubeNode{}
	n.Metadata.Name, n.Metadata.Labels = name, labels
	if deleting {
		ts := "2026-11-27T20:00:00Z"
		n.Metadata.DeletionTimestamp = &ts
	}
	if ready != "" {
		n.Status.Conditions = append(n.Status.Conditions, struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		}{"Ready", ready})
	}
	for _, t := range taints {
		kv, effect, _ := strings.Cut(t, ":")
		k, v, _ := strings.Cut(kv, "=")
		n.Spec.Taints = append(n.Spec.Taints, taint{Key: k, Value: v, Effect: effect})
	}
	return n
}

// testAgentPod is an agent pod on node kn, running or not.
func testAgentPod(name, kn string, running bool) *agentPod {
	p := &agentPod{}
	p.Metadata.Name, p.Spec.NodeName = name, kn
	cs := struct {
		Ready bool `json:"ready"`
		State struct {
			Running *struct{} `json:"running"`
		} `json:"state"`
	}{}
	if running {
		cs.State.Running = &struct{}{}
	}
	p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, cs)
	return p
}

// TestExpectAgents: the nodes that must run an agent are the Ready ones not being deleted that
// the DaemonSet's node selector and tolerations (its own and the DaemonSet controller's) admit;
// pods on other nodes are not counted, whatever the API server still says of them, and every
// other node is named with its reason.
func TestExpectAgents(t *testing.T) {
	sfclabDS := &agentDaemonSet{} // sfclab's spec: tolerates everything
	sfclabDS.Spec.Template.Spec.Tolerations = []toleration{{Operator: "Exists"}}
	selective := &agentDaemonSet{} // edited by hand: a selector, one toleration
	selective.Spec.Template.Spec.NodeSelector = map[string]string{"sfclab": "yes"}
	selective.Spec.Template.Spec.Tolerations = []toleration{{Key: "dedicated", Operator: "Equal", Value: "sfc", Effect: "NoSchedule"}}
	yes := map[string]string{"sfclab": "yes"}
	for _, tc := range []struct {
		name    string
		nodes   []*kubeNode
		ds      *agentDaemonSet
		pods    []*agentPod
		want    []string          // nodes that must run an agent
		running map[string]string // their running agent pods
		why     map[string]string // node -> part of why it has none the runtime asks
	}{
		{
			name:    "two Ready nodes, an agent on each",
			nodes:   []*kubeNode{testNode("a", "True", nil, false), testNode("b", "True", nil, false)},
			ds:      sfclabDS,
			pods:    []*agentPod{testAgentPod("ag-a", "a", true), testAgentPod("ag-b", "b", true)},
			want:    []string{"a", "b"},
			running: map[string]string{"a": "ag-a", "b": "ag-b"},
		},
		{
			name:    "an agent pod not running yet (being replaced): its node is still wanted",
			nodes:   []*kubeNode{testNode("a", "True", nil, false), testNode("b", "True", nil, false)},
			ds:      sfclabDS,
			pods:    []*agentPod{testAgentPod("ag-a", "a", true), testAgentPod("ag-b", "b", false)},
			want:    []string{"a", "b"},
			running: map[string]string{"a": "ag-a"},
		},
		{
			name:  "node deleted: its agent pod, still in the API, is not counted (the DaemonSet's desired number stays 2)",
			nodes: []*kubeNode{testNode("a", "True", nil, false)},
			ds:    sfclabDS,
			pods:  []*agentPod{testAgentPod("ag-a", "a", true), testAgentPod("ag-b", "b", true)},
			want:  []string{"a"}, running: map[string]string{"a": "ag-a"},
			why: map[string]string{"b": "is no longer in the cluster"},
		},
		{
			name: "node NotReady (kubelet silent: Unknown) or False: its agent shown running is not asked",
			nodes: []*kubeNode{testNode("a", "True", nil, false), testNode("b", "Unknown", nil, false,
				"node.kubernetes.io/unreachable=:NoExecute"), testNode("c", "False", nil, false), testNode("d", "", nil, false)},
			ds:      sfclabDS,
			pods:    []*agentPod{testAgentPod("ag-a", "a", true), testAgentPod("ag-b", "b", true), testAgentPod("ag-c", "c", true)},
			want:    []string{"a"},
			running: map[string]string{"a": "ag-a"},
			why:     map[string]string{"b": "is not Ready (Ready=Unknown)", "c": "is not Ready (Ready=False)", "d": "is not Ready (no Ready condition)"},
		},
		{
			name:    "node being deleted",
			nodes:   []*kubeNode{testNode("a", "True", nil, false), testNode("b", "True", nil, true)},
			ds:      sfclabDS,
			pods:    []*agentPod{testAgentPod("ag-a", "a", true), testAgentPod("ag-b", "b", true)},
			want:    []string{"a"},
			running: map[string]string{"a": "ag-a"},
			why:     map[string]string{"b": "is being deleted"},
		},
		{
			name: "cordoned and tainted nodes keep their agent (sfclab's DaemonSet tolerates every taint)",
			nodes: []*kubeNode{testNode("a", "True", nil, false, "node.kubernetes.io/unschedulable=:NoSchedule"),
				testNode("b", "True", nil, false, "gpu=x:NoExecute")},
			ds:      sfclabDS,
			pods:    []*agentPod{testAgentPod("ag-a", "a", true)},
			want:    []string{"a", "b"},
			running: map[string]string{"a": "ag-a"},
		},
		{
			name: "a DaemonSet edited by hand: its selector and tolerations (and the controller's own) decide",
			nodes: []*kubeNode{
				testNode("a", "True", yes, false),
				testNode("b", "True", nil, false),
				testNode("c", "True", yes, false, "dedicated=sfc:NoSchedule", "node.kubernetes.io/unschedulable=:NoSchedule", "soft=x:PreferNoSchedule"),
				testNode("d", "True", yes, false, "dedicated=other:NoSchedule"),
				testNode("e", "True", map[string]string{"sfclab": "no"}, false),
			},
			ds:      selective,
			pods:    []*agentPod{testAgentPod("ag-a", "a", true), testAgentPod("ag-c", "c", true)},
			want:    []string{"a", "c"},
			running: map[string]string{"a": "ag-a", "c": "ag-c"},
			why: map[string]string{
				"b": "has no label sfclab=yes of the agent DaemonSet's node selector",
				"d": "has taint dedicated=other:NoSchedule, which the agent DaemonSet does not tolerate",
				"e": "has no label sfclab=yes",
			},
		},
		{
			name:  "no node Ready: none wanted, none asked",
			nodes: []*kubeNode{testNode("a", "Unknown", nil, false)},
			ds:    sfclabDS,
			pods:  []*agentPod{testAgentPod("ag-a", "a", true)},
			want:  nil, running: map[string]string{},
			why: map[string]string{"a": "is not Ready"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, v := expectAgents(tc.nodes, tc.ds, tc.pods)
			if !slices.Equal(want, tc.want) {
				t.Errorf("nodes that must run an agent: %v, want %v", want, tc.want)
			}
			if len(v.pods) != len(tc.running) {
				t.Errorf("running agents %v, want %v", v.pods, tc.running)
			}
			for kn, pod := range tc.running {
				if v.pods[kn] != pod {
					t.Errorf("running agents %v, want %v", v.pods, tc.running)
				}
			}
			for _, kn := range want {
				if w := v.why(kn); w != "" {
					t.Errorf("node %s must run an agent, yet why(%s) = %q", kn, kn, w)
				}
			}
			for kn, w := range tc.why {
				if got := v.why(kn); !strings.Contains(got, w) {
					t.Errorf("why node %s has no agent: %q, want %q", kn, got, w)
				}
			}
		})
	}
}

// TestTolerates: the scheduler's matching of a toleration against a taint.
func TestTolerates(t *testing.T) {
	tn := taint{Key: "k", Value: "v", Effect: "NoSchedule"}
	for _, tc := range []struct {
		o    toleration
		want bool
	}{
		{toleration{Operator: "Exists"}, true},
		{toleration{Operator: "Exists", Effect: "NoExecute"}, false},
		{toleration{Key: "k", Operator: "Exists"}, true},
		{toleration{Key: "k", Operator: "Equal", Value: "v"}, true},
		{toleration{Key: "k", Value: "v"}, true}, // Equal is the default
		{toleration{Key: "k", Operator: "Equal", Value: "w"}, false},
		{toleration{Key: "other", Operator: "Exists"}, false},
		{toleration{Operator: "Equal"}, false}, // an empty key needs Exists
		{toleration{Key: "k", Operator: "Exists", Effect: "NoSchedule"}, true},
	} {
		if got := tc.o.tolerates(tn); got != tc.want {
			t.Errorf("%+v tolerates %+v: %v, want %v", tc.o, tn, got, tc.want)
		}
	}
}

// TestDestroyOnNodesNodeGone: against a fake API server whose agent DaemonSet still wants an
// agent on node b (its desired number stale) and still shows b's agent running, destroy asks
// the agent on Ready node a only, waits for nothing, and names what it could not remove: the
// lab's pods on b, which is not Ready, and on c, which is gone.
func TestDestroyOnNodesNodeGone(t *testing.T) {
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		enc := json.NewEncoder(w)
		switch r.URL.Path {
		case "/apis/apps/v1/namespaces/" + AgentNamespace + "/daemonsets/" + AgentName:
			enc.Encode(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"tolerations": []map[string]string{{"operator": "Exists"}}}}},
				"status": map[string]any{"desiredNumberScheduled": 3}})
		case "/api/v1/nodes":
			enc.Encode(map[string]any{"items": []*kubeNode{testNode("a", "True", nil, false), testNode("b", "Unknown", nil, false)}})
		case "/api/v1/namespaces/" + AgentNamespace + "/pods":
			enc.Encode(map[string]any{"items": []*agentPod{testAgentPod("ag-a", "a", true), testAgentPod("ag-b", "b", true), testAgentPod("ag-c", "c", true)}})
		case "/api/v1/namespaces/" + Namespace("l") + "/pods":
			w.Write([]byte(`{"items":[{"metadata":{"name":"s"},"spec":{"nodeName":"a"}},{"metadata":{"name":"v"},"spec":{"nodeName":"b"}},` +
				`{"metadata":{"name":"x"},"spec":{"nodeName":"c"}},{"metadata":{"name":"y"},"spec":{"nodeName":"c"}}]}`))
		case "/api/v1/namespaces/" + AgentNamespace + "/pods/ag-a", "/api/v1/namespaces/" + AgentNamespace + "/pods/ag-b", "/api/v1/namespaces/" + AgentNamespace + "/pods/ag-c":
			// agentCall's GET of the pod before a request: record who is asked, then fail the
			// request (there is no agent behind this fake).
			asked = append(asked, strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/"+AgentNamespace+"/pods/"))
			w.WriteHeader(http.StatusNotFound)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	old := PodTimeout
	PodTimeout = 2 * time.Second // a wait for b's or c's agent would fail with "timed out"
	t.Cleanup(func() { PodTimeout = old })
	c := &client{Server: srv.URL, http: srv.Client()}
	err := destroyOnNodes(context.Background(), c, "l")
	if !slices.Equal(asked, []string{"ag-a"}) {
		t.Errorf("agents asked: %v, want only ag-a (node a)", asked)
	}
	if err == nil {
		t.Fatal("destroy with pods on a node not Ready and on one gone: no error, want both named")
	}
	msg := err.Error()
	for _, w := range []string{
		"remove lab l from Kubernetes node b (its pods v): the node is not Ready (Ready=Unknown), so its sfclab agent was not asked",
		"remove lab l from Kubernetes node c (its pods x, y): the node is no longer in the cluster",
		"/sys/fs/bpf/sfclab/l@b",
		"the lab's pods and namespace in the cluster are removed",
	} {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q\nwant %q", msg, w)
		}
	}
	if strings.Contains(msg, "timed out") || strings.Contains(msg, "Kubernetes node a (") {
		t.Errorf("error %q: waited for an agent, or named node a, whose agent was asked", msg)
	}
}
