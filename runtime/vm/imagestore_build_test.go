package vm

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// killedBuildEnv makes TestKilledBuildChild, in a child process, a build that holds its
// build directory under the root this names and is then killed (TestSharedKernelBuilds).
const killedBuildEnv = "SFCLAB_TEST_KILLED_BUILD_ROOT"

// TestKilledBuildChild is not a test: in a child process of TestSharedKernelBuilds it makes a
// build directory as a build does (newBuildDir: locked, marked), writes part of a kernel into
// it, prints its path and waits to be killed.
func TestKilledBuildChild(t *testing.T) {
	root := os.Getenv(killedBuildEnv)
	if root == "" {
		t.Skip("the child process of TestSharedKernelBuilds")
	}
	dir, _, err := Builder{Root: root}.newBuildDir()
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(filepath.Join(dir, "vmlinux"), make([]byte, 1<<20), 0o644); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(dir)
	time.Sleep(time.Hour)
	os.Exit(1)
}

// TestSharedKernelBuilds builds busybox images for real in a root of its own. Crash
// leftovers: a build directory whose build (a child process) still runs stays, one an
// sfclab before the lock left a day ago goes, a young one of that kind stays; once the child
// is killed the next build removes its directory. Shared kernel: two images of two program
// sets link one stored vmlinux; an image made the old way (a vmlinux of its own) is found
// and boots from its own copy. A stored kernel no image links goes at the next build. GC:
// while QEMU boots an image (paused), `images rm all` keeps it and the kernel it links; once
// QEMU is gone, everything goes, the store too. Run it under the suite lock.
func TestSharedKernelBuilds(t *testing.T) {
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
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(truePath)
	if err != nil {
		t.Fatal(err)
	}
	agents := map[string]string{}
	for _, v := range []string{"A", "B"} {
		agents[v] = filepath.Join(tmp, "agent-"+v)
		if err := os.WriteFile(agents[v], append(slices.Clone(src), []byte("sfclab agent "+v)...), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var lines []string
	logged := func() string { // what the builds logged since the last call
		mu.Lock()
		defer mu.Unlock()
		l := strings.Join(lines, "\n")
		lines = nil
		return l
	}
	b := func(agent string) Builder {
		return Builder{Root: root, Agent: agents[agent], Log: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			lines = append(lines, fmt.Sprintf(format, args...))
			t.Logf(format, args...)
		}}
	}
	build := func(agent string, programs []string) *Image {
		t.Helper()
		im, err := b(agent).Ensure(programs)
		if err != nil {
			t.Fatalf("build with agent %s: %v", agent, err)
		}
		return im
	}
	exists := func(p string) bool {
		_, err := os.Stat(p)
		return err == nil
	}
	links := func(p string) int {
		t.Helper()
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return int(st.Sys().(*syscall.Stat_t).Nlink)
	}
	stored := func() []string {
		got, _ := filepath.Glob(filepath.Join(root, kernelStore, "*", "vmlinux"))
		return got
	}

	// Crash leftovers: a build running in another process, killed later; two directories
	// of an sfclab before the lock, a day old and fresh.
	child := exec.Command(os.Args[0], "-test.run=^TestKilledBuildChild$")
	child.Env = append(os.Environ(), killedBuildEnv+"="+root)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = child.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = child.Process.Kill()
		<-exited
	})
	first, err := bufio.NewReader(out).ReadString('\n')
	killed := strings.TrimSpace(first)
	if err != nil || !strings.HasPrefix(killed, filepath.Join(root, buildPrefix)) {
		t.Fatalf("the child build: %q, %v", first, err)
	}
	legacyOld, legacyNew := filepath.Join(root, ".build-111"), filepath.Join(root, ".build-222")
	for _, d := range []string{legacyOld, legacyNew} {
		if err := os.MkdirAll(filepath.Join(d, "modroot"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	day := time.Now().Add(-legacyBuildAge - time.Minute)
	if err := os.Chtimes(legacyOld, day, day); err != nil {
		t.Fatal(err)
	}

	a := build("A", nil)
	l := logged()
	if !exists(killed) || strings.Contains(l, filepath.Base(killed)) {
		t.Errorf("a build running in another process: its directory %s removed (exists %v; log %q)", killed, exists(killed), l)
	}
	if exists(legacyOld) || !strings.Contains(l, "removed stale guest image build .build-111 (unlocked, unchanged for 24h") {
		t.Errorf("a day-old unlocked build directory: exists %v, log %q", exists(legacyOld), l)
	}
	if !exists(legacyNew) {
		t.Error("a fresh unlocked build directory without the marker (an older sfclab's build) was removed")
	}
	_ = child.Process.Signal(syscall.SIGKILL)
	<-exited
	other := build("A", []string{"ss"})
	if l := logged(); exists(killed) || !strings.Contains(l, "removed stale guest image build "+filepath.Base(killed)+" (its build is gone") {
		t.Errorf("the killed build's directory: exists %v after the next build, log %q", exists(killed), l)
	}
	if !exists(legacyNew) {
		t.Error("a fresh unlocked build directory without the marker was removed")
	}
	if err := os.RemoveAll(legacyNew); err != nil {
		t.Fatal(err)
	}

	// One kernel for both images.
	if got := stored(); len(got) != 1 {
		t.Fatalf("stored kernels %v, want one", got)
	}
	kernel := stored()[0]
	for _, im := range []*Image{a, other} {
		ki, _ := os.Stat(kernel)
		ii, err := os.Stat(im.VMLinux())
		if err != nil || !os.SameFile(ki, ii) {
			t.Errorf("image %s's vmlinux is not the stored kernel %s: %v", im.Key, kernel, err)
		}
	}
	if n := links(kernel); n != 3 {
		t.Errorf("stored kernel: %d links, want 3 (the store, two images)", n)
	}
	if _, k, _, err := memNeed(other); err != nil || k == 0 {
		t.Errorf("memNeed of an image with the shared kernel: kernel %d MiB, %v", k, err)
	}

	// An image made the old way: a vmlinux of its own, found and used as it is.
	own := filepath.Join(a.Dir, "vmlinux.own")
	if err := copyFile(a.VMLinux(), own); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(own, a.VMLinux()); err != nil {
		t.Fatal(err)
	}
	again := build("A", nil)
	if again.Key != a.Key || links(again.VMLinux()) != 1 || links(kernel) != 2 {
		t.Errorf("the old-way image: key %s (want %s), its vmlinux %d links (want 1), the stored %d (want 2)", again.Key, a.Key, links(again.VMLinux()), links(kernel))
	}
	if _, k, _, err := memNeed(again); err != nil || k == 0 {
		t.Errorf("memNeed of the old-way image: kernel %d MiB, %v", k, err)
	}

	// A stored kernel no image links (its images gone) goes at the next build.
	orphan := filepath.Join(root, kernelStore, "6.1.0-1-amd64-000000000000", "vmlinux")
	if err := copyFile(truePath, orphan); err != nil {
		t.Fatal(err)
	}
	fresh := build("B", []string{"ss"}) // supersedes other, which a deploy used a moment ago
	if l := logged(); exists(orphan) || !strings.Contains(l, "removed 1 shared kernel(s) no image uses") || !strings.Contains(l, "6.1.0-1-amd64-000000000000") {
		t.Errorf("the unlinked stored kernel: exists %v after a build, log %q", exists(orphan), l)
	}
	if exists(filepath.Dir(orphan)) {
		t.Errorf("the unlinked kernel's directory %s stayed", filepath.Dir(orphan))
	}
	if !exists(kernel) || links(kernel) != 3 {
		t.Errorf("the stored kernel three images link: exists %v", exists(kernel))
	}

	// A VM boots image other (paused, as sfclab starts it): `images rm all` keeps it and
	// the kernel; once it is gone, all goes.
	const vmName = "imagedisk-t.fwd"
	stopQEMU := pausedQEMU(t, root, tmp, vmName, other)
	if err := (Builder{Root: root}).Remove("all"); err == nil || !strings.Contains(err.Error(), other.Key+" (in use by "+vmName+")") {
		t.Errorf("images rm all with a VM: %v, want it to keep %s in use", err, other.Key)
	}
	if !exists(other.VMLinux()) || !exists(kernel) || links(kernel) != 2 {
		t.Errorf("after rm all with a VM: the VM's image kernel exists %v, stored kernel exists %v (want both, 2 links)", exists(other.VMLinux()), exists(kernel))
	}
	for _, im := range []*Image{again, fresh} {
		if exists(im.Dir) {
			t.Errorf("after rm all: image %s not in use stayed", im.Key)
		}
	}
	stopQEMU()
	if err := (Builder{Root: root}).Remove("all"); err != nil {
		t.Errorf("images rm all without a VM: %v", err)
	}
	left, _ := os.ReadDir(root)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != kernelStore || len(stored()) != 0 {
		t.Errorf("after rm all: root holds %v, the store %v; want only the empty store", names, stored())
	}
}
