package studies

import (
	"fmt"
	"path"
	"strings"

	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/runtime/vm/accel"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// VMFunctions turns e, loaded by s.Load with no runtime, into the study's data plane with its
// functions as VMs (`reproduce openstack-sfc --vm`: study C's VNFs were OpenStack VMs): every
// scenario's lab, transparent and routed, on four emulated hosts and on one, is decoded again
// from inputs on runtime vm (client and server stay namespaces, every function a guest). A
// scenario whose lab has no function (C0, in each of its four forms) runs no guest and stays on
// namespaces, so its figures are not marked as a guest's (on runtime vm they were labelled
// "emulated CPU (TCG)" though no guest carried them); e.Reduced names them. VMFunctionsAllowed
// gates the run: under TCG only with --allow-tcg, every figure of a guest's scenario marked
// report.EmulatedMark.
func (s *Study) VMFunctions(e *experiment.Experiment, inputs map[string][]byte) error {
	var none []string
	for _, sc := range e.Scenarios {
		name := "labs/" + path.Base(sc.LabPath)
		data, ok := inputs[name]
		if !ok {
			return fmt.Errorf("load %s of scenario %s as VMs: not among the study's inputs", name, sc.Name)
		}
		lab, err := spec.Decode(data, sc.LabPath, kinds.Spec())
		if err != nil {
			return err
		}
		if len(lab.Functions) == 0 {
			none = append(none, sc.Name)
			continue
		}
		if err := experiment.Override(lab, spec.RuntimeVM, ""); err != nil {
			return fmt.Errorf("scenario %s as VMs: %w", sc.Name, err)
		}
		if sc.SingleHost {
			if err := experiment.SingleHost(lab); err != nil {
				return fmt.Errorf("scenario %s as VMs: %w", sc.Name, err)
			}
		}
		p, err := plan.Build(lab)
		if err != nil {
			return fmt.Errorf("scenario %s as VMs: %w", sc.Name, err)
		}
		sc.Plan, sc.Runtime = p, spec.RuntimeVM
	}
	say := "the functions are VMs (--vm)"
	if len(none) > 0 {
		say += "; " + strings.Join(none, ", ") + " have no function and run on namespaces"
	}
	e.Reduced = joinReduced(e.Reduced, say)
	return nil
}

// VMFunctionsAllowed says whether `reproduce openstack-sfc --vm` may boot its guests on a host
// whose accelerator decision is d: with KVM, or under TCG with allowTCG (`--allow-tcg`); both
// parts, data plane and deploy time, are refused alike before anything is deployed.
func VMFunctionsAllowed(allowTCG bool, d accel.Decision) error {
	if d.Emulated() && !allowTCG {
		return fmt.Errorf("reproduce %s --vm: KVM is not usable on this host (%s), and figures of guests under TCG (binary translation) say nothing about the study's KVM guests; --allow-tcg runs them under TCG, every figure of a guest marked %q", OpenStackSFC, d.Reason, accel.TCGMark)
	}
	return nil
}

func joinReduced(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// notOnTCG wraps a claim's check of study C: a run whose functions were VMs under TCG decides
// nothing, as the cost of a function there is the emulated CPU's (report.EmulatedMark), not a
// KVM guest's as in the study.
func notOnTCG(check func(*report.Report) report.ClaimResult) func(*report.Report) report.ClaimResult {
	return func(r *report.Report) report.ClaimResult {
		for _, s := range r.Scenarios {
			if r.Emulated(s) {
				return report.ClaimResult{Outcome: report.NotShown, Evidence: fmt.Sprintf(
					"the functions ran as VMs under TCG (%s): a function's cost there is the emulated CPU's, which says nothing about the study's KVM guests; the environment's kvm line says why this host has no usable KVM", report.EmulatedMark)}
			}
		}
		return check(r)
	}
}

// costClaimsC are study C's claims about what a function costs (throughput per chain and
// placement); its claims about where traffic goes (Fig. 6's sum, the tap) hold or not under
// TCG as under KVM and are decided either way.
var costClaimsC = []string{"throughput falls with each function", "a function with S costs least", "crossing between physical nodes"}

func init() {
	for i := range claimsC {
		for _, c := range costClaimsC {
			if len(claimsC[i].Text) >= len(c) && claimsC[i].Text[:len(c)] == c {
				claimsC[i].Check = notOnTCG(claimsC[i].Check)
			}
		}
	}
}
