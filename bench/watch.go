package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/plan"
)

// machineWatch is how often a trial looks whether its lab's machines (VMs) still run.
const machineWatch = 500 * time.Millisecond

// errMachineDown is the cause a trial's probes are stopped with when a machine of its lab
// went down.
var errMachineDown = errors.New("stop the probes")

// watchMachines stops a trial's probes (stop, with errMachineDown and the node as the cause)
// as soon as a machine of its lab is gone (a VM whose QEMU died): a probe through a dead
// guest would otherwise wait out its own bound (iperf3's: the test's duration and 15 s more)
// before the trial fails with the reason. It returns when ctx ends or once it stopped them;
// a lab without machines is not watched.
func watchMachines(ctx context.Context, d *deploy.Deployer, p *plan.Plan, stop context.CancelCauseFunc) {
	if !slices.ContainsFunc(p.Nodes, func(n *plan.Node) bool { return n.VM != nil }) {
		return
	}
	t := time.NewTicker(machineWatch)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if down := d.MachinesDown(p); len(down) > 0 {
			n := slices.Sorted(maps.Keys(down))[0]
			stop(fmt.Errorf("%w: node %s is down: %s", errMachineDown, n, down[n]))
			return
		}
	}
}
