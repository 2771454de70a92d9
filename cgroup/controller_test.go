package cgroup

import (
	"errors"
	"io/fs"
	"os"
	"testing"
)

// TestControllerDirMemory finds this test process's memory group the way docker's Node.Memory finds a
// container's, and reads it: the process's own memory must be in it.
func TestControllerDirMemory(t *testing.T) {
	dir, v2, err := ControllerDir(os.Getpid(), "memory")
	if err != nil {
		t.Fatal(err)
	}
	v, err := DirMemory(dir, v2)
	if v2 && errors.Is(err, fs.ErrNotExist) {
		t.Skipf("SKIP: %s has no memory.current (the cgroup v2 root, or memory not enabled there)", dir)
	}
	if err != nil {
		t.Fatal(err)
	}
	self, err := ProcsMemory([]int{os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	if v < self/2 {
		t.Errorf("memory of %s = %d bytes, less than half this process's resident %d", dir, v, self)
	}
	if _, _, err := ControllerDir(1<<30, "memory"); err == nil {
		t.Error("a missing pid has a memory cgroup")
	}
}
