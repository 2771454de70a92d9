package netns

import "fmt"

// Memory returns the memory the node's processes use now, in bytes (cgroup.Group.Memory):
// the capability the cpu sampler reports per node beside its CPU.
func (n *Node) Memory() (uint64, error) {
	if n.Cgroup == nil {
		return 0, fmt.Errorf("read memory of node %s: %w", n.Name, ErrNoCgroup)
	}
	v, err := n.Cgroup.Memory()
	if err != nil {
		return 0, fmt.Errorf("read memory of node %s: %w", n.Name, err)
	}
	return v, nil
}

var _ interface{ Memory() (uint64, error) } = (*Node)(nil)
