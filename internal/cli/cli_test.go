package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/internal/labgen"
	"github.com/sfclab/sfclab/internal/testroot"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/runtime/vm"
	"github.com/sfclab/sfclab/steer"
	"github.com/vishvananda/netlink"
)

// TestMain lets a test run the real command line in a child process (for kill -9 tests).
func TestMain(m *testing.M) {
	vm.GuestMain() // this binary is also the agent of the guests a VM test boots
	// In a guest, `/init lb --config FILE` is `sfclab lb` (l4lb impl sfclab): this binary
	// stands in for sfclab there, as for a child.
	lbInGuest := len(os.Args) == 4 && os.Args[1] == "lb" && os.Args[2] == "--config"
	if os.Getenv("SFCLAB_CLI_CHILD") == "1" || lbInGuest { // as cmd/sfclab's main does
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func requireRoot(t *testing.T) { testroot.Require(t, "the command line tests deploy real labs") }

// run runs sfclab in-process with a private journal and returns exit code and output.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// requireVMLab readies a test that deploys VM nodes through the command line: root, QEMU and a
// guest kernel (skipped loudly without them), a private journal and a private guest image root.
func requireVMLab(t *testing.T) {
	t.Helper()
	requireRoot(t)
	if err := vm.CheckQEMU(); err != nil {
		t.Skipf("SKIPPED LOUDLY: %v", err)
	}
	if _, _, err := vm.HostKernel(); err != nil {
		t.Skipf("SKIPPED LOUDLY: %v", err)
	}
	privateState(t)
	t.Setenv(vm.ImageRootEnv, t.TempDir())
}

func privateState(t *testing.T) string {
	dir := t.TempDir()
	t.Setenv("SFCLAB_STATE_DIR", dir)
	return dir
}

func writeLabFile(t *testing.T, text string) string {
	f := filepath.Join(t.TempDir(), "lab.yaml")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestDryRunTouchesNothing(t *testing.T) {
	privateState(t)
	code, out, errOut := run(t, "deploy", "--dry-run", "../../examples/fw-lb.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden, err := os.ReadFile("../../plan/testdata/fw-lb.plan.txt")
	if err != nil {
		t.Fatal(err)
	}
	if out != string(golden) {
		t.Errorf("dry-run output differs from the plan golden file:\n%s", out)
	}
	if ns, _ := netdev.ListNetns("sfc.fw-lb"); len(ns) > 0 {
		t.Errorf("dry run created namespaces %v", ns)
	}
	code, out, _ = run(t, "deploy", "--dry-run", "-o", "json", "../../examples/lb-3.yaml")
	var v map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v["lab"] != "lb-3" {
		t.Errorf("json dry run: exit %d, %q", code, out)
	}
}

func TestBadInputMessages(t *testing.T) {
	privateState(t)
	tests := []struct {
		name, text string
		want       string
	}{
		{"syntax", "name: x\nendpoints: [\n", "lab.yaml:"},
		{"unknown field", "name: x\nendpointz: {}\n", `lab.yaml:2:1: unknown field "endpointz"`},
	}
	for _, tt := range tests {
		code, _, errOut := run(t, "deploy", writeLabFile(t, tt.text))
		if code != 1 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: exit %d, stderr %q, want %q", tt.name, code, errOut, tt.want)
		}
	}
	code, _, errOut := run(t, "deploy", "/nonexistent/lab.yaml")
	if code != 1 || !strings.Contains(errOut, "does not exist") {
		t.Errorf("missing file: exit %d, %q", code, errOut)
	}
}

func TestDeployExecInspectDestroy(t *testing.T) {
	requireRoot(t)
	privateState(t)
	lab := writeLabFile(t, "name: t-cli\nendpoints: {client: {}, server: {}}\nfunctions: {fw: {kind: firewall}}\nchains: [{from: client, to: server, hops: [fw]}]\n")
	code, out, errOut := run(t, "deploy", lab)
	t.Cleanup(func() { run(t, "destroy", "t-cli") })
	if code != 0 || !strings.Contains(out, "deployed lab t-cli") {
		t.Fatalf("deploy: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, _ := run(t, "exec", "t-cli", "client", "--", "ping", "-c", "1", "-W", "2", "198.18.1.2"); code != 0 {
		t.Errorf("ping through the firewall: exit %d", code)
	}
	if code, _, _ := run(t, "exec", "t-cli", "client", "--", "sh", "-c", "exit 7"); code != 7 {
		t.Errorf("exec exit code = %d, want 7", code)
	}
	code, out, _ = run(t, "inspect", "t-cli", "--format", "json")
	var infos []struct {
		Lab   string
		Nodes []struct {
			Name       string
			Interfaces []struct {
				Name  string
				Stats struct{ RxPackets uint64 } `json:"stats"`
			}
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &infos) != nil || len(infos) != 1 || len(infos[0].Nodes) != 3 {
		t.Fatalf("inspect json: exit %d %q", code, out)
	}
	code, out, _ = run(t, "inspect")
	if code != 0 || !strings.Contains(out, "t-cli") {
		t.Errorf("inspect list: %q", out)
	}
	if code, out, _ := run(t, "destroy", lab); code != 0 || !strings.Contains(out, "destroyed lab t-cli") {
		t.Errorf("destroy by file: exit %d %q", code, out)
	}
	if code, out, _ := run(t, "destroy", "t-cli"); code != 0 || !strings.Contains(out, "nothing to destroy") {
		t.Errorf("second destroy: exit %d %q", code, out)
	}
}

// After kill -9 of a deploy midway, destroy --all leaves nothing: no namespaces, no
// processes, no cgroups.
func TestKill9ThenDestroyAll(t *testing.T) {
	requireRoot(t)
	privateState(t)
	lab := writeLabFile(t, `name: t-kill
endpoints: {client: {}, server: {run: ["sleep 40"]}}
functions:
  a: {kind: forwarder}
  slow: {kind: custom, params: {setup: ["sleep 41"]}}
chains: [{from: client, to: server, hops: [a, slow]}]
`)
	// Wait until the deploy is inside the slow setup: its sleep runs in the node.
	killDeploy(t, lab, 10*time.Second, 20*time.Millisecond, func() bool { return sleepRunning("41") }, "deploy never reached the slow setup")
	if ns, _ := netdev.ListNetns("sfc.t-kill"); len(ns) == 0 {
		t.Fatal("test setup: the killed deploy left no namespaces to clean")
	}
	code, out, errOut := run(t, "destroy", "--all")
	if code != 0 || !strings.Contains(out, "destroyed lab t-kill") {
		t.Fatalf("destroy --all: exit %d\n%s%s", code, out, errOut)
	}
	if ns, _ := netdev.ListNetns("sfc.t-kill"); len(ns) > 0 {
		t.Errorf("namespaces left: %v", ns)
	}
	if sleepRunning("41") {
		t.Error("the setup's process survived destroy --all")
	}
	if _, err := cgroup.Open("labs/t-kill"); err == nil {
		t.Error("cgroup left")
	}
}

// After kill -9 of a docker attach-nat deploy midway (killed as soon as its host rules are
// in, while its containers are being created), destroy --all leaves no container, no network
// and no "sfclab lab=" line in the host's iptables (DOCKER-USER and the nat DNAT rule).
func TestKill9DockerNATThenDestroyAll(t *testing.T) {
	requireRoot(t)
	if exec.Command("docker", "info").Run() != nil {
		t.Skip("SKIPPED LOUDLY: no Docker engine answers")
	}
	privateState(t)
	lab := writeLabFile(t, `name: t-kill-nat
runtime: docker
docker: {attach: nat}
endpoints: {client: {kind: client}, server: {kind: server}}
chains:
  - {name: direct, from: client, to: server, classifier: {protocol: tcp, destination_port: 5201}}
`)
	tagged := func() []string {
		out, _ := exec.Command("iptables-save").Output()
		var lines []string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, `"sfclab lab=t-kill-nat"`) {
				lines = append(lines, l)
			}
		}
		return lines
	}
	hasDNAT := func(rules []string) bool {
		return slices.ContainsFunc(rules, func(l string) bool { return strings.Contains(l, "-j DNAT") })
	}
	killDeploy(t, lab, 3*time.Minute, 10*time.Millisecond, func() bool { return hasDNAT(tagged()) }, "deploy never added its DNAT rule") // the node image may have to be built
	// No pause here: the engine finishes the requests the killed deploy had in flight (a
	// container create goes on after its client is gone), and destroy, seeing the deploy
	// unfinished, looks again after deploy.SettleGrace (seen without that: one container left).
	code, out, errOut := run(t, "destroy", "--all")
	if code != 0 || !strings.Contains(out, "destroyed lab t-kill-nat") {
		t.Fatalf("destroy --all: exit %d\n%s%s", code, out, errOut)
	}
	if rules := tagged(); len(rules) > 0 {
		t.Errorf("host rules left: %q", rules)
	}
	for _, what := range [][]string{{"ps", "-aq"}, {"network", "ls", "-q"}} {
		args := append(what, "--filter", "label=sfclab.lab=t-kill-nat")
		if out, _ := exec.Command("docker", args...).Output(); len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("docker %s left %s", strings.Join(what, " "), out)
		}
	}
}

// killDeploy runs `sfclab deploy file` as a child process (destroy --all ends the test) and
// kills it with SIGKILL once reached holds, polled every every for at most within: a deploy
// killed midway. One that never gets there is killed too and fails the test with never.
func killDeploy(t *testing.T, file string, within, every time.Duration, reached func() bool, never string) {
	t.Helper()
	child := exec.Command(os.Args[0], "deploy", file)
	child.Env = append(os.Environ(), "SFCLAB_CLI_CHILD=1")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run(t, "destroy", "--all") })
	deadline := time.Now().Add(within)
	for !reached() {
		if time.Now().After(deadline) {
			child.Process.Kill()
			child.Wait()
			t.Fatal(never)
		}
		time.Sleep(every)
	}
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
}

