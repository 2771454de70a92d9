package bench

import (
	"slices"

	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/plan"
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

// hasVMNode reports whether a scenario's lab has a VM node, whichever runtime it is on (runtime
// vm, or a docker lab whose VMs runtime docker boots).
func hasVMNode(s *experiment.Scenario) bool {
	return slices.ContainsFunc(s.Plan.Nodes, func(n *plan.Node) bool { return n.VM != nil })
}

// runtimeLabel is the runtime a plan's samples are labelled with: its runtime, and "+vm" after
// it when the runtime is not vm but some node is a VM (a docker lab with a VM function:
// "docker+vm"), so that the report marks its figures as it marks runtime vm's under TCG
// (report.Report.Emulated) and does not set them against the containers' baseline as plain
// docker.
func runtimeLabel(p *plan.Plan) string {
	if p.Runtime != spec.RuntimeVM && slices.ContainsFunc(p.Nodes, func(n *plan.Node) bool { return n.VM != nil }) {
		return p.Runtime + "+" + spec.RuntimeVM
	}
	return p.Runtime
}
