package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
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
	p, planErr := d.journal().ReadPlan(lab)
	_, dirErr := os.Stat(d.Journal.Dir(lab))
	// Without a journal only the owner tags tell whether the lab is there (asking every
	// runtime: an engine round trip for docker, so not when the journal answers).
	if planErr != nil && errors.Is(dirErr, os.ErrNotExist) && !d.leftovers(ctx, lab) {
		return fmt.Errorf("destroy lab %q: %w", lab, journal.ErrNotDeployed)
	}
	// A deploy that did not finish (killed, crashed) may have left engine requests in flight
	// that land after the runtimes have listed what the lab holds; destroy then looks again.
	unfinished := planErr != nil
	if st, err := d.Journal.ReadState(lab); err == nil {
		unfinished = unfinished || st.Status != journal.StatusReady
		st.Status = journal.StatusDestroying
		_ = d.Journal.WriteState(st)
	} else {
		unfinished = true
	}
	if p != nil {
		d.teardownFunctions(ctx, p)
	}
	// Every runtime removes what carries the lab's tag, at the same time: a netns lab's
	// namespaces go while the docker runtime asks its engine whether it holds anything.
	errs := d.destroyRuntimes(ctx, lab)
	if unfinished && len(errs) == 0 && d.createsLate(p) {
		errs = d.settle(ctx, lab)
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

// destroyRuntimes has every runtime remove what carries the lab's tag, at the same time.
func (d *Deployer) destroyRuntimes(ctx context.Context, lab string) []error {
	rts := d.runtimes()
	names := make([]string, 0, len(rts))
	for name := range rts {
		names = append(names, name)
	}
	slices.Sort(names)
	rtErrs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rtErrs[i] = rts[name].Destroy(ctx, lab)
		}()
	}
	wg.Wait()
	var errs []error
	for _, err := range rtErrs {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// createsLate reports whether objects of a lab whose deploy did not finish may still appear
// after its process is gone: unless the plan is known and its runtime makes everything in
// sfclab's own process (runtime.OwnCreates: netns, vm), whose labs are then destroyed in one
// pass without waiting SettleGrace.
func (d *Deployer) createsLate(p *plan.Plan) bool {
	if p == nil {
		return true
	}
	rt, err := d.Runtime(p.Runtime)
	if err != nil {
		return true
	}
	o, ok := rt.(runtime.OwnCreates)
	return !ok || !o.CreatesOnlyInProcess()
}

// SettleGrace is how long destroy of a lab whose deploy did not finish waits for requests
// the dead deploy left in flight (a container create the engine completes after its client
// is gone) before it looks for the lab's objects again; settleRounds bounds the rounds.
var SettleGrace = time.Second

const settleRounds = 3

// settle looks for the lab's objects again after SettleGrace, and removes what appeared,
// until a look finds nothing (at most settleRounds looks).
func (d *Deployer) settle(ctx context.Context, lab string) []error {
	for range settleRounds {
		select {
		case <-ctx.Done():
			return []error{ctx.Err()}
		case <-time.After(SettleGrace):
		}
		if !d.runtimeLeftovers(ctx, lab) {
			return nil
		}
		if errs := d.destroyRuntimes(ctx, lab); len(errs) > 0 {
			return errs
		}
	}
	if d.runtimeLeftovers(ctx, lab) {
		return []error{fmt.Errorf("objects of lab %q keep appearing after %d removals: is a deploy of it still running?", lab, settleRounds+1)}
	}
	return nil
}

// leftovers reports whether any runtime holds something tagged with the lab, or its steering
// maps are pinned.
func (d *Deployer) leftovers(ctx context.Context, lab string) bool {
	if d.runtimeLeftovers(ctx, lab) {
		return true
	}
	pinned, _ := steer.Pinned()
	return slices.Contains(pinned, lab)
}

// runtimeLeftovers reports whether any runtime holds something tagged with the lab.
func (d *Deployer) runtimeLeftovers(ctx context.Context, lab string) bool {
	for _, rt := range d.runtimes() {
		if l, _ := rt.Leftovers(ctx, lab); len(l) > 0 {
			return true
		}
	}
	return false
}

// teardownFunctions runs every function's teardown while its node exists (custom teardown
// commands, HAProxy); problems are logged, the runtime removes the rest anyway.
func (d *Deployer) teardownFunctions(ctx context.Context, p *plan.Plan) {
	rt, err := d.Runtime(p.Runtime)
	if err != nil {
		d.logf("warning: %v", err)
		return
	}
	down := d.MachinesDown(p)
	for _, n := range p.Nodes {
		if n.Function == nil {
			continue
		}
		if why := down[n.Name]; why != "" {
			// A dead guest's rules and daemons went with it: asking its agent would only fail.
			d.logf("skipped the teardown of %s (%s) in its guest: %s; what the function set up there went with the guest", n.Name, n.Function.Kind, why)
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
	// Runtimes with shared state of their own (the kubernetes runtime's agent) remove it once
	// no lab is left.
	for _, rt := range d.runtimes() {
		if s, ok := rt.(sweeper); ok {
			if err := s.Sweep(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return done, errors.Join(errs...)
}

// sweeper is a runtime that removes what it shares between labs once none is left.
type sweeper interface {
	Sweep(ctx context.Context) error
}