// sleepRunning reports whether a `sleep ARG` process exists.
func sleepRunning(arg string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && string(cmd) == "sleep\x00"+arg+"\x00" {
			return true
		}
	}
	return false
}

// After kill -9 of a deploy while its VM boots (QEMU running, the guest not up yet), destroy
// --all leaves no QEMU, tap (they live in the VM node's namespace), socket or run directory,
// namespace or cgroup.
func TestKill9VMThenDestroyAll(t *testing.T) {
	requireVMLab(t)
	lab := writeLabFile(t, `name: t-kvm9
endpoints: {client: {}, server: {}}
functions:
  a: {kind: forwarder, vm: {}}
chains: [{from: client, to: server, hops: [a]}]
`)
	killDeploy(t, lab, 60*time.Second, 10*time.Millisecond, func() bool { return len(vm.QEMUPids("t-kvm9")) > 0 }, "deploy never started QEMU") // the guest image is built first
	if _, err := os.Stat(filepath.Join(vm.RunRoot, "t-kvm9", "a")); err != nil {
		t.Fatalf("test setup: the killed deploy left no VM run directory to clean: %v", err)
	}
	code, out, errOut := run(t, "destroy", "--all")
	if code != 0 || !strings.Contains(out, "destroyed lab t-kvm9") {
		t.Fatalf("destroy --all: exit %d\n%s%s", code, out, errOut)
	}
	if pids := vm.QEMUPids("t-kvm9"); len(pids) > 0 {
		t.Errorf("QEMU left: %v", pids)
	}
	if ns, _ := netdev.ListNetns("sfc.t-kvm9"); len(ns) > 0 {
		t.Errorf("namespaces (with the taps) left: %v", ns)
	}
	if _, err := os.Stat(filepath.Join(vm.RunRoot, "t-kvm9")); !os.IsNotExist(err) {
		t.Errorf("VM run directory (socket, console) left: %v", err)
	}
	if _, err := cgroup.Open("labs/t-kvm9"); err == nil {
		t.Error("cgroup left")
	}
}

