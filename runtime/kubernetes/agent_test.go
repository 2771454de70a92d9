package kubernetes

import (
	"bytes"
	"strings"
	"testing"
)

// TestAgentSpec: the agent's DaemonSet runs the given sfclab program privileged, in the node's
// network and PID namespaces, with /run/netns shared both ways, on every node (tolerating
// taints), and records the program it runs.
func TestAgentSpec(t *testing.T) {
	ds := Runtime{Image: "img:1"}.agentSpec("/opt/sfclab")
	meta := ds["metadata"].(map[string]any)
	if meta["annotations"].(map[string]string)[annotationBinary] != agentRevision("/opt/sfclab") {
		t.Errorf("annotations %v do not record the program", meta["annotations"])
	}
	pod := ds["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	for _, k := range []string{"hostNetwork", "hostPID"} {
		if pod[k] != true {
			t.Errorf("%s = %v, want true", k, pod[k])
		}
	}
	c := pod["containers"].([]map[string]any)[0]
	if c["securityContext"].(map[string]any)["privileged"] != true || c["image"] != "img:1" {
		t.Errorf("container %v is not privileged or not the image", c)
	}
	var prop, bin, bpffs, lock, cg, host string
	for _, m := range c["volumeMounts"].([]map[string]any) {
		switch m["mountPath"] {
		case "/run/netns":
			prop, _ = m["mountPropagation"].(string)
		case "/usr/local/bin/sfclab":
			bin = "mounted"
		case "/sys/fs/bpf":
			bpffs = "mounted"
		case "/run/sfclab":
			lock = "mounted"
		case "/sys/fs/cgroup":
			cg = "mounted"
		case "/host":
			host = "mounted"
		}
	}
	if prop != "Bidirectional" || bin != "mounted" || bpffs != "mounted" || lock != "mounted" || cg != "mounted" || host != "mounted" {
		t.Errorf("/run/netns propagation %q, program %q, /sys/fs/bpf %q, /run/sfclab %q, /sys/fs/cgroup %q, / at /host %q", prop, bin, bpffs, lock, cg, host)
	}
	if tol := pod["tolerations"].([]map[string]any); len(tol) != 1 || tol[0]["operator"] != "Exists" {
		t.Errorf("tolerations %v, want every taint tolerated", tol)
	}
}

// TestAgentMainRefuses: the agent refuses an unknown request, a request that is not JSON, and
// a pod whose container has no process on its node, naming it.
func TestAgentMainRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		want  string
	}{
		{"unknown", []string{"wire"}, "", `unknown request "wire"`},
		{"not json", []string{"attach"}, "nope", "read request"},
		{"unknown field", []string{"destroy"}, `{"lab":"x","nodes":1}`, "read request"},
		{"destroy without a lab", []string{"destroy"}, `{}`, "no lab named"},
		{"link without a plan", []string{"link"}, `{}`, "no plan"},
		{"hosts without a topology", []string{"hosts"}, `{}`, "no topology"},
		{"steer without bpffs or ports", []string{"steer"}, `{"lab":"i26w-x","attachment":{"hosts":[1],"ports":[{"ns":"sfc.i26w-x.nohost","host":1,"ifname":"p0"}]}}`, "steer"},
		{"configure a namespace that is not there", []string{"configure"}, `{"lab":"i26w-x","nodes":[{"node":"n1","netns":"sfc.i26w-x.n1","settings":{"sysctls":[["net.ipv4.ip_forward","1"]]}}]}`, "node n1: open netns sfc.i26w-x.n1"},
		{"bump without a node", []string{"bump"}, `{"lab":"x","nodes":[{}]}`, "no node"},
		{"tables without tables", []string{"tables"}, `{"lab":"x"}`, "no tables"},
		{"counters of a lab without maps", []string{"counters"}, `{"lab":"i26w-nomaps"}`, "no steering data plane pinned"},
		{"ports of a namespace that is not there", []string{"ports"}, `{"ports":{"n1/eth0":{"host_ns":"sfc.i26w-x.host","host_if":"p0","node_ns":"sfc.i26w-x.n1","ifname":"eth0"}}}`, "sfc.i26w-x.host"},
		{"node: no such container", []string{"node"}, `{"op":"output","node":"n1","netns":"sfc.x.n1","container":"0000deadbeef0000","argv":["true"]}`, "find the processes of pod n1 (container 0000deadbeef0000)"},
		{"no such container", []string{"attach"}, `{"lab":"x","pods":[{"node":"n1","netns":"sfc.x.n1","container":"0000deadbeef0000"}]}`, "find the processes of pod n1 (container 0000deadbeef0000)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := AgentMain(tc.args, strings.NewReader(tc.stdin), &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("answered %q on a refusal", out.String())
			}
		})
	}
}

// TestPinOf: an agent request pins a lab's maps under the lab, or under one node's part of
// the lab (steer.NodePin), and nothing else.
func TestPinOf(t *testing.T) {
	for _, tc := range []struct {
		lab, pin, want, err string
	}{
		{"l1", "", "l1", ""},
		{"l1", "l1@kn2", "l1@kn2", ""},
		{"l1", "l2@kn2", "", "not a node's part of lab l1"},
		{"l1", "l1@", "", "not a node's part of lab l1"},
		{"l1", "l1@a/../x", "", "not a node's part of lab l1"},
		{"l1", "l1@a@b", "", "not a node's part of lab l1"},
		{"", "", "", "no lab named"},
	} {
		got, err := pinOf(tc.lab, tc.pin)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("pinOf(%q, %q): error %v, want %q", tc.lab, tc.pin, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("pinOf(%q, %q) = %q, %v; want %q", tc.lab, tc.pin, got, err, tc.want)
		}
	}
}
