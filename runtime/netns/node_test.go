package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/internal/testroot"
	"github.com/sfclab/sfclab/netdev"
	"golang.org/x/sys/unix"
)

var testPrefix = fmt.Sprintf("sfctest.rt%d.", os.Getpid())

func TestMain(m *testing.M) {
	cgroup.SetRootName("sfclab-test")
	if os.Getenv("SFCLAB_TEST_DAEMON_HELPER") != "" {
		daemonHelper()
		return
	}
	code := m.Run()
	if os.Geteuid() == 0 {
		left, _ := netdev.ListNetns(testPrefix)
		for _, name := range left {
			fmt.Fprintln(os.Stderr, "leftover namespace (deleting):", name)
			_ = netdev.DeleteNetns(name)
			code = 1
		}
	}
	os.Exit(code)
}

// daemonHelper runs in a child test process: it starts a daemon in the
// node described by the environment, prints its PID and exits at once.
func daemonHelper() {
	n := Node{Name: "helper", Netns: os.Getenv("SFCLAB_TEST_NETNS")}
	if rel := os.Getenv("SFCLAB_TEST_CGROUP"); rel != "" {
		g, err := cgroup.Open(rel)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		n.Cgroup = g
	}
	pid, err := n.Daemon([]string{"sleep", "30"}, os.Getenv("SFCLAB_TEST_LOG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(pid)
	os.Exit(0)
}

func requireRoot(t *testing.T) {
	testroot.Require(t, "this test creates network namespaces and cgroups")
}

// newNode creates a namespace and a cgroup for a test node and registers
// their removal: processes are killed first, then the namespace goes.
func newNode(t *testing.T, name string) *Node {
	t.Helper()
	ns := testPrefix + name
	if err := netdev.CreateNetns(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netdev.DeleteNetns(ns); err != nil {
			t.Error(err)
		}
	})
	top := fmt.Sprintf("rttest-%d", os.Getpid())
	g, err := cgroup.Create(top + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if tg, err := cgroup.Open(top); err == nil {
			if err := tg.Remove(); err != nil {
				t.Error(err)
			}
		}
		_ = os.Remove(cgroup.Root()) // only succeeds when no one else uses it
	})
	return &Node{Name: name, Netns: ns, Cgroup: g}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// netnsInode returns the inode identifying the namespace of /run/netns/NAME.
func netnsInode(t *testing.T, name string) uint64 {
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(netdev.NetnsDir, name), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func pidNetns(pid int) string {
	s, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	return s
}

func TestOutput(t *testing.T) {
	requireRoot(t)
	n := newNode(t, "out")
	ns, err := netdev.OpenNS(n.Netns)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if err := ns.AddVeth("v0", ns, "v1", 0); err != nil {
		t.Fatal(err)
	}

	out, err := n.Output(ctx(t), nil, "ip", "-o", "link")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		names = append(names, strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0])
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"lo", "v0", "v1"}) {
		t.Errorf("ip -o link in node = %v, want [lo v0 v1]:\n%s", names, out)
	}

	if out, err := n.Output(ctx(t), []byte("hello\n"), "cat"); err != nil || string(out) != "hello\n" {
		t.Errorf("cat = %q, %v", out, err)
	}

	_, err = n.Output(ctx(t), []byte("x"), "sh", "-c", "cat >/dev/null; echo 'Error: bad thing' >&2; exit 1")
	want := "run sh -c cat >/dev/null; echo 'Error: bad thing' >&2; exit 1 in node out: exit status 1: Error: bad thing"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant    %s", err, want)
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Errorf("error does not wrap the exit status: %#v", err)
	}

	if _, err := n.Output(ctx(t), nil, "/nonexistent/prog"); err == nil || !strings.Contains(err.Error(), "/nonexistent/prog") {
		t.Errorf("missing program error = %v", err)
	}

	// The command runs in the node's cgroup.
	out, err = n.Output(ctx(t), nil, "cat", "/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "/sfclab-test/"+n.Cgroup.Rel()+"\n") {
		t.Errorf("/proc/self/cgroup of command = %s, want it in %s", out, n.Cgroup.Path())
	}

	// A command that leaves a child holding stdout does not hang Output.
	start := time.Now()
	if _, err := n.Output(ctx(t), nil, "sh", "-c", "sleep 5 & echo started"); err != nil {
		t.Errorf("Output with lingering child = %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Output with lingering child took %s", d)
	}
	if err := n.Cgroup.Kill(2 * time.Second); err != nil {
		t.Error(err)
	}
}

