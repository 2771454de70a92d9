package vm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/lb"
	"github.com/sfclab/sfclab/probe/iperf3"
	"github.com/sfclab/sfclab/runtime/vm"
	"github.com/sfclab/sfclab/runtime/vm/accel"
)

// TestMain lets this test binary be the init and agent of the guests its tests boot (the
// images are built from the running executable).
func TestMain(m *testing.M) {
	vm.GuestMain()
	// In a guest, `/init lb --config FILE` is `sfclab lb` (l4lb impl sfclab): this binary
	// stands in for sfclab there.
	if len(os.Args) == 4 && os.Args[1] == "lb" && os.Args[2] == "--config" {
		if err := lb.Main(context.Background(), os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, "sfclab lb:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(deployChildEnv) != "" {
		deployChild() // a deploy for a kill -9 test (docker_test.go); does not return
	}
	code := m.Run()
	if agentDir != "" {
		os.RemoveAll(agentDir)
	}
	if imagesDir != "" {
		os.RemoveAll(imagesDir)
	}
	os.Exit(code)
}

var (
	agentOnce sync.Once
	agentDir  string
	agentPath string
	agentErr  error

	imagesOnce sync.Once
	imagesDir  string
	imagesErr  error
)

// useSharedImages points the guest images of this test binary's tests at one temporary image
// root, removed by TestMain: each image (one per program set) is built once per binary, not
// once per test (a build is about a second of the host's CPU, a boot's worth under load). It
// is set in the process's environment, as useGuestAgent's binary is, so that parallel tests
// see it (t.Setenv is refused there); a test that needs another root (the Debian cache) gives
// it to its deployer's runtimes (withImageRoot).
func useSharedImages(tb testing.TB) {
	tb.Helper()
	imagesOnce.Do(func() {
		if imagesDir, imagesErr = os.MkdirTemp("", "sfclab-vmimages-"); imagesErr != nil {
			return
		}
		imagesErr = os.Setenv(vm.ImageRootEnv, imagesDir)
	})
	if imagesErr != nil {
		tb.Fatalf("make the tests' guest image root: %v", imagesErr)
	}
}

// useGuestAgent makes the guest images of a test hold cmd/sfclab-guest, built once per test
// binary (6 MB, as make build installs it beside sfclab), not the test binary (tens of MB that
// every guest's kernel unpacks at boot). Without a Go toolchain the test binary stays the
// agent (its TestMain runs GuestMain). The binary is named in the process's environment (for
// every later test too, parallel ones included).
func useGuestAgent(tb testing.TB) {
	tb.Helper()
	agentOnce.Do(func() {
		if agentDir, agentErr = os.MkdirTemp("", "sfclab-guest-"); agentErr != nil {
			return
		}
		agentPath = filepath.Join(agentDir, vm.GuestAgentName)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "build", "-ldflags=-s -w", "-o", agentPath, "github.com/sfclab/sfclab/cmd/sfclab-guest").CombinedOutput()
		if err != nil {
			agentErr = fmt.Errorf("build the guest agent: %w: %s", err, out)
			return
		}
		agentErr = os.Setenv(vm.GuestAgentEnv, agentPath)
	})
	if agentErr != nil {
		tb.Logf("guest agent: %v; the test binary is the agent", agentErr)
	}
}

// The tests that boot guests run two at a time (t.Parallel; go test's -parallel is the
// host's cores): a TCG guest's vCPU is one host thread, and a test waits on its guests (boot,
// agent, transfers through them) much of the time, so a second test's guests use the core
// the first one's leave. They share the labtest lock (labtest.Exclusive holds it for the
// process), the guest agent and image root (set in the environment, not by t.Setenv); their
// labs have names, and the docker ones address pools, of their own. (The Debian test takes
// its images from the shared cache by its deployer's runtimes: withImageRoot.)

// requireVM skips loudly when the host lacks what a VM node needs.
func requireVM(t *testing.T) {
	t.Helper()
	labtest.RequireRoot(t)
	if err := vm.CheckQEMU(); err != nil {
		t.Skipf("SKIPPED LOUDLY: %v", err)
	}
	if _, _, err := vm.HostKernel(); err != nil {
		t.Skipf("SKIPPED LOUDLY: %v", err)
	}
	useSharedImages(t)
	useGuestAgent(t)
}

const routedLab = `
name: t-vmfwd
endpoints:
  client: {kind: client}
  server: {kind: server}
functions:
  fwd:
    kind: firewall
    vm: {cpus: 1, memory: 512}
    params:
      rules:
        - {action: deny, protocol: tcp, port: 9999}
chains:
  - {name: c, from: client, to: server, hops: [fwd]}
`

