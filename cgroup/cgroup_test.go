package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/testroot"
)

const testRoot = "sfclab-test"

func TestMain(m *testing.M) {
	SetRootName(testRoot)
	os.Exit(m.Run())
}

func requireRoot(t *testing.T) { testroot.Require(t, "this test creates cgroups") }

// hierarchies returns the hierarchy Create uses here and, on a hybrid host,
// also the cgroup2 mount, so that both code paths run where possible.
func hierarchies(t *testing.T) map[string]hierarchy {
	h, err := detect()
	if err != nil {
		t.Skipf("SKIP: %v", err)
	}
	hs := map[string]hierarchy{fmt.Sprintf("v%d", Version()): h}
	if !h.v2 {
		b, _ := os.ReadFile("/proc/mounts")
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[2] == "cgroup2" {
				hs["v2-hybrid"] = hierarchy{mount: f[1], v2: true}
				break
			}
		}
	}
	return hs
}

// withHierarchy makes the package use h for the rest of the test.
func withHierarchy(t *testing.T, h hierarchy) {
	saved := detect
	detect = func() (hierarchy, error) { return h, nil }
	t.Cleanup(func() { detect = saved })
}

// testGroup creates a per-process top group under the test root and
// registers its removal (and the root's, if then empty).
func testGroup(t *testing.T, sub string) *Group {
	t.Helper()
	top := fmt.Sprintf("cgtest-%d", os.Getpid())
	g, err := Create(top + "/" + sub)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tg, err := Open(top)
		if err == nil {
			if err := tg.Remove(); err != nil {
				t.Error(err)
			}
		}
		_ = os.Remove(Root()) // fails while other tests use the root
	})
	return g
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once reaped
	err  error         // Wait's result, valid after done
}

// startIn starts sh -c script in g before the script runs and reaps it in
// the background; cleanup kills it if still running.
func startIn(t *testing.T, g *Group, script string) *proc {
	t.Helper()
	p := &proc{
		cmd:  exec.Command("/bin/sh", "-c", `echo $$ > "$0" || exit 1; `+script, g.ProcsFile()),
		done: make(chan struct{}),
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			t.Errorf("pid %d not reaped", p.cmd.Process.Pid)
		}
	})
	return p
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestGroupLifecycle(t *testing.T) {
	requireRoot(t)
	for name, h := range hierarchies(t) {
		t.Run(name, func(t *testing.T) {
			withHierarchy(t, h)
			g := testGroup(t, "lab/node1")
			top := strings.Split(g.Rel(), "/")[0]

			if want := filepath.Join(h.mount, testRoot, top, "lab/node1"); g.Path() != want {
				t.Errorf("Path = %s, want %s", g.Path(), want)
			}
			if _, err := os.Stat(g.ProcsFile()); err != nil {
				t.Fatal(err)
			}
			if again, err := Create(g.Rel()); err != nil || again.Path() != g.Path() {
				t.Errorf("second Create = %v, %v", again, err)
			}
			if _, err := Open(top + "/lab/nope"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Open(missing) = %v, want ErrNotFound", err)
			}
			if _, err := Open("../etc"); err == nil {
				t.Error("Open(../etc) succeeded")
			}
			if _, err := Create(top + "/lab/node2"); err != nil {
				t.Fatal(err)
			}
			got, err := List(top + "/lab")
			if want := []string{"node1", "node2"}; err != nil || !slices.Equal(got, want) {
				t.Errorf("List = %v, %v; want %v", got, err, want)
			}
			if got, err := List(top + "/nope"); err != nil || len(got) != 0 {
				t.Errorf("List(missing) = %v, %v", got, err)
			}
			if u, err := g.CPU(); err != nil || u.Total() > 50*time.Millisecond {
				t.Errorf("CPU of new group = %+v, %v", u, err)
			}

			// CPU: a bounded busy loop; stop it once enough time is seen.
			p := startIn(t, g, `i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done`)
			waitFor(t, "pid in cgroup.procs", 5*time.Second, func() bool {
				pids, _ := g.Procs()
				return slices.Contains(pids, p.cmd.Process.Pid)
			})
			var u Usage
			waitFor(t, "CPU().User > 200ms", 20*time.Second, func() bool {
				var err error
				if u, err = g.CPU(); err != nil {
					t.Fatal(err)
				}
				return u.User > 200*time.Millisecond
			})
			parent, err := Open(top + "/lab")
			if err != nil {
				t.Fatal(err)
			}
			if pu, err := parent.CPU(); err != nil || pu.User < u.User {
				t.Errorf("parent CPU %+v < child %+v (%v): not hierarchical", pu, u, err)
			}

			if err := g.Kill(2 * time.Second); err != nil {
				t.Fatal(err)
			}
			if pids, err := g.Procs(); err != nil || len(pids) != 0 {
				t.Errorf("procs after Kill = %v, %v", pids, err)
			}
			select {
			case <-p.done:
				if p.err == nil || !strings.Contains(p.err.Error(), "killed") {
					t.Errorf("loop ended with %v, want killed", p.err)
				}
			case <-time.After(2 * time.Second):
				t.Error("loop not reaped after Kill")
			}
			if u2, err := g.CPU(); err != nil || u2.User < u.User {
				t.Errorf("CPU after kill = %+v, %v; want >= %+v", u2, err, u)
			}
		})
	}
}

