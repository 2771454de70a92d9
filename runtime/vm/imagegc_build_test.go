package vm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime/vm/accel"
)

// TestPruneBuilds builds busybox images for real in a root of its own, each with another
// agent binary (as every new sfclab build gives): a second build keeps the first image (a
// deploy used it a moment ago), and once both are a week old and QEMU boots the first
// (paused, as sfclab starts it), a third build removes the second, keeps the first (in use),
// keeps the image of other programs, and says so in one line. Run it under the suite lock.
func TestPruneBuilds(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED LOUDLY: needs root (depmod, QEMU)")
	}
	if err := CheckQEMU(); err != nil {
		t.Skipf("SKIPPED LOUDLY: %v", err)
	}
	if _, _, err := HostKernel(); err != nil {
		t.Skipf("SKIPPED LOUDLY: %v", err)
	}
	root, tmp := t.TempDir(), t.TempDir()
	// Three agents of different content: any binary is content enough for the image (the
	// guest in use is never started), each with bytes of its own appended.
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(truePath)
	if err != nil {
		t.Fatal(err)
	}
	agents := map[string]string{}
	for _, v := range []string{"A", "B", "C"} {
		agents[v] = filepath.Join(tmp, "agent-"+v)
		if err := os.WriteFile(agents[v], append(slices.Clone(src), []byte("sfclab agent "+v)...), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var lines []string
	build := func(agent string, programs []string) *Image {
		t.Helper()
		b := Builder{Root: root, Agent: agents[agent], Log: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			lines = append(lines, fmt.Sprintf(format, args...))
			t.Logf(format, args...)
		}}
		im, err := b.Ensure(programs)
		if err != nil {
			t.Fatalf("build with agent %s: %v", agent, err)
		}
		return im
	}
	pruned := func() string { // the last build's line about superseded images
		mu.Lock()
		defer mu.Unlock()
		for i := len(lines) - 1; i >= 0; i-- {
			if strings.Contains(lines[i], "superseded") {
				l := lines[i]
				lines = nil
				return l
			}
		}
		lines = nil
		return ""
	}
	keys := func() []string {
		ims, err := Builder{Root: root}.List()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, im := range ims {
			out = append(out, im.Key)
		}
		slices.Sort(out)
		return out
	}

	a := build("A", nil)
	other := build("A", []string{"ss"})
	if l := pruned(); l != "" {
		t.Errorf("the first builds of two program sets superseded something: %q", l)
	}
	b := build("B", nil)
	if a.Key == b.Key {
		t.Fatalf("agents A and B gave the same image key %s", a.Key)
	}
	if l := pruned(); !strings.Contains(l, "kept superseded "+a.Key+" (used ") {
		t.Errorf("build B's line %q does not say it kept %s, used a moment ago", l, a.Key)
	}
	if want := slices.Sorted(slices.Values([]string{a.Key, b.Key, other.Key})); !slices.Equal(keys(), want) {
		t.Fatalf("after build B: images %v, want %v", keys(), want)
	}

	// A week later, a VM boots image A.
	week := time.Now().Add(-7 * 24 * time.Hour)
	for _, im := range []*Image{a, b, other} {
		if err := os.Chtimes(im.Dir, week, week); err != nil {
			t.Fatal(err)
		}
	}
	const vmName = "imagegc-t.fwd"
	pausedQEMU(t, root, tmp, vmName, a) // the guest never runs, QEMU holds the image as a VM does

	c := build("C", nil)
	l := pruned()
	for _, want := range []string{"removed 1 superseded busybox guest image(s)", b.Key, "kept superseded " + a.Key + " (in use by " + vmName + ")"} {
		if !strings.Contains(l, want) {
			t.Errorf("build C's line %q lacks %q", l, want)
		}
	}
	if strings.Contains(l, other.Key) {
		t.Errorf("build C's line %q names the image of other programs %s", l, other.Key)
	}
	if want := slices.Sorted(slices.Values([]string{a.Key, c.Key, other.Key})); !slices.Equal(keys(), want) {
		t.Errorf("after build C: images %v, want %v (B %s gone, A in use kept, the other programs' kept)", keys(), want, b.Key)
	}
	if _, err := os.Stat(b.Dir); !os.IsNotExist(err) {
		t.Errorf("image B's directory %s: %v, want it gone", b.Dir, err)
	}
	if left, _ := filepath.Glob(filepath.Join(root, ".*")); len(left) > 0 {
		t.Errorf("left in the image root: %v", left)
	}
}

// pausedQEMU starts QEMU on image im as sfclab starts a VM (machine.args), but paused (-S):
// the guest never runs and QEMU holds the image's files as a VM does. It waits (at most a
// minute) until the builder at root finds the image in use by the VM named name, and
// returns a function that kills QEMU and waits for it (also called at the test's end).
func pausedQEMU(t *testing.T, root, tmp, name string, im *Image) (stop func()) {
	t.Helper()
	run := filepath.Join(tmp, "run")
	if err := os.MkdirAll(run, 0o700); err != nil {
		t.Fatal(err)
	}
	m := machine{Name: name, VM: plan.VM{CPUs: 1, Memory: 256}, Accel: accel.Decision{Accel: accel.TCG, Reason: "test"},
		Image: im, Socket: filepath.Join(run, sockFile), Console: filepath.Join(run, consoleFile), PIDFile: filepath.Join(run, pidFile)}
	argv := append(m.args(), "-S")
	qemu := exec.Command(argv[0], argv[1:]...)
	var qlog strings.Builder
	qemu.Stdout, qemu.Stderr = &qlog, &qlog
	if err := qemu.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- qemu.Wait() }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = qemu.Process.Kill()
			<-exited
		})
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(time.Minute)
	for {
		use, err := Builder{Root: root}.InUse()
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(use[im.Key], []string{name}) {
			return stop
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("QEMU exited: %v: %s", err, qlog.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("InUse = %v, want %s used by %s (QEMU %v)", use, im.Key, name, argv)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
