package deploy

import (
	"context"
	"errors"

	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
)

// portBooter is a runtime whose nodes may be machines that boot once their ports exist
// (runtime vm): package hosts makes the ports of a transparent lab after the runtime's Link,
// and those of a routed lab on emulated hosts in place of it (linkHosts).
type portBooter interface {
	BootOnPorts(ctx context.Context, p *plan.Plan, ns map[string]*netdev.NS) error
}

// bootOnPorts boots a lab's machines on the ports hosts.Build has made.
func (b *build) bootOnPorts(ctx context.Context) error {
	pb, ok := b.rt.(portBooter)
	if !ok {
		return nil
	}
	return pb.BootOnPorts(ctx, b.p, b.ns)
}

// isMachine reports whether a node is a virtual machine (its own kernel forwards; nothing of
// the data plane goes in its host-side namespace but the splice to its taps).
func isMachine(p *plan.Plan, name string) bool {
	n := p.Node(name)
	return n != nil && n.VM != nil
}

// MachinesDown is why each node of a deployed lab whose machine is gone (a VM whose QEMU
// died) is down, by node name: a bench trial fails with that reason, not only with what its
// probe saw, and stops its probes as soon as it is so. It only looks on the host (no
// command in a guest), cheap enough to poll.
func (d *Deployer) MachinesDown(p *plan.Plan) map[string]string {
	rt, err := d.Runtime(p.Runtime)
	if err != nil {
		return nil // Check's other look-ups say it
	}
	md, ok := rt.(runtime.MachineDescriber)
	if !ok {
		return nil
	}
	down := map[string]string{}
	for _, n := range p.Nodes {
		if _, why := md.DescribeMachine(p, n.Name); why != "" {
			down[n.Name] = why
		}
	}
	return down
}

// KeepMachineLogs writes the logs of a deployed lab's machines (a VM's guest console, QEMU
// log and, while the guest answers, its kernel's messages and counters) into dir as NODE-WHAT,
// before the lab is destroyed with them, and returns how many files it wrote. A runtime
// without machines keeps none.
func (d *Deployer) KeepMachineLogs(ctx context.Context, p *plan.Plan, dir string) (int, error) {
	rt, err := d.Runtime(p.Runtime)
	if err != nil {
		return 0, nil
	}
	ml, ok := rt.(runtime.MachineLogger)
	if !ok {
		return 0, nil
	}
	kept := 0
	var errs []error
	for _, n := range p.Nodes {
		k, err := ml.KeepMachineLogs(ctx, p, n.Name, dir)
		kept += k
		if err != nil {
			errs = append(errs, err)
		}
	}
	return kept, errors.Join(errs...)
}
