package docker

import (
	"fmt"

	"github.com/sfclab/sfclab/cgroup"
)

// Memory returns the memory the container's processes use now, in bytes, as docker stats
// counts it (cgroup.DirMemory): from the memory controller's group of the container's init,
// on cgroup v1 the memory hierarchy's path in /proc/PID/cgroup, on v2 the unified one. It is
// the capability the cpu sampler reports per node beside its CPU.
func (n *Node) Memory() (uint64, error) {
	dir, v2, err := cgroup.ControllerDir(n.PID, "memory")
	if err != nil {
		return 0, fmt.Errorf("read memory of node %s: %w", n.Name, err)
	}
	v, err := cgroup.DirMemory(dir, v2)
	if err != nil {
		return 0, fmt.Errorf("read memory of node %s: %w", n.Name, err)
	}
	return v, nil
}
