package vm_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe/iperf3"
	"github.com/sfclab/sfclab/runtime/docker"
	"github.com/sfclab/sfclab/runtime/vm"
	"github.com/sfclab/sfclab/runtime/vm/accel"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// dockerLab is a docker lab with two VM forwarders between two containers, fwd on taps and
// mvt on macvtaps (passthru on the interfaces Docker made). Its pool keeps clear
// of other labs' Docker networks (labtest plans without asking the engine what is taken); the
// package's other docker labs each have a pool of their own (198.19.224.0/19 split in four
// /21s), since their tests run at once (t.Parallel) and the engine refuses overlapping
// networks.
const dockerLab = `
name: t-vmdock-fwd
runtime: docker
addressing: {pool: 198.19.248.0/21}
endpoints:
  client: {kind: client}
  server: {kind: server}
functions:
  fwd:
    kind: forwarder
    vm: {cpus: 1, memory: 512}
  mvt:
    kind: forwarder
    vm: {cpus: 1, memory: 512, backend: macvtap}
chains:
  - {name: c, from: client, to: server, hops: [fwd, mvt]}
`

// requireDocker skips loudly when the engine does not answer or sfclab's node image is not
// built (a build is minutes: `sfclab images build`).
func requireDocker(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := (docker.Runtime{}).Reachable(ctx); err != nil {
		t.Skipf("SKIPPED LOUDLY: %v", err)
	}
	if ok, err := (docker.Runtime{}).ImageExists(ctx, docker.DefaultImage()); err != nil || !ok {
		t.Skipf("SKIPPED LOUDLY: node image %s is not built (%v): sfclab images build", docker.DefaultImage(), err)
	}
}

