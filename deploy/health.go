package deploy

import (
	"context"
	"errors"
	"fmt"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/vnf"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// Check asks every function of a deployed lab whose kind can tell whether it still runs; the
// error names each function that is down and why, and each machine (a VM) that is gone. A
// bench trial calls it so that a probe failing because a function died says so.
func (d *Deployer) Check(ctx context.Context, p *plan.Plan) error {
	down := d.MachinesDown(p)
	var errs []error
	for _, n := range p.Nodes {
		if why, ok := down[n.Name]; ok {
			errs = append(errs, fmt.Errorf("node %s is down: %s", n.Name, why))
			continue
		}
		if n.Function == nil {
			continue
		}
		if err := d.checkNode(ctx, p, n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (d *Deployer) checkNode(ctx context.Context, p *plan.Plan, n *plan.Node) error {
	k, err := kinds.Get(n.Function.Kind)
	if err != nil {
		return err
	}
	c, ok := k.(vnf.Checker)
	if !ok {
		return nil
	}
	node, err := d.Node(p, n.Name)
	if err != nil {
		return err
	}
	return c.Check(ctx, d.env(node, n, p.Lab))
}

// readFunction fills what a function itself reports: whether it is down, and a balancer's
// per-backend counters.
func readFunction(ctx context.Context, d *Deployer, p *plan.Plan, n *plan.Node, ni *NodeInfo) {
	if n.Function == nil {
		return
	}
	if err := d.checkNode(ctx, p, n); err != nil {
		ni.Down = err.Error()
		return
	}
	k, err := kinds.Get(n.Function.Kind)
	if err != nil {
		return
	}
	if s, ok := k.(vnf.BalancerStatser); ok {
		node, err := d.Node(p, n.Name)
		if err != nil {
			return
		}
		st, err := s.BalancerStats(ctx, d.env(node, n, p.Lab))
		if err != nil {
			ni.Down = err.Error()
			return
		}
		ni.Balancer = st
	}
}