// A 1,000-node deploy killed with kill -9 midway is removed entirely by destroy --all.
func TestKill9Big1000ThenDestroyAll(t *testing.T) {
	requireRoot(t)
	privateState(t)
	lab := writeLabFile(t, labgen.Big("t-k1k", 5, 190, 8))
	child := exec.Command(os.Args[0], "deploy", lab)
	child.Env = append(os.Environ(), "SFCLAB_CLI_CHILD=1")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run(t, "destroy", "--all") })
	deadline := time.Now().Add(30 * time.Second)
	for {
		ns, _ := netdev.ListNetns("sfc.t-k1k.")
		if len(ns) >= 300 {
			break
		}
		if time.Now().After(deadline) {
			child.Process.Kill()
			t.Fatalf("the deploy made %d namespaces in 30 s", len(ns))
		}
		time.Sleep(5 * time.Millisecond)
	}
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	code, out, errOut := run(t, "destroy", "--all")
	if code != 0 || !strings.Contains(out, "destroyed lab t-k1k") {
		t.Fatalf("destroy --all: exit %d\n%s%s", code, out, errOut)
	}
	if ns, _ := netdev.ListNetns("sfc.t-k1k"); len(ns) > 0 {
		t.Errorf("%d namespaces left, e.g. %s", len(ns), ns[0])
	}
	if _, err := cgroup.Open("labs/t-k1k"); err == nil {
		t.Error("cgroup left")
	}
}

