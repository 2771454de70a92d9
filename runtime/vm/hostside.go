package vm

import (
	"fmt"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/netns"
)

// HostSide completes a VM node's host side in a network namespace another runtime made
// (runtime docker: the node's container, with the Docker network's interfaces) and has named
// as runtime netns names a node's (plan.Node.Netns), so that QEMU starts in it and the splice
// to its taps, inspect and destroy find it by the lab's tag: it creates the node's cgroup
// (labs/LAB/NODE) that QEMU's threads are accounted in, as runtime netns does for its nodes.
// Undo removes it; the lab's cgroup parent goes with the last one (runtime netns's Destroy
// removes the same on `sfclab destroy`, also after a crash).
//
// Equivalent to: mkdir /sys/fs/cgroup/cpuacct/sfclab/labs/LAB/NODE
func HostSide(p *plan.Plan, n *plan.Node, undo runtime.Undo) error {
	if n.VM == nil {
		return fmt.Errorf("make host side of node %s: it is not a VM", n.Name)
	}
	lab := p.Lab
	undo.Push("lab cgroup", func() error { return netns.RemoveLabCgroup(lab) })
	cg, err := cgroup.Create("labs/" + p.Lab + "/" + n.Name)
	if err != nil {
		return fmt.Errorf("create cgroup of VM node %s: %w", n.Name, err)
	}
	undo.Push("cgroup of "+n.Name, cg.Remove)
	return nil
}
