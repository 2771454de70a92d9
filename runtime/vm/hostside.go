package vm

import (
	"fmt"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/netns"
)

// HostSide makes a VM node's host side in a network namespace another runtime made (runtime
// docker: the node's container, at nsPath, /proc/PID/ns/net of its init, with the Docker
// network's interfaces): it names the namespace as runtime netns names a node's
// (plan.Node.Netns), so that BootMachines starts QEMU in it and the splice to its taps, inspect
// and destroy find it by the lab's tag, and it creates the node's cgroup (labs/LAB/NODE) that
// QEMU's threads are accounted in. Undo removes both; the lab's cgroup parent goes with the
// last of them (runtime netns's Destroy removes the same on `sfclab destroy`, also after a
// crash).
//
// Equivalent to: touch /run/netns/sfc.LAB.NODE && mount --bind /proc/PID/ns/net
// /run/netns/sfc.LAB.NODE; mkdir /sys/fs/cgroup/cpuacct/sfclab/labs/LAB/NODE
func HostSide(p *plan.Plan, n *plan.Node, nsPath string, undo runtime.Undo) error {
	if n.VM == nil {
		return fmt.Errorf("make host side of node %s: it is not a VM", n.Name)
	}
	name := n.Netns
	undo.Push("netns "+name, func() error { return netdev.DeleteNetns(name) })
	if err := netdev.BindNetns(name, nsPath); err != nil {
		return fmt.Errorf("name the namespace of VM node %s: %w", n.Name, err)
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
