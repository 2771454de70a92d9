package cgroup

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseCPUs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		bad  string
	}{
		{in: "0", want: []int{0}},
		{in: "0-1\n", want: []int{0, 1}},
		{in: "3,0-1,1", want: []int{0, 1, 3}},
		{in: "", bad: "empty"},
		{in: "a", bad: "not a core number"},
		{in: "2-1", bad: "A <= B"},
		{in: "-1", bad: "not a core number"},
		{in: "0-5000", bad: "beyond 4095"},
	} {
		got, err := ParseCPUs(tc.in)
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("ParseCPUs(%q) = %v, %v; want error with %q", tc.in, got, err, tc.bad)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseCPUs(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if back, _ := ParseCPUs(FormatCPUs(got)); !slices.Equal(back, got) {
			t.Errorf("FormatCPUs(%v) = %q does not parse back", got, FormatCPUs(got))
		}
	}
	if got := FormatCPUs([]int{0, 1, 2, 5, 7, 8}); got != "0-2,5,7-8" {
		t.Errorf("FormatCPUs = %q", got)
	}
}

func TestCheckCPUs(t *testing.T) {
	f := filepath.Join(t.TempDir(), "online")
	if err := os.WriteFile(f, []byte("0-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := OnlineFile
	OnlineFile = f
	t.Cleanup(func() { OnlineFile = saved })
	for _, tc := range []struct {
		in, bad string
	}{
		{in: "0"}, {in: "0-1"}, {in: "1"},
		{in: "2", bad: "core 2 does not exist on this machine (online: 0-1"},
		{in: "0,3-4", bad: "core 3-4 does not exist"},
		{in: "x", bad: "not a core number"},
	} {
		err := CheckCPUs(tc.in)
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("CheckCPUs(%q) = %v", tc.in, err)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("CheckCPUs(%q) = %v; want %q", tc.in, err, tc.bad)
		case tc.bad != "" && strings.Contains(tc.bad, "does not exist") && !errors.Is(err, ErrNoCore):
			t.Errorf("CheckCPUs(%q) = %v; want ErrNoCore", tc.in, err)
		}
	}
}

func TestParseCpusetMount(t *testing.T) {
	hybrid := "cgroup /sys/fs/cgroup/cpuacct cgroup rw,cpuacct 0 0\ncgroup /sys/fs/cgroup/cpu\\040set cgroup rw,relatime,cpuset 0 0\n"
	if got := parseCpusetMount([]byte(hybrid)); got != "/sys/fs/cgroup/cpu set" {
		t.Errorf("parseCpusetMount = %q", got)
	}
	if got := parseCpusetMount([]byte("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n")); got != "" {
		t.Errorf("parseCpusetMount(v2 only) = %q", got)
	}
}

// TestSetCPUs confines a group to core 0 and checks what the kernel applies to a process
// that joins it (Cpus_allowed_list), then that Remove leaves no cpuset group behind.
func TestSetCPUs(t *testing.T) {
	requireRoot(t)
	if err := CPUsAvailable(); err != nil {
		t.Skipf("SKIP: %v", err)
	}
	g := testGroup(t, "lab/node1")
	if err := g.SetCPUs("0"); err != nil {
		t.Fatal(err)
	}
	if got, err := g.CPUs(); err != nil || got != "0" {
		t.Errorf("CPUs = %q, %v; want 0", got, err)
	}
	// Open finds the confinement again (destroy and exec open groups, they do not create them).
	og, err := Open(g.Rel())
	if err != nil {
		t.Fatal(err)
	}
	if len(og.ProcsFiles()) != len(g.ProcsFiles()) {
		t.Errorf("Open: procs files %v, Create+SetCPUs: %v", og.ProcsFiles(), g.ProcsFiles())
	}
	var script []string
	for _, f := range og.ProcsFiles() {
		script = append(script, "echo $$ > '"+f+"'")
	}
	cmd := exec.Command("/bin/sh", "-c", strings.Join(script, " && ")+` && exec grep Cpus_allowed_list /proc/self/status`)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run in group: %v", err)
	}
	if got := strings.Join(strings.Fields(string(out)), " "); got != "Cpus_allowed_list: 0" {
		t.Errorf("process in the group: %q, want Cpus_allowed_list: 0", got)
	}
	// A second node of another host on core 1 beside it, where the machine has core 1.
	if CheckCPUs("1") == nil {
		g2, err := Create(strings.TrimSuffix(g.Rel(), "node1") + "node2")
		if err != nil {
			t.Fatal(err)
		}
		if err := g2.SetCPUs("1"); err != nil {
			t.Fatal(err)
		}
		if got, _ := g2.CPUs(); got != "1" {
			t.Errorf("node2 CPUs = %q, want 1", got)
		}
	}
	top := strings.Split(g.Rel(), "/")[0]
	tg, err := Open(top)
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.Remove(); err != nil {
		t.Fatal(err)
	}
	if twin := twinDir(top, Version() == 2); twin != "" {
		deadline := time.Now().Add(time.Second)
		for {
			_, err := os.Stat(twin)
			if errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cpuset twin %s left after Remove", twin)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if r := CpusetRoot(); r != "" {
		_ = os.Remove(r)
	}
}
