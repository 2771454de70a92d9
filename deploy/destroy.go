package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// KillTimeout bounds the wait for a node's processes to die.
const KillTimeout = 5 * time.Second

// Destroy removes everything a lab created: its functions' state, its processes (by cgroup and
// by namespace), its namespaces (found by the lab's name prefix, so also those a crashed deploy
// did not journal in its plan), its cgroups and its journal. Destroying a lab that is not there
// returns ErrNotDeployed and changes nothing.
func (d *Deployer) Destroy(ctx context.Context, lab string) error {
	if err := CheckRoot(); err != nil {
		return err
	}
	_, stErr := d.Journal.ReadState(lab)
	p, planErr := d.Journal.ReadPlan(lab)
	nsNames, err := labNamespaces(lab)
	if err != nil {
		return err
	}
	_, dirErr := os.Stat(d.Journal.Dir(lab))
	if stErr != nil && planErr != nil && len(nsNames) == 0 && errors.Is(dirErr, os.ErrNotExist) {
		return fmt.Errorf("destroy lab %q: %w", lab, ErrNotDeployed)
	}
	if st, err := d.Journal.ReadState(lab); err == nil {
		st.Status = StatusDestroying
		_ = d.Journal.WriteState(st)
	}
	var errs []error
	// Functions first, while their nodes still exist (custom teardown commands, HAProxy).
	if p != nil {
		for _, n := range p.Nodes {
			if n.Function == nil || !contains(nsNames, n.Netns) {
				continue
			}
			k, err := kinds.Get(n.Function.Kind)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			node, err := d.Node(p, n.Name)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			env := (&build{d: d, p: p}).env(n)
			env.Node = node
			if err := k.Teardown(ctx, env); err != nil {
				d.logf("warning: teardown of %s: %v", n.Name, err)
			}
		}
	}
	// Processes: every cgroup of the lab, then anything left inside its namespaces.
	if groups, err := cgroup.List("labs/" + lab); err == nil {
		for _, g := range groups {
			if cg, err := cgroup.Open("labs/" + lab + "/" + g); err == nil {
				if err := cg.Remove(); err != nil {
					errs = append(errs, fmt.Errorf("remove cgroup of %s: %w", g, err))
				}
			}
		}
	}
	if err := removeLabCgroup(lab); err != nil {
		errs = append(errs, err)
	}
	for _, name := range nsNames {
		if err := killInNetns(name); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range nsNames {
		if err := netdev.DeleteNetns(name); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("destroy lab %q: %w", lab, errors.Join(errs...))
	}
	return d.Journal.remove(lab)
}

// DestroyAll destroys every journaled lab; it returns the names destroyed.
func (d *Deployer) DestroyAll(ctx context.Context) ([]string, error) {
	if err := CheckRoot(); err != nil {
		return nil, err
	}
	labs, err := d.Journal.Labs()
	if err != nil {
		return nil, err
	}
	var done []string
	var errs []error
	for _, lab := range labs {
		if err := d.Destroy(ctx, lab); err != nil && !errors.Is(err, ErrNotDeployed) {
			errs = append(errs, err)
			continue
		}
		done = append(done, lab)
	}
	return done, errors.Join(errs...)
}

// labNamespaces lists the namespaces of a lab: its nodes' (sfc.LAB.*) and its fabric (sfc.LAB).
func labNamespaces(lab string) ([]string, error) {
	nodes, err := netdev.ListNetns(plan.NetnsName(lab, ""))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join("/run/netns", plan.FabricName(lab))); err == nil {
		nodes = append(nodes, plan.FabricName(lab))
	}
	return nodes, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// killInNetns kills every process whose network namespace is the named one, so that deleting
// the name really frees the namespace.
func killInNetns(name string) error {
	var want syscall.Stat_t
	if err := syscall.Stat(filepath.Join("/run/netns", name), &want); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("stat namespace %s: %w", name, err)
	}
	deadline := time.Now().Add(KillTimeout)
	for {
		pids := pidsInNetns(want.Ino)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kill processes in namespace %s: still running: %v", name, pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func pidsInNetns(ino uint64) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/proc", e.Name(), "ns/net"), &st) == nil && st.Ino == ino {
			out = append(out, pid)
		}
	}
	return out
}
