package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

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

// KeepMachineLogs copies the log files of a deployed lab's machines (a VM's guest console and
// QEMU log) into dir as NODE-FILE, before the lab is destroyed with them, and returns how many
// it copied. A runtime without machines keeps none; a file that is gone is skipped.
func (d *Deployer) KeepMachineLogs(p *plan.Plan, dir string) (int, error) {
	rt, err := d.Runtime(p.Runtime)
	if err != nil {
		return 0, nil
	}
	ml, ok := rt.(runtime.MachineLogger)
	if !ok {
		return 0, nil
	}
	kept := 0
	for _, n := range p.Nodes {
		for _, f := range ml.MachineLogs(p, n.Name) {
			data, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return kept, fmt.Errorf("keep machine logs: %w", err)
			}
			if err := os.WriteFile(filepath.Join(dir, n.Name+"-"+filepath.Base(f)), data, 0o644); err != nil {
				return kept, fmt.Errorf("keep machine logs: %w", err)
			}
			kept++
		}
	}
	return kept, nil
}
