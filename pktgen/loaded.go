package pktgen

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
)

// ProgramNames are the names of this package's programs, as bpftool prog show lists them.
var ProgramNames = []string{"sfc_gen", "sfc_echo", "sfc_count", "sfc_reflect", "sfc_pass"}

// Loaded lists the ids of the programs loaded on the host (by any process) whose names are
// ProgramNames: after every holder ended or closed its generator and far ends, none.
func Loaded() ([]ebpf.ProgramID, error) {
	var ids []ebpf.ProgramID
	id := ebpf.ProgramID(0)
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return ids, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list bpf programs: %w", err)
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // gone meanwhile
		}
		info, err := p.Info()
		p.Close()
		if err != nil {
			continue
		}
		for _, n := range ProgramNames {
			if info.Name == n {
				ids = append(ids, id)
			}
		}
	}
}
