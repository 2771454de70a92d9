package kubernetes_test

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/hosts"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime/kubernetes"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/steer"
)

// TestAgentDiesMidDeploy: the agent pod is deleted (no grace period) once it has named the
// lab's pod namespaces and before it wires the segments. The deploy, which talks to the agent
// pods it started with, fails naming the dead one, and its unwinding has the DaemonSet's new
// agent pod remove what the dead one made: nothing of the lab is left in the cluster or on
// the node (namespace names, fabric).
func TestAgentDiesMidDeploy(t *testing.T) {
	requireCluster(t)
	d := deployer(t)
	killed := ""
	kubernetes.SetAfterAttach(func(agents map[string]string) {
		killed = agents["localhost"]
		out, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, "-n", kubernetes.AgentNamespace, "delete", "pod", killed,
			"--grace-period=0", "--force", "--wait=true").CombinedOutput()
		if err != nil {
			t.Errorf("kubectl delete pod %s: %v: %s", killed, err, out)
		}
		names, _ := netdev.ListNetns(plan.NetnsName("i26w-die", ""))
		if len(names) == 0 {
			t.Errorf("the agent named no namespace before it was killed")
		}
	})
	t.Cleanup(func() { kubernetes.SetAfterAttach(nil) })
	lab := loadLab(t, "../../examples/baseline.yaml", "i26w-die", spec.RuntimeKubernetes)
	p, err := deployRefused(t, d, lab, "test", "deploy with its agent pod killed")
	t.Logf("deploy failed: %v", err)
	if killed == "" {
		t.Fatal("the deploy failed before the agent was asked anything")
	}
	if !strings.Contains(err.Error(), "sfclab agent "+killed) {
		t.Errorf("error %q does not name the killed agent pod %s", err, killed)
	}
	checkLabGone(t, p.Lab, "the failed deploy")
	if left, _ := netdev.ListNetns(plan.FabricName(p.Lab)); len(left) > 0 {
		t.Errorf("the failed deploy left its fabric on the node: %v", left)
	}
}

// agentDo runs one agent request in this process (as `sfclab agent OP` does in the agent's
// pod) and decodes the answer into ans.
func agentDo(t *testing.T, op string, req, ans any) error {
	t.Helper()
	in, _ := json.Marshal(req)
	var out bytes.Buffer
	if err := kubernetes.AgentMain([]string{op}, bytes.NewReader(in), &out); err != nil {
		return err
	}
	if ans != nil {
		if err := json.Unmarshal(out.Bytes(), ans); err != nil {
			t.Fatalf("agent %s answered %q: %v", op, out.String(), err)
		}
	}
	return nil
}