// After kill -9 of a transparent deploy over two emulated hosts (steering attached, maps
// pinned, VXLAN up, a function's setup running), destroy --all leaves no namespace, no
// pinned map, no tc filter and no VXLAN device.
func TestKill9TransparentThenDestroyAll(t *testing.T) {
	requireRoot(t)
	privateState(t)
	lab := writeLabFile(t, `name: steer-kill
steering: transparent
hosts: [h1, h2]
endpoints: {client: {kind: client}, server: {kind: server, host: h2}}
functions:
  a: {kind: forwarder, host: h2}
  slow: {kind: custom, params: {setup: ["sleep 43"]}}
port_pairs:
  pa: {ingress: a.eth0, egress: a.eth0}
  ps: {ingress: slow.eth0, egress: slow.eth0}
port_pair_groups: {ga: {port_pairs: [pa]}, gs: {port_pairs: [ps]}}
flow_classifiers: {all: {logical_source_port: client.eth0}}
port_chains: {c: {flow_classifiers: [all], port_pair_groups: [ga, gs]}}
`)
	killDeploy(t, lab, 10*time.Second, 20*time.Millisecond, func() bool { return sleepRunning("43") }, "deploy never reached the slow setup")
	pins := "/sys/fs/bpf/sfclab/steer-kill"
	if _, err := os.Stat(pins); err != nil {
		t.Fatalf("test setup: the killed deploy left no pinned maps: %v", err)
	}
	if out, _ := exec.Command("ip", "netns", "exec", "sfc.steer-kill.host-h1", "ip", "-o", "link", "show", "type", "vxlan").Output(); !strings.Contains(string(out), "vxsteer") {
		t.Fatalf("test setup: no steering VXLAN device on h1:\n%s", out)
	}
	code, out, errOut := run(t, "destroy", "--all")
	if code != 0 || !strings.Contains(out, "destroyed lab steer-kill") {
		t.Fatalf("destroy --all: exit %d\n%s%s", code, out, errOut)
	}
	if ns, _ := netdev.ListNetns("sfc.steer-kill"); len(ns) > 0 {
		t.Errorf("namespaces left (with their tc filters and VXLAN devices): %v", ns)
	}
	if _, err := os.Stat(pins); err == nil {
		t.Errorf("pinned maps left in %s", pins)
	}
	if out, _ := exec.Command("tc", "filter", "show").CombinedOutput(); strings.Contains(string(out), "sfclab-steer") {
		t.Errorf("a steering tc filter is left in the host namespace:\n%s", out)
	}
	if out, _ := exec.Command("ip", "-o", "link", "show", "type", "vxlan").Output(); strings.Contains(string(out), "vxsteer") {
		t.Errorf("a steering VXLAN device is left in the host namespace:\n%s", out)
	}
	if sleepRunning("43") {
		t.Error("the setup's process survived destroy --all")
	}
}