// TestDockerVMForwarder deploys a docker lab whose forwarders are VMs (their host sides the
// nodes' containers; one on taps, one on macvtaps) between two containers: ping crosses the
// guests (TTL two lower than the server sent, and no answer once QEMU is gone), iperf3
// carries traffic, inspect calls the nodes machines (with the TCG mark under TCG) and reads
// their CPU; the macvtap VM's container holds a macvtap on each of its Docker-made
// interfaces and no tap; destroy leaves no container, network, QEMU, namespace, run
// directory, cgroup, macvtap or device node.
func TestDockerVMForwarder(t *testing.T) {
	requireVM(t)
	requireDocker(t)
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	l := deployDockerVM(t, dockerLab)
	if l.P.Runtime != spec.RuntimeDocker {
		t.Fatalf("plan runtime %q, want docker", l.P.Runtime)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec, err := vm.ReadBoot(l.P.Lab, "fwd")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("boot: %s", rec.Phases())
	probes := checkNodeMacvtaps(t, ctx, l, "mvt", true)

	fwd := l.Node(t, "fwd")
	if _, ok := fwd.(*vm.Node); !ok {
		t.Fatalf("node fwd is a %T, want the guest (*vm.Node)", fwd)
	}
	if _, ok := l.Node(t, "client").(*docker.Node); !ok {
		t.Fatalf("node client is a %T, want a container", l.Node(t, "client"))
	}
	out, err := fwd.Output(ctx, nil, "ip", "-o", "addr", "show")
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range l.P.Node("fwd").Interfaces {
		if !strings.Contains(string(out), i.Name) || !strings.Contains(string(out), i.Address.String()) {
			t.Errorf("guest has no %s with %s:\n%s", i.Name, i.Address, out)
		}
	}

	client, server := l.Node(t, "client"), l.Node(t, "server")
	dst := l.P.Node("server").Interfaces[0].Address.Addr().String()
	ping, err := client.Output(ctx, nil, "ping", "-c", "3", "-i", "0.2", "-W", "2", dst)
	if err != nil {
		t.Fatalf("ping through the VM forwarder: %v\n%s", err, ping)
	}
	// The server answers with TTL 64; two routers (the guests) on the way back.
	if m := regexp.MustCompile(`ttl=(\d+)`).FindStringSubmatch(string(ping)); m == nil || m[1] != "62" {
		t.Errorf("ping through two forwarders: want ttl=62 (two hops):\n%s", ping)
	} else {
		t.Logf("ping through the VM forwarders (%s): %s", accel.TCGMark, lastLine(ping))
	}

	iperfOut, err := iperf3Once(t, ctx, client, server, dst, "2")
	if err != nil {
		t.Fatalf("iperf3 through the VM forwarder: %v\n%s", err, iperfOut)
	}
	res, err := iperf3.Parse(iperfOut)
	if err != nil {
		t.Fatal(err)
	}
	if res.ReceivedBytes == 0 {
		t.Fatalf("iperf3 through the VM forwarder moved nothing:\n%s", iperfOut)
	}
	t.Logf("iperf3 TCP client container -> VM forwarders -> server container (%s): %.2f Gbit/s", accel.TCGMark, res.ReceivedBPS/1e9)

	if cpu, err := fwd.CPU(); err != nil || cpu.User+cpu.System == 0 {
		t.Errorf("CPU of the VM node (QEMU in its cgroup) = %+v, %v; want some time", cpu, err)
	}
	info, err := l.D.Inspect(ctx, l.P.Lab)
	if err != nil {
		t.Fatal(err)
	}
	for _, ni := range info.Nodes {
		if ni.Error != "" {
			t.Errorf("inspect of node %s: %s", ni.Name, ni.Error)
		}
		switch {
		case ni.Name == "fwd" && (!strings.Contains(ni.Machine, "1 vCPU, 512 MiB") || ni.Down != ""):
			t.Errorf("inspect of the VM node: machine %q, down %q", ni.Machine, ni.Down)
		case ni.Name == "fwd" && rec.Accel.Emulated() && !strings.Contains(ni.Machine, accel.TCGMark):
			t.Errorf("inspect of a TCG VM lacks the mark %q: %q", accel.TCGMark, ni.Machine)
		case ni.Name == "mvt" && !strings.Contains(ni.Machine, "macvtap (passthru"):
			t.Errorf("inspect of the macvtap VM node: machine %q", ni.Machine)
		case ni.Name != "fwd" && ni.Name != "mvt" && ni.Machine != "":
			t.Errorf("inspect calls container node %s a machine: %q", ni.Name, ni.Machine)
		}
	}

	// The path is the guest's: without QEMU nothing crosses (the container that is its host
	// side forwards nothing), and inspect says the node is down.
	for _, pid := range vm.QEMUPids(l.P.Lab) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(vm.QEMUPids(l.P.Lab)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if out, err := client.Output(ctx, nil, "ping", "-c", "2", "-i", "0.2", "-W", "1", dst); err == nil {
		t.Errorf("ping crossed the lab with the VM's QEMU killed:\n%s", out)
	}
	if info, err = l.D.Inspect(ctx, l.P.Lab); err != nil {
		t.Fatal(err)
	}
	for _, ni := range info.Nodes {
		if (ni.Name == "fwd" || ni.Name == "mvt") && !strings.Contains(ni.Down, "QEMU") {
			t.Errorf("inspect of %s after QEMU was killed: down %q", ni.Name, ni.Down)
		}
	}
	if err := l.D.Destroy(ctx, l.P.Lab); err != nil {
		t.Fatal(err)
	}
	assertMacvtapsGone(t, l.P.Lab, probes)
}

// lastLine is the last non-empty line of a command's output.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// deployDockerVM deploys a docker lab with VM nodes (labtest.Deploy) and checks, after its
// destroy, that nothing of it is left (assertNoDockerVMLeft).
func deployDockerVM(t *testing.T, yaml string) *labtest.Lab {
	t.Helper()
	p := labtest.Plan(t, yaml)
	// Registered before Deploy's cleanup, so it runs after the destroy.
	t.Cleanup(func() { assertNoDockerVMLeft(t, p) })
	return labtest.Deploy(t, yaml)
}

// assertNoDockerVMLeft fails when anything of a docker lab with VMs is left: containers,
// networks, host rules or the VMs' run directory (the docker runtime's leftovers), QEMU, the
// VMs' named namespaces (and the taps in them), cgroups.
func assertNoDockerVMLeft(t *testing.T, p *plan.Plan) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	left, err := (docker.Runtime{}).Leftovers(ctx, p.Lab)
	if err != nil {
		t.Errorf("list what lab %s left: %v", p.Lab, err)
	}
	if len(left) > 0 {
		t.Errorf("lab %s left %v", p.Lab, left)
	}
	assertNoVMLeft(t, p)
}

// deployChildEnv makes this test binary deploy a lab and wait to be killed: "ROOT FILE" (the
// journal root and the lab file).
const deployChildEnv = "SFCLAB_VM_TEST_DEPLOY"

// deployChild deploys the lab of deployChildEnv, then waits to be killed; a failed deploy
// exits 1.
func deployChild() {
	root, file, _ := strings.Cut(os.Getenv(deployChildEnv), " ")
	data, err := os.ReadFile(file)
	if err == nil {
		var lab *spec.Lab
		if lab, err = spec.Decode(data, file, kinds.Spec()); err == nil {
			var p *plan.Plan
			if p, err = plan.Build(lab); err == nil {
				d := &deploy.Deployer{Journal: journal.Journal{Root: root}}
				_, err = d.Deploy(context.Background(), p, file)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploy:", err)
		os.Exit(1)
	}
	select {}
}

// After kill -9 of a docker lab's deploy while its VMs boot (containers and networks made,
// QEMU running in each VM node's container namespace, the macvtap VM's device nodes made, the
// guests not up yet), the lab is found as destroy --all finds it (its journal, and the
// engine's labels) and destroy leaves no container, network, QEMU, named namespace (with the
// taps and macvtaps), run directory, device node or cgroup.
func TestDockerVMKill9ThenDestroy(t *testing.T) {
	requireVM(t)
	requireDocker(t)
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	const lab = "t-vmdock-k9"
	src := strings.NewReplacer("t-vmdock-fwd", lab, "198.19.248.0/21", "198.19.240.0/21").Replace(dockerLab)
	p := labtest.Plan(t, src)
	root := t.TempDir()
	file := filepath.Join(t.TempDir(), "lab.yaml")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	d := &deploy.Deployer{Journal: journal.Journal{Root: root}, Log: t.Logf}
	t.Cleanup(func() {
		_ = d.Destroy(context.Background(), lab)
		assertNoDockerVMLeft(t, p)
	})
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), deployChildEnv+"="+root+" "+file)
	var stderr strings.Builder
	child.Stderr = &stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	deadline := time.After(120 * time.Second) // the guest image is built first
	// Both guests' QEMUs: mvt's macvtaps and device nodes exist then.
	for len(vm.QEMUPids(lab)) < 2 {
		select {
		case err := <-exited:
			t.Fatalf("the deploy ended before QEMU started: %v\n%s", err, stderr.String())
		case <-deadline:
			_ = child.Process.Kill()
			t.Fatal("the deploy never started QEMU")
		case <-time.After(10 * time.Millisecond):
		}
	}
	_ = child.Process.Signal(syscall.SIGKILL)
	<-exited
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if left, _ := (docker.Runtime{}).Leftovers(ctx, lab); !slices.ContainsFunc(left, func(s string) bool { return strings.HasPrefix(s, "container ") }) {
		t.Fatalf("test setup: the killed deploy left no container to clean: %v", left)
	}
	if ns, _ := netdev.ListNetns(plan.NetnsName(lab, "fwd")); len(ns) == 0 {
		t.Fatal("test setup: the killed deploy left no VM host-side namespace")
	}
	if _, err := os.Stat(filepath.Join(vm.DevRoot, lab, "mvt.eth0")); err != nil {
		t.Fatalf("test setup: the killed deploy left no macvtap device node: %v", err)
	}
	// destroy --all finds the lab by its journal, and by the engine's labels were the journal lost.
	if labs, _ := d.Journal.Labs(); !slices.Contains(labs, lab) {
		t.Errorf("the journal does not list the killed lab: %v", labs)
	}
	if labs, _ := (docker.Runtime{StateRoot: root}).Labs(ctx); !slices.Contains(labs, lab) {
		t.Errorf("the engine's labels do not give the killed lab: %v", labs)
	}
	if err := d.Destroy(ctx, lab); err != nil {
		t.Fatalf("destroy after kill -9: %v", err)
	}
	assertNoDockerVMLeft(t, p)
}

// dockerTransparentLab is a transparent docker lab (one host: the machine itself) whose one
// function, one-armed as Docker's networks make it, is a VM between two containers on one
// network: without steering they would reach each other directly.
const dockerTransparentLab = `
name: t-vmdock-tr
runtime: docker
steering: transparent
addressing: {pool: 198.19.232.0/21}
endpoints:
  client: {kind: client}
  server: {kind: server}
functions:
  fwd: {kind: forwarder, vm: {}}
port_pairs:
  pp: {ingress: fwd.eth0, egress: fwd.eth0}
port_pair_groups:
  g-fwd: {port_pairs: [pp]}
flow_classifiers:
  ping: {protocol: icmp, logical_source_port: client.eth0, logical_destination_port: server.eth0}
  web: {protocol: tcp, destination_port_range_min: 5201, destination_port_range_max: 5201, logical_source_port: client.eth0, logical_destination_port: server.eth0}
port_chains:
  c: {flow_classifiers: [ping, web], port_pair_groups: [g-fwd], chain_parameters: {symmetric: true}}
`

// TestDockerTransparentVMFunction deploys a transparent docker lab whose function is a VM and
// checks that traffic is steered through the guest: ping's replies come back with TTL 63 (the
// guest forwarded each way once; the containers share a network and would see 64), the guest's
// port received and sent them, iperf3 carries a transfer, inspect counts both directions into
// and out of the hop; with QEMU killed nothing crosses. Destroy leaves nothing (as above).
func TestDockerTransparentVMFunction(t *testing.T) {
	requireVM(t)
	requireDocker(t)
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	l := deployDockerVM(t, dockerTransparentLab)
	if l.P.Runtime != spec.RuntimeDocker || l.P.Node("fwd").VM == nil {
		t.Fatalf("plan runtime %q, fwd vm %v: want docker with the forwarder a VM", l.P.Runtime, l.P.Node("fwd").VM)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec, err := vm.ReadBoot(l.P.Lab, "fwd")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("boot: %s", rec.Phases())

	fwd, client, server := l.Node(t, "fwd"), l.Node(t, "client"), l.Node(t, "server")
	guestCount := func(dir string) uint64 {
		t.Helper()
		return guestCounter(ctx, t, fwd, "eth0", dir+"_packets")
	}
	rx0, tx0 := guestCount("rx"), guestCount("tx")
	dst := l.P.Transparent.Node("server").Ports[0].Address.Addr().String()
	ttls, out := pingTTLs(t, ctx, client, dst, "3", "3", "the VM function")
	for _, ttl := range ttls {
		if ttl != "63" {
			t.Errorf("reply TTL %s, want 63 (one kernel forwarding each way: the guest's):\n%s", ttl, out)
		}
	}
	t.Logf("ping through the transparent VM function (%s): %s", accel.TCGMark, lastLine(out))
	// 3 requests and 3 replies, each in and out of the one-armed guest.
	if rx, tx := guestCount("rx")-rx0, guestCount("tx")-tx0; rx < 6 || tx < 6 {
		t.Errorf("the guest's port received %d and sent %d packets during 3 pings; want at least 6 each", rx, tx)
	}

	out, err = iperf3Once(t, ctx, client, server, dst, "2")
	if err != nil {
		t.Fatalf("iperf3 through the VM function: %v\n%s", err, out)
	}
	res, err := iperf3.Parse(out)
	if err != nil || res.ReceivedBytes == 0 {
		t.Fatalf("iperf3 through the VM function moved nothing (%v):\n%s", err, out)
	}
	t.Logf("iperf3 TCP through the transparent VM function (%s): %.2f Gbit/s", accel.TCGMark, res.ReceivedBPS/1e9)

	info, err := l.D.Inspect(ctx, l.P.Lab)
	if err != nil {
		t.Fatal(err)
	}
	if info.Steering == nil || info.Steering.Error != "" || len(info.Steering.Paths) != 2 {
		t.Fatalf("inspect steering: %+v", info.Steering)
	}
	for _, pa := range info.Steering.Paths {
		if len(pa.Packets) != 2 || pa.Packets[0] == 0 || pa.Packets[1] == 0 {
			t.Errorf("path %s %s: packets per hop %v, want some into g-fwd and out of it", pa.Chain, pa.Dir, pa.Packets)
		}
	}
	for _, ni := range info.Nodes {
		if ni.Error != "" || ni.Down != "" {
			t.Errorf("inspect of node %s: error %q, down %q", ni.Name, ni.Error, ni.Down)
		}
		if ni.Name == "fwd" && (!strings.Contains(ni.Machine, "512 MiB") || rec.Accel.Emulated() && !strings.Contains(ni.Machine, accel.TCGMark)) {
			t.Errorf("inspect of the VM function: machine %q", ni.Machine)
		}
	}

	// Steered into a dead guest, nothing crosses.
	for _, pid := range vm.QEMUPids(l.P.Lab) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(vm.QEMUPids(l.P.Lab)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if out, err := client.Output(ctx, nil, "ping", "-c", "2", "-i", "0.2", "-W", "1", dst); err == nil {
		t.Errorf("ping crossed the lab with the VM's QEMU killed:\n%s", out)
	}
}

// TestDockerVMProgramsChecked: a program a docker lab's VM node starts must be on the host, its
// guest image's source (the containers' image is no help to a guest): Preflight says which,
// for which VM, before anything is created; a container node's programs are not asked of the
// host.
func TestDockerVMProgramsChecked(t *testing.T) {
	labtest.RequireRoot(t)
	if err := vm.CheckQEMU(); err != nil {
		t.Skipf("SKIPPED LOUDLY: %v", err)
	}
	if _, _, err := vm.HostKernel(); err != nil {
		t.Skipf("SKIPPED LOUDLY: %v", err)
	}
	const missing = "sfclab-no-such-program-7f3a"
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"vm node", "  server: {kind: server}\n", "  server: {kind: server, vm: {}, run: [\"" + missing + " --x\"]}\n",
			"not installed: " + missing + " (needed by VM server)"},
		{"container node", "  server: {kind: server}\n", "  server: {kind: server, run: [\"" + missing + " --x\"]}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := labtest.Plan(t, strings.Replace(dockerLab, tc.old, tc.new, 1))
			err := (vm.Runtime{}).CheckMachines(context.Background(), p)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("CheckMachines = %v, want nil (a container's program is its image's)", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("CheckMachines = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestDockerVMOnHosts deploys docker labs on two emulated hosts (the containers' ports made by
// package hosts, VXLAN between the hosts) whose forwarder is a VM on the other host than its
// endpoints: routed (the VM on macvtaps, bridge mode on h2's bridges), and transparent. Ping
// crosses the guest (TTL 63: one kernel forwarding each way, the guest's) and the guest's NICs
// counted the pings. Destroy leaves nothing (the routed VM's macvtaps and device nodes
// included).
func TestDockerVMOnHosts(t *testing.T) {
	requireVM(t)
	requireDocker(t)
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	for _, tc := range []struct{ name, lab string }{
		{"routed", `
name: t-vmdock-hr
runtime: docker
addressing: {pool: 198.19.224.0/21}
hosts: [h1, h2]
endpoints:
  client: {kind: client, host: h1}
  server: {kind: server, host: h1}
functions:
  fwd: {kind: forwarder, host: h2, vm: {backend: macvtap}}
chains:
  - {name: c, from: client, to: server, hops: [fwd]}
`},
		{"transparent", `
name: t-vmdock-ht
runtime: docker
steering: transparent
addressing: {pool: 198.19.224.0/21}
hosts: [h1, h2]
endpoints:
  client: {kind: client, host: h1}
  server: {kind: server, host: h1}
functions:
  fwd: {kind: forwarder, host: h2, vm: {}}
port_pairs:
  pp: {ingress: fwd.eth0, egress: fwd.eth0}
port_pair_groups:
  g-fwd: {port_pairs: [pp]}
flow_classifiers:
  ping: {protocol: icmp, logical_source_port: client.eth0, logical_destination_port: server.eth0}
port_chains:
  c: {flow_classifiers: [ping], port_pair_groups: [g-fwd], chain_parameters: {symmetric: true}}
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := deployDockerVM(t, tc.lab)
			if l.P.Runtime != spec.RuntimeDocker || !l.P.HostPorts() {
				t.Fatalf("plan runtime %q, host ports %v: want docker with ports from package hosts", l.P.Runtime, l.P.HostPorts())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			fwd, client := l.Node(t, "fwd"), l.Node(t, "client")
			var ifs []string
			var dst string
			if l.P.Transparent != nil {
				for _, pt := range l.P.Transparent.Node("fwd").Ports {
					ifs = append(ifs, pt.Ifname)
				}
				dst = l.P.Transparent.Node("server").Ports[0].Address.Addr().String()
			} else {
				for _, i := range l.P.Node("fwd").Interfaces {
					ifs = append(ifs, i.Name)
				}
				dst = l.P.Node("server").Interfaces[0].Address.Addr().String()
			}
			var probes []string
			if l.P.Node("fwd").VM.Macvtap() {
				probes = checkMacvtapPorts(t, ctx, l, "fwd", l.P.Node("fwd").Netns, ifs, false, fwd)
			}
			counts := func() map[string]int {
				m := map[string]int{}
				for _, i := range ifs {
					for _, c := range []string{"rx_packets", "tx_packets"} {
						m[i+"/"+c] = int(guestCounter(ctx, t, fwd, i, c))
					}
				}
				return m
			}
			before := counts()
			ttls, out := pingTTLs(t, ctx, client, dst, "5", "2", "the VM forwarder on the other host")
			for _, ttl := range ttls {
				if ttl != "63" {
					t.Errorf("ping reply with ttl=%s, want 63 (one forwarding hop, the guest):\n%s", ttl, out)
					break
				}
			}
			for k, v := range counts() {
				if v-before[k] < 5 {
					t.Errorf("guest counter %s went from %d to %d over 5 pings", k, before[k], v)
				}
			}
			t.Logf("ping through the VM forwarder on h2 (%s): %s", accel.TCGMark, lastLine(out))
			if probes != nil {
				if err := l.D.Destroy(ctx, l.P.Lab); err != nil {
					t.Fatal(err)
				}
				assertMacvtapsGone(t, l.P.Lab, probes)
			}
		})
	}
}
