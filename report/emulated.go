package report

import "strings"

// Environment keys of a run with VM scenarios (written by bench when the run starts).
const (
	// EnvVMAccel is the accelerator the run's VMs ran with and why ("tcg: ..." or "kvm: ...").
	EnvVMAccel = "vm_accel"
	// EnvNotRun prefixes a scenario the study has but this run left out; the value says why.
	EnvNotRun = "not_run:"
	// EnvKeptRuntime prefixes a scenario that kept the runtime it names (the value) although
	// the run asked for another with --runtime, which applies only to scenarios naming none.
	EnvKeptRuntime = "kept_runtime:"
)

// EmulatedMark labels every figure measured on a VM under TCG; it is the vm runtime's
// accel.TCGMark (a test keeps them equal).
const EmulatedMark = "emulated CPU (TCG): not comparable"

// Emulated reports whether scenario s ran VMs under TCG: its nodes are on the vm runtime and
// the run recorded that its VMs had no KVM. Every figure of such a scenario is marked
// EmulatedMark.
func (r *Report) Emulated(s string) bool {
	return strings.Contains(r.Runtimes[s], "vm") && strings.HasPrefix(r.Run.Env[EnvVMAccel], "tcg")
}

// NotRun is why the study's scenario s is not in this run ("" when it is, or nothing says).
func (r *Report) NotRun(s string) string { return r.Run.Env[EnvNotRun+s] }

// Incomparable reports whether a figure of scenario s may not be set against one of scenario b:
// exactly one of them ran VMs under TCG (an emulated CPU against a real one). Two TCG scenarios
// may be compared with each other.
func (r *Report) Incomparable(s, b string) bool { return r.Emulated(s) != r.Emulated(b) }

// ScenarioLabel is s as tables name it: with EmulatedMark when it ran under TCG.
func (r *Report) ScenarioLabel(s string) string {
	if r.Emulated(s) {
		return s + " (" + EmulatedMark + ")"
	}
	return s
}
