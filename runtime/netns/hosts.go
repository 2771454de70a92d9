package netns

import (
	"fmt"

	"github.com/sfclab/sfclab/runtime"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/plan"
)

// checkHosts refuses, before anything is created, hosts whose cores this machine cannot give:
// no cpuset controller, or a core that does not exist. The error starts with the host's place
// in the lab file.
func checkHosts(p *plan.Plan) error {
	return runtime.CheckHostCPUs(p, func(cpus string) error {
		if err := cgroup.CPUsAvailable(); err != nil {
			return err
		}
		return cgroup.CheckCPUs(cpus)
	})
}

// confine puts a node's cgroup on its host's cores, if the host has any.
func confine(p *plan.Plan, node string, cg *cgroup.Group) error {
	h := p.HostOf(node)
	if h == nil || h.CPUs == "" {
		return nil
	}
	if err := cg.SetCPUs(h.CPUs); err != nil {
		return fmt.Errorf("node %s on host %s: %w", node, h.Name, err)
	}
	return nil
}
