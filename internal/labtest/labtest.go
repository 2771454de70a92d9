// Package labtest deploys throwaway labs for tests: a private journal, destruction at the end
// of the test even when it fails, and a check that nothing of the lab is left (namespaces,
// processes, Squid shared memory).
package labtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/internal/plantest"
	"github.com/sfclab/sfclab/internal/testroot"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/vnf"
	"github.com/sfclab/sfclab/vnf/httpproxy"
)

// RequireRoot skips the test unless it runs as root.
func RequireRoot(t testing.TB) { testroot.Require(t, "this test deploys a real lab") }

// LockFile serializes the tests that measure or that load the host (see Exclusive).
const LockFile = "/tmp/sfclab-labtest.lock"

// Exclusive makes the test wait for, then hold until it ends, a host-wide lock shared by the
// tests of these packages that measure timings or put load on the host, so that `go test`
// running packages in parallel does not make a CPU-burning test disturb a timing comparison.
// The lock is the test process's: parallel tests of one package (t.Parallel) hold it
// together, the first taking it and the last letting it go, and keep other test processes
// out while any of them runs.
//
// Equivalent to: flock /tmp/sfclab-labtest.lock
func Exclusive(t testing.TB) {
	t.Helper()
	if err := exclusive.acquire(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(exclusive.release)
}

// exclusive is this process's hold on LockFile, counted over the tests that hold it (a second
// flock of the file by the same process, on another open file, would wait for the first).
var exclusive lockHold

type lockHold struct {
	mu sync.Mutex // held while the lock is taken, so that the others wait for the flock
	n  int
	f  *os.File
}

func (h *lockHold) acquire() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n > 0 {
		h.n++
		return nil
	}
	f, err := os.OpenFile(LockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("open the test lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return fmt.Errorf("take the test lock %s: %w", LockFile, err)
	}
	h.f, h.n = f, 1
	return nil
}

func (h *lockHold) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n--; h.n > 0 {
		return
	}
	_ = syscall.Flock(int(h.f.Fd()), syscall.LOCK_UN)
	h.f.Close()
	h.f = nil
}

// Lab is a deployed test lab.
type Lab struct {
	D *deploy.Deployer
	P *plan.Plan
}

// Plan decodes an inline lab file and builds its plan.
func Plan(t testing.TB, yaml string) *plan.Plan {
	t.Helper()
	return plantest.Decode(t, yaml)
}

// Deploy builds the lab of an inline lab file (its name must start with "t-") with a journal
// in a temporary directory whose parents Squid's and Apache's users can search, and destroys
// it when the test ends, checking that nothing is left.
func Deploy(t testing.TB, yaml string) *Lab {
	t.Helper()
	return DeployWith(t, yaml, nil)
}

// DeployWith is Deploy with a deployer that configure, when not nil, sets up before the deploy
// (its journal root set): runtimes of the test's own, say.
func DeployWith(t testing.TB, yaml string, configure func(*deploy.Deployer)) *Lab {
	t.Helper()
	RequireRoot(t)
	p := Plan(t, yaml)
	if !strings.HasPrefix(p.Lab, "t-") {
		t.Fatalf("test lab %q: names of test labs start with t-", p.Lab)
	}
	root, err := os.MkdirTemp("", "sfclab-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	d := &deploy.Deployer{Journal: journal.Journal{Root: root}, Log: t.Logf}
	if configure != nil {
		configure(d)
	}
	l := &Lab{D: d, P: p}
	t.Cleanup(func() {
		if t.Failed() { // keep the functions' configuration and logs for a post-mortem
			_ = exec.Command("cp", "-a", d.Journal.NodeDir(p.Lab), filepath.Join(root, "kept-"+p.Lab)).Run()
		}
		pids := l.pids()
		if err := d.Destroy(context.Background(), p.Lab); err != nil && !errors.Is(err, journal.ErrNotDeployed) {
			t.Errorf("destroy %s: %v", p.Lab, err)
		}
		l.assertClean(t, pids, root)
		if !t.Failed() {
			os.RemoveAll(root)
		} else {
			t.Logf("configuration and logs kept in %s", filepath.Join(root, "kept-"+p.Lab))
		}
	})
	timing, err := d.Deploy(context.Background(), p, "test")
	if err != nil {
		t.Fatalf("deploy %s: %v", p.Lab, err)
	}
	t.Logf("deployed %s in %s", p.Lab, timing)
	return l
}

// pids lists the processes in the lab's cgroups.
func (l *Lab) pids() []int {
	var out []int
	groups, _ := cgroup.List("labs/" + l.P.Lab)
	for _, g := range groups {
		if cg, err := cgroup.Open("labs/" + l.P.Lab + "/" + g); err == nil {
			if ps, err := cg.Procs(); err == nil {
				out = append(out, ps...)
			}
		}
	}
	return out
}

// assertClean fails the test if any of the lab's namespaces, processes (those in its cgroups
// before destruction, and any whose command line names the journal), or Squid shared memory
// segments are left.
func (l *Lab) assertClean(t testing.TB, pids []int, root string) {
	t.Helper()
	if ns, _ := netdev.ListNetns(plan.NetnsName(l.P.Lab, "")); len(ns) > 0 {
		t.Errorf("lab %s left namespaces %v", l.P.Lab, ns)
	}
	if ns, _ := netdev.ListNetns(plan.FabricName(l.P.Lab)); len(ns) > 0 {
		t.Errorf("lab %s left namespaces %v", l.P.Lab, ns)
	}
	for _, pid := range pids {
		if comm, ok := alive(pid); ok {
			t.Errorf("lab %s left process %d (%s)", l.P.Lab, pid, comm)
		}
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cmd), root) {
			if comm, ok := alive(pid); ok {
				t.Errorf("lab %s left process %d (%s): %s", l.P.Lab, pid, comm, strings.ReplaceAll(string(cmd), "\x00", " "))
			}
		}
	}
	for _, n := range l.P.Nodes {
		name := httpproxy.ServiceName(n.Netns)
		if m, _ := filepath.Glob("/dev/shm/" + name + "-*"); len(m) > 0 {
			t.Errorf("lab %s left shared memory %v", l.P.Lab, m)
		}
	}
}

// alive reports whether pid is a live (not zombie) process, and its name.
func alive(pid int) (string, bool) {
	if err := syscall.Kill(pid, 0); err != nil {
		return "", false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	s := string(stat)
	i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if i < 0 || j < i || j+2 >= len(s) {
		return "", false
	}
	if s[j+2] == 'Z' {
		return "", false
	}
	return s[i+1 : j], true
}

// Node returns the runtime node called name.
func (l *Lab) Node(t testing.TB, name string) runtime.Node {
	t.Helper()
	n, err := l.D.Node(l.P, name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// VnfEnv is the environment deploy gives the function of node name.
func (l *Lab) VnfEnv(t testing.TB, name string) vnf.Env {
	t.Helper()
	return vnf.Env{Node: l.Node(t, name), Plan: l.P.Node(name), StateDir: l.D.Journal.NodeDir(l.P.Lab)}
}

// ProbeEnv is the probe environment of the lab's chain called chain.
func (l *Lab) ProbeEnv(t testing.TB, chain string) probe.Env {
	t.Helper()
	c := l.P.Chain(chain)
	if c == nil {
		t.Fatalf("lab %s has no chain %q", l.P.Lab, chain)
	}
	return probe.Env{Plan: l.P, Chain: c, LogDir: t.TempDir(),
		Node: func(name string) (probe.Node, error) { return l.D.Node(l.P, name) }}
}