// TestRoutedVMForwarder deploys a VM firewall (nftables, set up in the guest by the firewall
// kind's own Setup through the agent) between two namespace endpoints and sends ping and an
// iperf3 transfer through it; a connection to the denied port is dropped in the guest.
func TestRoutedVMForwarder(t *testing.T) {
	requireVM(t)
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	l := labtest.Deploy(t, routedLab)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec, err := vm.ReadBoot(l.P.Lab, "fwd")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("boot: %s", rec.Phases())
	if d := accel.Host(); rec.Accel.Accel != d.Accel {
		t.Errorf("the guest ran with %s, the host's decision is %s", rec.Accel.Accel, d)
	}

	fwd := l.Node(t, "fwd")
	out, err := fwd.Output(ctx, nil, "ip", "-o", "addr", "show")
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range l.P.Node("fwd").Interfaces {
		if !strings.Contains(string(out), i.Name) || !strings.Contains(string(out), i.Address.String()) {
			t.Errorf("guest has no %s with %s:\n%s", i.Name, i.Address, out)
		}
	}
	if out, err := fwd.Output(ctx, nil, "sysctl", "-n", "net.ipv4.ip_forward"); err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Errorf("guest ip_forward = %q, %v; want 1", out, err)
	}
	if _, err := fwd.Output(ctx, nil, "sh", "-c", "exit 3"); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("a failing guest command gave %v, want exit status 3", err)
	}

	// sfclab exec's path: output and exit code of a guest command.
	var stdout strings.Builder
	c := exec.Command("sh", "-c", "echo from-guest; exit 4")
	c.Stdout = &stdout
	err = fwd.Run(c)
	var coded interface{ ExitCode() int }
	if !errors.As(err, &coded) || coded.ExitCode() != 4 || stdout.String() != "from-guest\n" {
		t.Errorf("Run in the guest: err %v, output %q; want exit code 4 and from-guest", err, stdout.String())
	}
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
		case ni.Name != "fwd" && ni.Machine != "":
			t.Errorf("inspect calls namespace node %s a machine: %q", ni.Name, ni.Machine)
		}
	}

	client, server := l.Node(t, "client"), l.Node(t, "server")
	dst := l.P.Node("server").Interfaces[0].Address.Addr().String()
	if out, err := client.Output(ctx, nil, "ping", "-c", "3", "-i", "0.2", "-W", "2", dst); err != nil {
		t.Fatalf("ping through the VM forwarder: %v\n%s", err, out)
	}
	iperfOut, err := iperf3Once(t, ctx, client, server, dst, "2")
	if err != nil {
		t.Fatalf("iperf3 through the VM forwarder: %v", err)
	}
	res, err := iperf3.Parse(iperfOut)
	if err != nil {
		t.Fatal(err)
	}
	if res.ReceivedBytes == 0 {
		t.Fatalf("iperf3 through the VM forwarder moved nothing:\n%s", iperfOut)
	}
	t.Logf("iperf3 TCP through the VM forwarder (%s): %.2f Gbit/s", accel.TCGMark, res.ReceivedBPS/1e9)

	// The deny rule, set up in the guest, drops a connection to its port, and inspect reads
	// its counter from the guest.
	if out, err := client.Output(ctx, nil, "iperf3", "-c", dst, "-p", "9999", "-t", "1", "--connect-timeout", "300"); err == nil {
		t.Errorf("a connection to the denied port went through the VM firewall:\n%s", out)
	}
	if info, err = l.D.Inspect(ctx, l.P.Lab); err != nil {
		t.Fatal(err)
	}
	denied := false
	for _, ni := range info.Nodes {
		for _, r := range ni.Rules {
			if ni.Name == "fwd" && r.Rule == "rule-1" && r.Packets > 0 {
				denied = true
			}
		}
		if ni.Name == "fwd" {
			t.Logf("firewall rules read from the guest: %+v", ni.Rules)
		}
	}
	if !denied {
		t.Error("inspect shows no packet on the guest's deny rule for port 9999")
	}

	// A guest that dies: inspect shows it down.
	for _, pid := range vm.QEMUPids(l.P.Lab) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	time.Sleep(200 * time.Millisecond)
	if info, err = l.D.Inspect(ctx, l.P.Lab); err != nil {
		t.Fatal(err)
	}
	for _, ni := range info.Nodes {
		if ni.Name == "fwd" && !strings.Contains(ni.Down, "QEMU") {
			t.Errorf("inspect after QEMU was killed: down %q", ni.Down)
		}
	}
	// A command sent to it (sfclab exec, a kind's teardown) says the VM is down, not only
	// that its agent's socket refused the connection.
	if _, err := fwd.Output(ctx, nil, "true"); err == nil || !strings.Contains(err.Error(), "VM node fwd is down: its QEMU process is not running") {
		t.Errorf("a command in the dead guest: %v; want it to say the VM node is down", err)
	}
}
