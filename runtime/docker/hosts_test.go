package docker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// dockerHostsLab is study D's placement on docker: a routed chain whose client (macvlan on its
// host's bridge) and firewall run on snd, the server (ebpf-redirect) on rsp, each host on its
// own core, their link shaped.
func dockerHostsLab(name, cpuA, cpuB string) string {
	return `name: ` + name + `
runtime: docker
hosts:
  - {name: snd, cpus: "` + cpuA + `", link: {rate: 100mbit}}
  - {name: rsp, cpus: "` + cpuB + `", link: {rate: 100mbit}}
endpoints:
  client: {kind: client, host: snd, driver: macvlan}
  server: {kind: server, host: rsp, driver: ebpf-redirect}
functions:
  fw: {kind: firewall, host: snd}
chains:
  - {name: web, from: client, to: server, hops: [fw]}
`
}

// TestRoutedHostsOnDocker deploys a routed lab on two emulated hosts on docker: containers
// without a Docker network, their ports made by package hosts (a macvlan, veths, the
// ebpf-redirect driver), each container confined to its host's core by the engine's cpuset.
// Ping and iperf3 cross the firewall and the shaped VXLAN link; destroy leaves no container,
// named namespace or pinned map.
func TestRoutedHostsOnDocker(t *testing.T) {
	requireEngine(t)
	cpuB := "1"
	if cgroup.CheckCPUs("1") != nil {
		cpuB = "0" // a one-core machine: both hosts share core 0
	}
	lab, err := spec.Decode([]byte(dockerHostsLab("t-dk-rh", "0", cpuB)), "test.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(lab)
	if err != nil {
		t.Fatal(err)
	}
	if !p.HostPorts() || len(p.Segments) == 0 {
		t.Fatalf("plan: HostPorts %v, %d segments; want ports from package hosts on the plan's segments", p.HostPorts(), len(p.Segments))
	}
	d := deployer(t)
	t.Cleanup(func() { // after deployLab's destroy
		if left, err := netdev.ListNetns(plan.NetnsPrefix + p.Lab + "."); err != nil || len(left) > 0 {
			t.Errorf("destroy left namespaces %v (%v)", left, err)
		}
	})
	deployLab(t, d, p)

	client, server := node(t, d, p, "client"), node(t, d, p, "server")
	for _, tc := range []struct{ node, want string }{{"client", "0"}, {"fw", "0"}, {"server", cpuB}} {
		out, err := node(t, d, p, tc.node).Output(context.Background(), nil, "grep", "Cpus_allowed_list", "/proc/self/status")
		if got := strings.Join(strings.Fields(string(out)), " "); err != nil || got != "Cpus_allowed_list: "+tc.want {
			t.Errorf("%s: a process in its container runs on %q (%v), want cores %s", tc.node, got, err, tc.want)
		}
	}
	ns, err := netdev.OpenNS(p.Node("client").Netns)
	if err != nil {
		t.Fatal(err)
	}
	links, err := ns.Links()
	ns.Close()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, l := range links {
		kinds[l.Name] = l.Kind
	}
	if ifc := p.Node("client").Interfaces[0].Name; kinds[ifc] != "macvlan" {
		t.Errorf("client's %s is a %q (links %v), want the macvlan its driver makes", ifc, kinds[ifc], kinds)
	}
	target := p.Chain("web").Target.String()
	out, err := client.Output(context.Background(), nil, "ping", "-c", "2", "-i", "0.2", "-W", "2", target)
	if err != nil {
		t.Fatalf("ping across the hosts: %v\n%s", err, out)
	}
	bps := iperfAcross(t, d, p, client, server, target)
	t.Logf("TCP across a 100mbit host link on docker: %.1f Mbit/s", bps/1e6)
	if bps > 110e6 || bps < 50e6 {
		t.Errorf("TCP across a 100mbit host link: %.1f Mbit/s, want 50-110 (the link's tbf)", bps/1e6)
	}
}
