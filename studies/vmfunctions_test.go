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
// transparent scenario on runtime vm with each function a VM and the endpoints namespaces,
// the routed ones left out with the reason, and under TCG the run refused without
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
		if err := st.VMFunctions(e, inputs); err != nil {
			t.Fatal(err)
		}
		err = st.VMScenarios(e, spec.RuntimeVM, tt.allow, tt.d)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %v, want refused naming %s", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !strings.Contains(e.NotRun["c3-routed-4hosts"], "routed comparison scenarios") || !strings.Contains(e.NotRun["c0-routed"], "routed comparison scenarios") {
			t.Errorf("%s: routed scenarios' reasons %q", tt.name, e.NotRun)
		}
		vms := 0
		for _, s := range e.Scenarios {
			if s.Plan.Runtime != spec.RuntimeVM || s.Plan.Steering != spec.SteeringTransparent {
				t.Errorf("%s: scenario %s on %s, %s", tt.name, s.Name, s.Plan.Runtime, s.Plan.Steering)
			}
			for _, n := range s.Plan.Nodes {
				if (n.Function != nil) != (n.VM != nil) {
					t.Errorf("%s: scenario %s node %s: function %v, VM %v", tt.name, s.Name, n.Name, n.Function != nil, n.VM != nil)
				}
				if n.VM != nil {
					vms++
				}
			}
		}
		if len(e.Scenarios) < 10 || e.Scenario("c6") == nil || e.Scenario("fig6") == nil || e.Scenario(e.Baseline) == nil {
			t.Errorf("%s: %d scenarios, baseline %s", tt.name, len(e.Scenarios), e.Baseline)
		}
		t.Logf("%s: %d scenarios, %d VMs per repetition", tt.name, len(e.Scenarios), vms)
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
