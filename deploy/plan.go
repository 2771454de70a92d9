package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/spec"
)

// SubnetLock serializes, host-wide, the time from reading which subnets a runtime's labs hold
// to creating the new lab's networks, so labs deployed at the same time get disjoint subnets.
const SubnetLock = "/run/sfclab/subnets.lock"

// Plan resolves a lab for deploying it now. On a runtime whose labs share one address space
// (runtime.SubnetHolder: Docker), segment subnets are allocated around those already held, and
// a host-wide lock is held until release is called: call it once Deploy has returned. On other
// runtimes Plan is plan.Build and release does nothing.
func (d *Deployer) Plan(ctx context.Context, lab *spec.Lab) (p *plan.Plan, release func(), err error) {
	release = func() {}
	rt, err := d.Runtime(lab.Runtime)
	if err != nil {
		return nil, release, err
	}
	holder, ok := rt.(runtime.SubnetHolder)
	if !ok {
		p, err = plan.Build(lab)
		return p, release, err
	}
	unlock, err := lockFile(SubnetLock)
	if err != nil {
		return nil, release, err
	}
	taken, err := holder.TakenSubnets(ctx)
	if err != nil {
		unlock()
		return nil, release, fmt.Errorf("plan lab %q: %w", lab.Name, err)
	}
	if p, err = plan.BuildAvoiding(lab, taken); err != nil {
		unlock()
		return nil, release, err
	}
	return p, unlock, nil
}

// lockFile takes an exclusive lock on path (created), waiting for it; the returned function
// releases it.
// Equivalent to: flock PATH
func lockFile(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
