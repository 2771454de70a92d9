package studies

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/runtime/vm/accel"
	"github.com/sfclab/sfclab/spec"
)

// VMScenarios decides which of a loaded study's VM scenarios run (those its experiment file
// puts on runtime vm, as study B's KVM column), given the host's accelerator decision:
//
//   - with KVM they run;
//   - under TCG they run only when allowTCG (`--allow-tcg`), every figure then marked
//     accel.TCGMark in the report and the verdict; without it they are left out and
//     e.NotRun says why, which the report shows where the column would be.
//
// runtime is `--runtime`: "vm" on a study whose scenarios all name their runtime keeps only
// its VM scenarios and the baselines they are compared with (the experiment's and the
// published HTTP baselines), so `reproduce http-proxy --runtime vm` runs the KVM column
// against native only; a study with VMBaselines keeps those instead of the experiment's
// baseline, the first of them becoming the run's baseline (`reproduce single-host-chain
// --runtime vm`: netns-baseline, netns-1-vnf, netns-2-vnf, vm-1-vnf, vm-2-vnf). A run left
// with no scenario beyond baselines is refused.
func (s *Study) VMScenarios(e *experiment.Experiment, runtime string, allowTCG bool, d accel.Decision) error {
	var vms []string
	for _, sc := range e.Scenarios {
		if sc.Runtime == spec.RuntimeVM {
			vms = append(vms, sc.Name)
		}
	}
	if len(vms) == 0 {
		return nil
	}
	keep := func(name string) bool { return true }
	if runtime == spec.RuntimeVM {
		base := map[string]bool{e.Baseline: true}
		if len(s.VMBaselines) > 0 {
			base = map[string]bool{}
			for _, b := range s.VMBaselines {
				if e.Scenario(b) == nil {
					return fmt.Errorf("select VM scenarios of %s: its VM baseline %q is not a scenario of the experiment", s.Name, b)
				}
				base[b] = true
			}
		}
		if s.Published != nil {
			for _, v := range vms {
				if b := s.Published.HTTPBaselines[v]; b != "" {
					base[b] = true
				}
			}
		}
		keep = func(name string) bool { return base[name] || slices.Contains(vms, name) }
	}
	if d.Emulated() && !allowTCG {
		why := fmt.Sprintf("not run: KVM is not usable on this host (%s), and figures of a guest under TCG (binary translation) say nothing about KVM; `--allow-tcg` runs it under TCG, every figure marked %q", d.Reason, accel.TCGMark)
		if e.NotRun == nil {
			e.NotRun = map[string]string{}
		}
		for _, v := range vms {
			e.NotRun[v] = why
		}
		inner := keep
		keep = func(name string) bool { return inner(name) && !slices.Contains(vms, name) }
	}
	var out []*experiment.Scenario
	for _, sc := range e.Scenarios {
		switch {
		case keep(sc.Name):
			out = append(out, sc)
		case runtime == spec.RuntimeVM && !slices.Contains(vms, sc.Name) && e.NotRun[sc.Name] == "":
			// Said in the report, so a claim about it shows why it is not decided.
			if e.NotRun == nil {
				e.NotRun = map[string]string{}
			}
			e.NotRun[sc.Name] = "not run: --runtime vm runs only the VM scenarios and the scenarios they are compared with; leave out --runtime to run the study's own scenarios"
		}
	}
	if runtime == spec.RuntimeVM && len(out) < len(e.Scenarios) && !slices.ContainsFunc(out, func(sc *experiment.Scenario) bool { return slices.Contains(vms, sc.Name) }) {
		return fmt.Errorf("reproduce %s with VMs: its VM scenarios (%s) are %s", s.Name, strings.Join(vms, ", "), e.NotRun[vms[0]])
	}
	e.Scenarios = out
	if runtime == spec.RuntimeVM && len(s.VMBaselines) > 0 {
		e.Baseline = s.VMBaselines[0]
	}
	return nil
}
