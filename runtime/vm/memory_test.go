package vm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/plan"
)

// A VM whose memory is below what its guest image needs (the kernel's loaded segments, the
// initramfs twice, the margin) is refused with its place in the lab file; at the need it is
// accepted.
func TestCheckMemory(t *testing.T) {
	dir := t.TempDir()
	exe, err := os.Executable() // an ELF file stands in for the kernel
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vmlinux"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "initramfs.cpio"), make([]byte, 10<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	im := &Image{Dir: dir}
	need, k, i, err := memNeed(im)
	if err != nil {
		t.Fatal(err)
	}
	if i != 10 || k == 0 || need != k+2*i+bootMarginMiB {
		t.Fatalf("memNeed = %d (kernel %d, initramfs %d); want kernel > 0, initramfs 10, need kernel+20+%d", need, k, i, bootMarginMiB)
	}
	p := &plan.Plan{Lab: "t", Nodes: []*plan.Node{{Name: "ns"}, {Name: "fwd", VM: &plan.VM{Memory: need - 1, Where: "lab.yaml:8:9"}}}}
	err = checkMemory(p, map[string]*Image{"fwd": im})
	if err == nil || !strings.HasPrefix(err.Error(), "lab.yaml:8:9: node fwd: vm memory ") || !strings.Contains(err.Error(), "needs at least") {
		t.Errorf("memory below the need: %v; want refused at lab.yaml:8:9", err)
	}
	p.Nodes[1].VM.Memory = need
	if err := checkMemory(p, map[string]*Image{"fwd": im}); err != nil {
		t.Errorf("memory at the need refused: %v", err)
	}
}
