package vm

import (
	"debug/elf"
	"fmt"
	"os"

	"github.com/sfclab/sfclab/plan"
)

// bootMarginMiB is guest memory beyond the kernel's loaded image and the initramfs: the
// kernel's own structures (page tables, memory map, slab) and the agent's first pages. Set
// between what was seen on the development host (Debian 6.1 kernel, 56 MiB loaded): a 56 MiB
// initramfs booted in 256 MiB (needs 248 with this margin), a 67 MiB one did not (270).
const bootMarginMiB = 80

// memNeed is the least memory (MiB) a guest of image im boots in: the kernel's loaded
// segments, plus the initramfs twice (QEMU loads it into guest memory, and the kernel unpacks
// it into its root file system before it frees the loaded copy), plus bootMarginMiB. Below
// it the kernel's unpacking fails ("Initramfs unpacking failed: write error") and no /init
// runs: seen with the sfclab binary as the agent (a 70 MB initramfs) at 256 MiB.
func memNeed(im *Image) (need, kernelMiB, initrdMiB int, err error) {
	f, err := elf.Open(im.VMLinux())
	if err != nil {
		return 0, 0, 0, fmt.Errorf("read guest kernel: %w", err)
	}
	defer f.Close()
	var load uint64
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			load += p.Memsz
		}
	}
	st, err := os.Stat(im.Initramfs())
	if err != nil {
		return 0, 0, 0, fmt.Errorf("read guest initramfs: %w", err)
	}
	kernelMiB, initrdMiB = int((load+1<<20-1)>>20), int((st.Size()+1<<20-1)>>20)
	return kernelMiB + 2*initrdMiB + bootMarginMiB, kernelMiB, initrdMiB, nil
}

// checkMemory refuses a VM whose memory is below what its guest image (ims, by node) needs
// to boot, with the place of its vm: settings in the lab file.
func checkMemory(p *plan.Plan, ims map[string]*Image) error {
	for _, n := range p.Nodes {
		if n.VM == nil || ims[n.Name] == nil {
			continue
		}
		need, k, i, err := memNeed(ims[n.Name])
		if err != nil {
			return err
		}
		if n.VM.Memory >= need {
			continue
		}
		where := n.VM.Where
		if where == "" {
			where = "lab " + p.Lab
		}
		return fmt.Errorf("%s: node %s: vm memory %d MiB: its guest image needs at least %d MiB (kernel %d MiB, initramfs %d MiB loaded and unpacked, %d MiB for the kernel's own)",
			where, n.Name, n.VM.Memory, need, k, i, bootMarginMiB)
	}
	return nil
}
