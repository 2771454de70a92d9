package bench

import (
	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/runtime/vm/accel"
	"github.com/sfclab/sfclab/spec"
)

// addVMEnv records what the report needs to mark VM figures: the accelerator the VMs run with
// (report.EnvVMAccel) when some scenario has VM nodes, and the scenarios left out and why
// (report.EnvNotRun), and the scenarios that kept their own runtime against --runtime
// (report.EnvKeptRuntime).
func addVMEnv(env map[string]string, e *experiment.Experiment) {
	for _, s := range e.Scenarios {
		if s.Plan != nil && hasVMNode(s) {
			env[report.EnvVMAccel] = accel.Host().String()
			break
		}
	}
	for s, why := range e.NotRun {
		env[report.EnvNotRun+s] = why
	}
	for s, rt := range e.KeptRuntime {
		env[report.EnvKeptRuntime+s] = rt
	}
}

func hasVMNode(s *experiment.Scenario) bool {
	if s.Plan.Runtime == spec.RuntimeVM {
		for _, n := range s.Plan.Nodes {
			if n.VM != nil {
				return true
			}
		}
	}
	return false
}