func TestRunKeepsCallerSettings(t *testing.T) {
	requireRoot(t)
	n := newNode(t, "run")
	cmd := exec.Command("sh", "-c", `echo "$FOO"; pwd; readlink /proc/self/ns/net; echo "$0 $1"`, "zero", "one")
	cmd.Env = []string{"FOO=bar", "PATH=/usr/bin:/bin"}
	cmd.Dir = "/tmp"
	var out bytes.Buffer
	cmd.Stdout = &out
	args := slices.Clone(cmd.Args)
	if err := n.Run(cmd); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("bar\n/tmp\nnet:[%d]\nzero one\n", netnsInode(t, n.Netns))
	if out.String() != want {
		t.Errorf("output = %q, want %q", out.String(), want)
	}
	if !slices.Equal(cmd.Args, args) {
		t.Errorf("cmd.Args = %q after Run, want restored %q", cmd.Args, args)
	}

	// The host namespace when Netns is "", and no cgroup when nil.
	host := &Node{Name: "host"}
	out.Reset()
	cmd = exec.Command("readlink", "/proc/self/ns/net")
	cmd.Stdout = &out
	if err := host.Run(cmd); err != nil {
		t.Fatal(err)
	}
	if got, self := strings.TrimSpace(out.String()), pidNetns(os.Getpid()); got != self {
		t.Errorf("host node netns = %s, want %s", got, self)
	}

	if err := (&Node{Name: "gone", Netns: testPrefix + "missing"}).Run(exec.Command("true")); !errors.Is(err, netdev.ErrNotFound) {
		t.Errorf("Run in missing netns = %v, want ErrNotFound", err)
	}
}

func TestDaemon(t *testing.T) {
	requireRoot(t)
	n := newNode(t, "dmn")
	logPath := filepath.Join(t.TempDir(), "d.log")

	pid, err := n.Daemon([]string{"sleep", "30"}, logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Kill(pid, unix.SIGKILL) })
	pids, err := n.Cgroup.Procs()
	if err != nil || !slices.Contains(pids, pid) {
		t.Errorf("cgroup procs = %v, %v; want %d", pids, err, pid)
	}
	if got, want := pidNetns(pid), fmt.Sprintf("net:[%d]", netnsInode(t, n.Netns)); got != want {
		t.Errorf("daemon netns = %s, want %s", got, want)
	}
	if sid, err := unix.Getsid(pid); err != nil || sid != pid {
		t.Errorf("daemon session = %d, %v; want own session %d", sid, err, pid)
	}
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) != "sleep" {
		t.Errorf("daemon comm = %q, want sleep (wrapper must exec)", comm)
	}

	_, err = n.Daemon([]string{"sh", "-c", "echo boom >&2; exit 3"}, logPath)
	if err == nil || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("failing daemon error = %v, want boom and exit status 3", err)
	}
	// Only this run's output is quoted.
	_, err = n.Daemon([]string{"sh", "-c", "echo second >&2; exit 4"}, logPath)
	if err == nil || strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "second") {
		t.Errorf("second failing daemon error = %v", err)
	}

	if err := n.Cgroup.Kill(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	if pids, err := n.Cgroup.Procs(); err != nil || len(pids) != 0 {
		t.Errorf("procs after Kill = %v, %v", pids, err)
	}
	// Reaped by Daemon's goroutine: no zombie left.
	deadline := time.Now().Add(2 * time.Second)
	for unix.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			t.Fatalf("pid %d still exists after Kill: %s", pid, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDaemonOutlivesParent starts a daemon from a child process that then
// exits, and checks the daemon keeps running in its node.
func TestDaemonOutlivesParent(t *testing.T) {
	requireRoot(t)
	n := newNode(t, "orph")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		"SFCLAB_TEST_DAEMON_HELPER=1",
		"SFCLAB_TEST_NETNS="+n.Netns,
		"SFCLAB_TEST_CGROUP="+n.Cgroup.Rel(),
		"SFCLAB_TEST_LOG="+filepath.Join(t.TempDir(), "orphan.log"),
	)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v: %s", err, stderr.String())
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("helper printed %q", out)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	time.Sleep(100 * time.Millisecond)
	pids, err := n.Cgroup.Procs()
	if err != nil || !slices.Contains(pids, pid) {
		t.Fatalf("daemon %d not alive in cgroup after its parent exited: %v, %v", pid, pids, err)
	}
	if err := n.Cgroup.Kill(2 * time.Second); err != nil {
		t.Fatal(err)
	}
}