func TestRemoveKillsSubtree(t *testing.T) {
	requireRoot(t)
	for name, h := range hierarchies(t) {
		t.Run(name, func(t *testing.T) {
			withHierarchy(t, h)
			a := testGroup(t, "rm/a")
			b, err := Create(a.Rel() + "/deeper/b")
			if err != nil {
				t.Fatal(err)
			}
			var procs []*proc
			for _, g := range []*Group{a, b, b} {
				procs = append(procs, startIn(t, g, `exec sleep 30`))
			}
			// A forking script too: its child must die as well.
			procs = append(procs, startIn(t, b, `sleep 30 & wait`))
			waitFor(t, "1+4 processes", 5*time.Second, func() bool {
				pa, _ := a.Procs()
				pb, _ := b.Procs()
				return len(pa) == 1 && len(pb) == 4
			})

			top, err := Open(strings.SplitN(a.Rel(), "/", 2)[0] + "/rm")
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := top.Remove(); err != nil {
				t.Fatal(err)
			}
			t.Logf("Remove took %s", time.Since(start))
			for _, g := range []*Group{a, b, top} {
				if _, err := os.Stat(g.Path()); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s still exists (%v)", g.Path(), err)
				}
				if _, err := Open(g.Rel()); !errors.Is(err, ErrNotFound) {
					t.Errorf("Open(%s) after Remove = %v", g.Rel(), err)
				}
			}
			for _, p := range procs {
				select {
				case <-p.done:
				case <-time.After(2 * time.Second):
					t.Error("process not dead after Remove")
				}
			}
			if err := top.Remove(); err != nil {
				t.Errorf("second Remove = %v", err)
			}
			if err := top.Kill(time.Second); err != nil {
				t.Errorf("Kill of removed group = %v", err)
			}
		})
	}
}

func TestAddProcErrors(t *testing.T) {
	requireRoot(t)
	g := testGroup(t, "errs")
	if pids, err := g.Procs(); err != nil || len(pids) != 0 {
		t.Errorf("Procs of new group = %v, %v", pids, err)
	}
	if err := g.AddProc(0); err == nil {
		t.Error("AddProc(0) succeeded")
	}
	if err := g.AddProc(1 << 30); err == nil {
		t.Error("AddProc(no such pid) succeeded")
	}
}

func TestParseMounts(t *testing.T) {
	for _, tc := range []struct {
		name, mounts string
		want         hierarchy
		err          bool
	}{
		{"hybrid", `cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
`, hierarchy{mount: "/sys/fs/cgroup/cpuacct"}, false},
		{"comounted", `cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,cpu,cpuacct 0 0
`, hierarchy{mount: "/sys/fs/cgroup/cpu,cpuacct"}, false},
		{"v2", `cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0
`, hierarchy{mount: "/sys/fs/cgroup", v2: true}, false},
		{"v2 escaped", `cgroup2 /mnt/my\040cg cgroup2 rw 0 0
`, hierarchy{mount: "/mnt/my cg", v2: true}, false},
		{"cpuacct name only", `cgroup /sys/fs/cgroup/systemd cgroup rw,name=systemd,xattr 0 0
`, hierarchy{}, true},
	} {
		got, err := parseMounts([]byte(tc.mounts))
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: parseMounts = %+v, %v; want %+v (err %v)", tc.name, got, err, tc.want, tc.err)
		}
	}
}

func TestRelValidation(t *testing.T) {
	for rel, ok := range map[string]bool{
		"": true, ".": true, "labs/l/n": true, "a/../b": true,
		"../x": false, "/abs": false, "a/../../b": false,
	} {
		if _, err := cleanRel(rel); (err == nil) != ok {
			t.Errorf("cleanRel(%q) error = %v, want ok=%v", rel, err, ok)
		}
	}
	if clockTicks() <= 0 {
		t.Error("clockTicks <= 0")
	}
}

func TestOfProcess(t *testing.T) {
	g, err := OfProcess(os.Getpid())
	if errors.Is(err, ErrNoHierarchy) {
		t.Skip("SKIPPED LOUDLY: no cgroup hierarchy mounted")
	}
	if err != nil {
		t.Fatal(err)
	}
	pids, err := g.Procs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pids, os.Getpid()) {
		t.Errorf("group %s of this process lists %v, not pid %d", g.Path(), pids, os.Getpid())
	}
	if _, err := g.CPU(); err != nil {
		t.Error(err)
	}
}

// TestGone: a group removed while it is read answers ENOENT, or ENODEV on cgroup v1; both
// mean the group is gone, and other errors do not.
func TestGone(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"ENOENT", &fs.PathError{Op: "open", Path: "x/cgroup.procs", Err: syscall.ENOENT}, true},
		{"ENODEV (v1 dead group)", &fs.PathError{Op: "read", Path: "x/cgroup.procs", Err: syscall.ENODEV}, true},
		{"wrapped ENODEV", fmt.Errorf("read: %w", &fs.PathError{Op: "read", Path: "p", Err: syscall.ENODEV}), true},
		{"EACCES", &fs.PathError{Op: "open", Path: "p", Err: syscall.EACCES}, false},
		{"EBUSY", syscall.EBUSY, false},
	} {
		if got := gone(tc.err); got != tc.want {
			t.Errorf("%s: gone = %v, want %v", tc.name, got, tc.want)
		}
	}
}