// After kill -9 of a transparent deploy on docker (steering attached to the containers'
// host-side veths in the machine's namespace, maps pinned, a function's setup running),
// destroy --all leaves no container, no Docker network, no DOCKER-USER rule, no pinned map and
// no host-side veth with a steering program.
func TestKill9DockerTransparentThenDestroyAll(t *testing.T) {
	requireRoot(t)
	if err := exec.Command("docker", "info").Run(); err != nil {
		t.Skip("SKIPPED LOUDLY: no Docker Engine answers: " + err.Error())
	}
	privateState(t)
	lab := writeLabFile(t, `name: steer-dkill
runtime: docker
steering: transparent
endpoints: {client: {kind: client}, server: {kind: server}}
functions:
  a: {kind: forwarder}
  slow: {kind: custom, params: {setup: ["sleep 44"]}}
port_pairs:
  pa: {ingress: a.eth0, egress: a.eth0}
  ps: {ingress: slow.eth0, egress: slow.eth0}
port_pair_groups: {ga: {port_pairs: [pa]}, gs: {port_pairs: [ps]}}
flow_classifiers: {all: {logical_source_port: client.eth0}}
port_chains: {c: {flow_classifiers: [all], port_pair_groups: [ga, gs]}}
`)
	killDeploy(t, lab, 2*time.Minute, 20*time.Millisecond, func() bool { return sleepRunning("44") }, "deploy never reached the slow setup") // an image build would take longer: it is there
	pins := "/sys/fs/bpf/sfclab/steer-dkill"
	if _, err := os.Stat(pins); err != nil {
		t.Fatalf("test setup: the killed deploy left no pinned maps: %v", err)
	}
	steered := steeredVeths(t)
	if len(steered) == 0 {
		t.Fatal("test setup: no host-side veth carries a steering program")
	}
	code, out, errOut := run(t, "destroy", "--all")
	if code != 0 || !strings.Contains(out, "destroyed lab steer-dkill") {
		t.Fatalf("destroy --all: exit %d\n%s%s", code, out, errOut)
	}
	for _, what := range [][]string{
		{"ps", "-aq", "--filter", "label=sfclab.lab=steer-dkill"},
		{"network", "ls", "-q", "--filter", "label=sfclab.lab=steer-dkill"},
	} {
		if out, _ := exec.Command("docker", what...).Output(); strings.TrimSpace(string(out)) != "" {
			t.Errorf("docker %s: left %s", strings.Join(what, " "), out)
		}
	}
	if out, _ := exec.Command("iptables", "-S", "DOCKER-USER").Output(); strings.Contains(string(out), "lab=steer-dkill") {
		t.Errorf("DOCKER-USER rules left:\n%s", out)
	}
	if _, err := os.Stat(pins); err == nil {
		t.Errorf("pinned maps left in %s", pins)
	}
	for _, name := range steered {
		if _, err := netlink.LinkByName(name); err == nil {
			t.Errorf("host-side veth %s (it carried a steering program) is left", name)
		}
	}
	if sleepRunning("44") {
		t.Error("the setup's process survived destroy --all")
	}
}

// steeredVeths lists the veths of the machine's own namespace that carry a steering program.
func steeredVeths(t *testing.T) []string {
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range links {
		if l.Type() != "veth" {
			continue
		}
		if ok, _ := steer.Attached("", l.Attrs().Name); ok {
			out = append(out, l.Attrs().Name)
		}
	}
	return out
}
