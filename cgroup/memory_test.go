package cgroup

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestDirMemory(t *testing.T) {
	for _, c := range []struct {
		name  string
		v2    bool
		files map[string]string
		want  uint64
		fails bool
	}{
		{"v2", true, map[string]string{"memory.current": "10485760\n", "memory.stat": "anon 8000000\ninactive_file 2097152\nactive_file 1\n"}, 8388608, false},
		{"v1", false, map[string]string{"memory.usage_in_bytes": "5000\n", "memory.stat": "cache 10\ninactive_file 99\ntotal_inactive_file 1000\n"}, 4000, false},
		{"v1 no inactive", false, map[string]string{"memory.usage_in_bytes": "5000\n", "memory.stat": "cache 10\n"}, 5000, false},
		{"cache above usage", true, map[string]string{"memory.current": "10\n", "memory.stat": "inactive_file 20\n"}, 0, false},
		{"no controller", true, map[string]string{"cpu.stat": "usage_usec 1\n"}, 0, true},
		{"garbage", false, map[string]string{"memory.usage_in_bytes": "lots\n", "memory.stat": ""}, 0, true},
	} {
		dir := t.TempDir()
		for f, v := range c.files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := DirMemory(dir, c.v2)
		if (err != nil) != c.fails || got != c.want {
			t.Errorf("%s: DirMemory = %d, %v; want %d (error: %v)", c.name, got, err, c.want, c.fails)
		}
	}
}

// TestGroupMemory: a group's memory is its processes' (with a resident buffer of 64 MiB in
// one of them, at least that), whichever hierarchy the group lives in.
func TestGroupMemory(t *testing.T) {
	requireRoot(t)
	for name, h := range hierarchies(t) {
		t.Run(name, func(t *testing.T) {
			withHierarchy(t, h)
			g := testGroup(t, "mem/node")
			empty, err := g.Memory()
			if err != nil {
				t.Fatal(err)
			}
			// python3 is not everywhere; dd holds its block buffer (bs) resident while it copies.
			startIn(t, g, `exec dd if=/dev/zero of=/dev/null bs=64M count=1000000`)
			var got uint64
			waitFor(t, "64 MiB resident in the group", 5*time.Second, func() bool {
				got, err = g.Memory()
				return err == nil && got >= empty+60<<20
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestProcsMemory(t *testing.T) {
	self, err := ProcsMemory([]int{os.Getpid()})
	if err != nil || self == 0 {
		t.Fatalf("ProcsMemory(self) = %d, %v", self, err)
	}
	both, err := ProcsMemory([]int{os.Getpid(), 1 << 30}) // the second does not exist
	if err != nil || both != self && both < self/2 {
		t.Errorf("ProcsMemory with a missing pid = %d, %v; want about %d", both, err, self)
	}
}
