package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/steer"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// Destroy removes everything a lab created: its functions' state (teardown while the nodes
// still exist), then whatever each runtime created for it (found by the lab's owner tag, so
// also what a crashed deploy did not record), then its journal. Destroying a lab that is not
// there returns journal.ErrNotDeployed and changes nothing.
func (d *Deployer) Destroy(ctx context.Context, lab string) error {
	if err := CheckRoot(); err != nil {
		return err
	}
	p, planErr := d.Journal.ReadPlan(lab)
	_, dirErr := os.Stat(d.Journal.Dir(lab))
	leftovers := false
	for _, rt := range d.runtimes() {
		if l, _ := rt.Leftovers(ctx, lab); len(l) > 0 {
			leftovers = true
		}
	}
	if pinned, _ := steer.Pinned(); slices.Contains(pinned, lab) {
		leftovers = true
	}
	if planErr != nil && errors.Is(dirErr, os.ErrNotExist) && !leftovers {
		return fmt.Errorf("destroy lab %q: %w", lab, journal.ErrNotDeployed)
	}
	if st, err := d.Journal.ReadState(lab); err == nil {
		st.Status = journal.StatusDestroying
		_ = d.Journal.WriteState(st)
	}
	if p != nil {
		d.teardownFunctions(ctx, p)
	}
	var errs []error
	for _, rt := range d.runtimes() {
		if err := rt.Destroy(ctx, lab); err != nil {
			errs = append(errs, err)
		}
	}
	// Steering programs went with the host namespaces; their pinned maps go now.
	if err := unpinSteering(lab); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("destroy lab %q: %w", lab, errors.Join(errs...))
	}
	return d.Journal.Remove(lab)
}

// teardownFunctions runs every function's teardown while its node exists (custom teardown
// commands, HAProxy); problems are logged, the runtime removes the rest anyway.
func (d *Deployer) teardownFunctions(ctx context.Context, p *plan.Plan) {
	rt, err := d.Runtime(p.Runtime)
	if err != nil {
		d.logf("warning: %v", err)
		return
	}
	for _, n := range p.Nodes {
		if n.Function == nil {
			continue
		}
		k, err := kinds.Get(n.Function.Kind)
		if err != nil {
			d.logf("warning: %v", err)
			continue
		}
		node, err := rt.Node(ctx, p, n.Name)
		if err != nil {
			continue // the node is gone: nothing to tear down in it
		}
		if err := k.Teardown(ctx, d.env(node, n, p.Lab)); err != nil {
			d.logf("warning: teardown of %s: %v", n.Name, err)
		}
	}
}

// labLister is a runtime that can list the labs it holds (docker: by label).
type labLister interface {
	Labs(ctx context.Context) ([]string, error)
}

// DestroyAll destroys every journaled lab, and every lab a runtime finds by its owner tag; it
// returns the names destroyed.
func (d *Deployer) DestroyAll(ctx context.Context) ([]string, error) {
	if err := CheckRoot(); err != nil {
		return nil, err
	}
	labs, err := d.Journal.Labs()
	if err != nil {
		return nil, err
	}
	// Runtimes that can list their labs by owner tag find those whose journal is gone.
	for _, rt := range d.runtimes() {
		if l, ok := rt.(labLister); ok {
			if more, err := l.Labs(ctx); err == nil {
				labs = append(labs, more...)
			}
		}
	}
	// Pinned steering maps name their lab too.
	if pinned, err := steer.Pinned(); err == nil {
		labs = append(labs, pinned...)
	}
	slices.Sort(labs)
	labs = slices.Compact(labs)
	var done []string
	var errs []error
	for _, lab := range labs {
		if err := d.Destroy(ctx, lab); err != nil && !errors.Is(err, journal.ErrNotDeployed) {
			errs = append(errs, err)
			continue
		}
		done = append(done, lab)
	}
	return done, errors.Join(errs...)
}
