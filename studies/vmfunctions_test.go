package studies

import (
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/runtime/vm/accel"
	"github.com/sfclab/sfclab/spec"
)

// TestOpenStackSFCVMFunctions checks `reproduce openstack-sfc --vm`'s selection: every
// scenario of the data plane, transparent and routed, on four emulated hosts and on one, on
// runtime vm with each function a VM and the endpoints namespaces, none left out, except the
// four C0 scenarios, which have no function and stay on namespaces (no guest carries their
// figures, so none may be marked a guest's); and under TCG the run refused without
// --allow-tcg, naming it.
func TestOpenStackSFCVMFunctions(t *testing.T) {
	st, err := Get(OpenStackSFC)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		allow bool
		d     accel.Decision
		err   string
	}{
		{"kvm", false, accel.Decision{Accel: accel.KVM, Reason: "vmx"}, ""},
		{"tcg allowed", true, accel.Decision{Accel: "tcg", Reason: "PVM host"}, ""},
		{"tcg refused", false, accel.Decision{Accel: "tcg", Reason: "PVM host"}, "--allow-tcg"},
	} {
		e, inputs, err := st.Load(Quick, "")
		if err != nil {
			t.Fatal(err)
		}
		all, _, err := st.Load(Quick, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := st.VMFunctions(e, inputs); err != nil {
			t.Fatal(err)
		}
		err = VMFunctionsAllowed(tt.allow, tt.d)
		if err == nil {
			err = st.VMScenarios(e, "", tt.allow, tt.d)
		}
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %v, want refused naming %s", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if len(e.NotRun) != 0 {
			t.Errorf("%s: scenarios left out of the VM run: %q", tt.name, e.NotRun)
		}
		if len(e.Scenarios) != len(all.Scenarios) {
			t.Errorf("%s: %d scenarios with VM functions, the study has %d", tt.name, len(e.Scenarios), len(all.Scenarios))
		}
		vms, steering := 0, map[string]int{}
		var onNetns []string
		for _, s := range e.Scenarios {
			if s.Plan.Runtime != spec.RuntimeVM {
				onNetns = append(onNetns, s.Name)
			}
			steering[s.Plan.Steering]++
			for _, n := range s.Plan.Nodes {
				if (n.Function != nil) != (n.VM != nil) {
					t.Errorf("%s: scenario %s node %s: function %v, VM %v", tt.name, s.Name, n.Name, n.Function != nil, n.VM != nil)
				}
				if n.VM != nil {
					vms++
				}
			}
		}
		// the routed comparison: on the four hosts as the transparent chains (a function
		// on its host's emulated node), and on one host with no emulated host
		for _, name := range []string{"c3-routed-4hosts", "other-routed-4hosts", "c6-routed"} {
			sc := e.Scenario(name)
			if sc == nil || sc.Plan.Steering == spec.SteeringTransparent {
				t.Errorf("%s: routed scenario %s missing or not routed", tt.name, name)
				continue
			}
			for _, n := range sc.Plan.Nodes {
				if n.Function != nil && (n.VM == nil || (strings.HasSuffix(name, "-4hosts") != (n.Host != ""))) {
					t.Errorf("%s: scenario %s function %s: VM %v on host %q", tt.name, name, n.Name, n.VM != nil, n.Host)
				}
			}
		}
		if got, want := strings.Join(onNetns, " "), "c0 c0-1host c0-routed c0-routed-4hosts"; got != want {
			t.Errorf("%s: scenarios not on runtime vm: %q, want %q (those without a function)", tt.name, got, want)
		}
		if !strings.Contains(e.Reduced, "c0, c0-1host, c0-routed, c0-routed-4hosts have no function and run on namespaces") {
			t.Errorf("%s: reduction %q does not name the scenarios left on namespaces", tt.name, e.Reduced)
		}
		if e.Scenario("c6") == nil || e.Scenario("fig6") == nil || e.Scenario(e.Baseline) == nil || steering[spec.SteeringTransparent] == 0 || steering[spec.SteeringTransparent] == len(e.Scenarios) {
			t.Errorf("%s: %d scenarios (%v), baseline %s", tt.name, len(e.Scenarios), steering, e.Baseline)
		}
		t.Logf("%s: %d scenarios (%v), %d VMs per repetition", tt.name, len(e.Scenarios), steering, vms)
	}
}

// TestClaimsCOnTCG checks that study C's cost claims decide nothing when its functions ran as
// VMs under TCG, and say why, while its traffic claims are still checked.
func TestClaimsCOnTCG(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	in := report.Input{Run: results.Run{Experiment: "c", Study: OpenStackSFC, Started: t0, Ended: t0.Add(time.Hour), Complete: true,
		Env: map[string]string{report.EnvVMAccel: "tcg: PVM host"}}, Baseline: "c0", Scenarios: []string{"c0", "c1"}}
	for _, sc := range in.Scenarios {
		for trial := 1; trial <= 2; trial++ {
			in.Trials = append(in.Trials, results.Trial{Experiment: "c", Scenario: sc, Trial: trial, Status: results.TrialOK, Started: t0, Ended: t0})
			in.Samples = append(in.Samples,
				results.Sample{Experiment: "c", Scenario: sc, Trial: trial, Probe: "deploy", Metric: "deploy_time", Unit: "s", Value: 5, Time: t0, Labels: map[string]string{"runtime": "vm"}},
				results.Sample{Experiment: "c", Scenario: sc, Trial: trial, Probe: "iperf3", Metric: "throughput", Unit: "bit/s", Value: 2e9, Time: t0, Labels: map[string]string{"side": "receiver"}})
		}
	}
	rep, err := report.Build(in)
	if err != nil {
		t.Fatal(err)
	}
	cost := 0
	for _, c := range claimsC {
		res := c.Check(rep)
		if strings.Contains(res.Evidence, report.EmulatedMark) {
			cost++
			if res.Outcome != report.NotShown {
				t.Errorf("claim %q under TCG: %s", c.Text, res.Outcome)
			}
		}
	}
	if cost != len(costClaimsC) {
		t.Errorf("%d claims not shown for TCG, want %d (%v)", cost, len(costClaimsC), costClaimsC)
	}
}