// TestAgentRequests runs the agent's wiring requests on this node's kernel as the agent pod
// runs them: "hosts" builds an emulated host with a bridge and veths into two existing
// namespaces (traffic crosses it), "steer" loads and attaches the steering programs to the
// ports' host ends, "link" wires a plain veth pair between two more, "configure" sets a
// sysctl and a route there, "ports" finds the ports "hosts" made, a bad "hosts" request
// leaves nothing of what it built, and "destroy" removes the lab's namespaces and maps.
func TestAgentRequests(t *testing.T) {
	requireCluster(t) // root, and the node's BPF file system mounted by start.sh
	const lab = "i26w-ag"
	t.Cleanup(func() {
		names, _ := netdev.ListNetns(plan.NetnsName(lab, ""))
		for _, n := range names {
			netdev.DeleteNetns(n)
		}
		steer.Unpin(lab)
	})
	for _, n := range []string{"a", "b", "c", "d"} {
		if err := netdev.CreateNetns(plan.NetnsName(lab, n)); err != nil {
			t.Fatal(err)
		}
	}
	pfx := func(s string) netip.Prefix { return netip.MustParsePrefix(s) }
	topo := &hosts.Topology{Lab: lab, NodesExist: true,
		Hosts:    []hosts.Host{{Name: "h", ID: 1}},
		Networks: []hosts.Network{{Name: "n0", Bridge: "br0", VNI: 1}},
		Nodes: []hosts.Node{
			{Name: "a", Host: "h", Ports: []hosts.Port{{Ifname: "eth1", HostIf: "pa", Network: "n0", Addr: pfx("198.18.7.1/24")}}},
			{Name: "b", Host: "h", Ports: []hosts.Port{{Ifname: "eth1", HostIf: "pb", Network: "n0", Addr: pfx("198.18.7.2/24")}}},
		}}
	var ans kubernetes.AgentHostsAnswer
	if err := agentDo(t, kubernetes.AgentHosts, kubernetes.AgentHostsRequest{Topology: topo}, &ans); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a/eth1", "b/eth1"} {
		if at := ans.Ports[k]; at.Index == 0 || len(at.MAC) != 6 {
			t.Errorf("port %s: answer %+v, want its host end's ifindex and its MAC", k, at)
		}
	}
	if out, err := exec.Command("ip", "netns", "exec", plan.NetnsName(lab, "a"), "ping", "-c", "1", "-W", "2", "198.18.7.2").CombinedOutput(); err != nil {
		t.Errorf("ping across the agent's bridge: %v: %s", err, out)
	}
	hostNS := hosts.HostNetns(lab, "h")
	att := steer.Attachment{Hosts: []uint32{1}, Ports: []steer.PortAttachment{{NS: hostNS, Host: 1, Ifname: "pa"}, {NS: hostNS, Host: 1, Ifname: "pb"}}}
	if err := agentDo(t, kubernetes.AgentSteer, kubernetes.AgentSteerRequest{Lab: lab, Attachment: att}, nil); err != nil {
		t.Fatal(err)
	}
	for _, ifname := range []string{"pa", "pb"} {
		if ok, err := steer.Attached(hostNS, ifname); err != nil || !ok {
			t.Errorf("steering on %s/%s: attached %v, %v", hostNS, ifname, ok, err)
		}
	}
	// A plain lab's veth pair between c and d, as the netns runtime wires it.
	wp := &plan.Plan{Lab: lab, MTU: 1500,
		Nodes: []*plan.Node{
			{Name: "c", Netns: plan.NetnsName(lab, "c"), Interfaces: []*plan.Interface{{Name: "eth1", Segment: "s0", Address: pfx("198.18.8.1/30")}}},
			{Name: "d", Netns: plan.NetnsName(lab, "d"), Interfaces: []*plan.Interface{{Name: "eth1", Segment: "s0", Address: pfx("198.18.8.2/30")}}},
		},
		Segments: []*plan.Segment{{Name: "s0", Subnet: pfx("198.18.8.0/30"), Members: []string{"c/eth1", "d/eth1"}}}}
	if err := agentDo(t, kubernetes.AgentLink, kubernetes.AgentLinkRequest{Plan: wp}, nil); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "netns", "exec", plan.NetnsName(lab, "c"), "ping", "-c", "1", "-W", "2", "198.18.8.2").CombinedOutput(); err != nil {
		t.Errorf("ping across the agent's veth pair: %v: %s", err, out)
	}
	// configure: a sysctl and a route in c, as deploy's phases send them.
	set := kubernetes.AgentConfigureRequest{Lab: lab, Nodes: []kubernetes.AgentNodeSettings{{Node: "c", Netns: plan.NetnsName(lab, "c"),
		Settings: netdev.Settings{Sysctls: [][2]string{{"net.ipv4.ip_forward", "1"}},
			Routes: []netdev.Route{{Dst: pfx("198.18.99.0/24"), NextHops: []netdev.NextHop{{Via: netip.MustParseAddr("198.18.8.2")}}}}}}}}
	if err := agentDo(t, kubernetes.AgentConfigure, set, nil); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "netns", "exec", plan.NetnsName(lab, "c"), "sh", "-c", "cat /proc/sys/net/ipv4/ip_forward; ip route show 198.18.99.0/24").CombinedOutput(); err != nil ||
		!strings.HasPrefix(string(out), "1\n") || !strings.Contains(string(out), "via 198.18.8.2") {
		t.Errorf("configure: c has %q (%v), want forwarding on and the route", out, err)
	}
	// ports: where a's and b's ports are, as the hosts request answered.
	var at kubernetes.AgentHostsAnswer
	pr := kubernetes.AgentPortsRequest{Ports: map[string]kubernetes.AgentPortRef{
		"a/eth1": {HostNS: hostNS, HostIf: "pa", NodeNS: plan.NetnsName(lab, "a"), Ifname: "eth1"}}}
	if err := agentDo(t, kubernetes.AgentPorts, pr, &at); err != nil {
		t.Fatal(err)
	}
	if got, want := at.Ports["a/eth1"], ans.Ports["a/eth1"]; got.Index != want.Index || got.MAC.String() != want.MAC.String() {
		t.Errorf("ports: a/eth1 at %+v, the hosts request said %+v", got, want)
	}
	// A topology whose second node does not exist: the host built for it goes again.
	bad := &hosts.Topology{Lab: lab, NodesExist: true, Hosts: []hosts.Host{{Name: "x", ID: 2}},
		Networks: []hosts.Network{{Name: "n0", Bridge: "br0", VNI: 1}},
		Nodes:    []hosts.Node{{Name: "nosuch", Host: "x", Ports: []hosts.Port{{Ifname: "eth1", HostIf: "px", Network: "n0"}}}}}
	if err := agentDo(t, kubernetes.AgentHosts, kubernetes.AgentHostsRequest{Topology: bad}, nil); err == nil {
		t.Error("hosts request for a node that does not exist succeeded")
	}
	if left, _ := netdev.ListNetns(hosts.HostNetns(lab, "x")); len(left) > 0 {
		t.Errorf("the failed hosts request left %v", left)
	}
	if err := agentDo(t, kubernetes.AgentDestroy, kubernetes.AgentDestroyRequest{Lab: lab}, nil); err != nil {
		t.Fatal(err)
	}
	if left, _ := netdev.ListNetns(plan.NetnsName(lab, "")); len(left) > 0 {
		t.Errorf("destroy left namespaces %v", left)
	}
	if pinned, _ := steer.Pinned(); strings.Contains(strings.Join(pinned, " "), lab) {
		t.Errorf("destroy left the steering maps pinned: %v", pinned)
	}
}
