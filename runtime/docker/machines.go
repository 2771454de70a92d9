package docker

import (
	"context"

	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
)

// VM nodes in a docker lab (vm: on an endpoint or function; a VM function between container
// endpoints, as in study B's KVM column and study C's VNFs). The node's container is made as
// any other: on its Docker networks, with the plan's addresses, Docker's MACs and the
// network's MTU. It becomes the VM's host side, as a VM node's namespace is in runtime vm,
// whose code does the rest (Runtime.Machines): CreateNodes builds the guest images before
// any container exists (vm.Runtime.PrepareMachines), names the container's namespace
// sfc.LAB.NODE (createContainer) and makes the node's cgroup (vm.HostSide); Link, once the
// interfaces have the plan's names, splices a tap to each and boots QEMU in that namespace and
// cgroup, the guest's NICs taking the interfaces' MACs and the guest the node's addresses and
// routes (vm.Runtime.BootMachines). A transparent lab's VMs boot in deploy's steering step
// instead, their guests the bumps in the wire, and a lab on emulated hosts boots them once
// package hosts has given the containers their ports (BootOnPorts). So the Docker bridge sees the same endpoint, MAC and address it
// made; the container's own stack keeps the address but gets no frame (tc redirects every one
// to the tap). Node gives the guest agent. Destroy is shared: runtime vm's kills QEMU and
// removes the run directory, runtime netns's kills what is in the lab's cgroups and deletes the
// named namespace, this one removes the containers and networks; a failed deploy's undo
// removes the same.

// DescribeMachine says what a VM node is (runtime.MachineDescriber): vCPUs, memory,
// accelerator with the TCG mark, boot phases; down when its QEMU is gone. Containers are no
// machines ("").
func (r Runtime) DescribeMachine(p *plan.Plan, node string) (desc, down string) {
	return r.Machines.DescribeMachine(p, node)
}

var _ runtime.MachineDescriber = Runtime{}

// BootOnPorts boots the VMs of a lab whose ports are made after Link, all at once
// (vm.Runtime.BootOnPorts): a transparent lab's on their containers' interfaces (named as the
// plan's ports by Link), before deploy attaches the steering programs to the host-side ends of
// those interfaces' veths, each guest's NIC taking the interface's MAC so that steering's
// rewrite to that MAC reaches the guest, which forwards each way of the function as a
// namespace function's bump in the wire does; a lab on emulated hosts on the ports package
// hosts made. A routed lab on the machine itself has its VMs booted by Link.
func (r Runtime) BootOnPorts(ctx context.Context, p *plan.Plan, ns map[string]*netdev.NS) error {
	return r.Machines.BootOnPorts(ctx, p, ns)
}
