package report

import (
	"strings"
	"testing"

	"github.com/sfclab/sfclab/results"
)

// tcgPairInput is study A's --runtime vm selection from samples: a namespace baseline and
// 1-vnf, and vm-1-vnf and vm-2-vnf (functions as VMs, endpoints namespaces); vm-2-vnf's
// throughput is half vm-1-vnf's in every repetition, its TCP RTT twice. accel is the run's
// EnvVMAccel.
func tcgPairInput(accel string) Input {
	in := Input{Run: results.Run{Experiment: "single-host-chain", Complete: true, Env: map[string]string{EnvVMAccel: accel}},
		Scenarios: []string{"netns-baseline", "netns-1-vnf", "vm-1-vnf", "vm-2-vnf"}}
	thr := map[string][]float64{"netns-baseline": {20, 22, 21}, "netns-1-vnf": {14, 15, 13}, "vm-1-vnf": {2.0, 2.4, 2.2}, "vm-2-vnf": {1.0, 1.2, 1.1}}
	rtt := map[string]float64{"netns-baseline": 0.05, "netns-1-vnf": 0.08, "vm-1-vnf": 0.4, "vm-2-vnf": 0.8}
	for _, sc := range in.Scenarios {
		rts := []string{"netns"}
		if strings.HasPrefix(sc, "vm-") {
			rts = append(rts, "vm")
		}
		for trial := 1; trial <= 3; trial++ {
			in.Trials = append(in.Trials, results.Trial{Scenario: sc, Trial: trial, Status: results.TrialOK})
			for _, rt := range rts {
				in.Samples = append(in.Samples, results.Sample{Scenario: sc, Trial: trial, Probe: "deploy", Metric: MetricDeployTime, Value: 2, Unit: "s",
					Labels: map[string]string{"nodes": "3", "runtime": rt}})
			}
			in.Samples = append(in.Samples, results.Sample{Scenario: sc, Trial: trial, Probe: "iperf3", Metric: "throughput", Value: thr[sc][trial-1] * 1e9, Unit: "bit/s",
				Labels: map[string]string{"protocol": "tcp", "streams": "1", "side": "receiver"}})
			for k := 1; k <= 5; k++ {
				in.Samples = append(in.Samples, results.Sample{Scenario: sc, Trial: trial, Probe: "tcprtt", Metric: "rtt", Unit: "ms",
					Value: rtt[sc] * (1 + 0.01*float64(trial) + 0.002*float64(k))})
			}
		}
	}
	return in
}

// TestTCGPairRatio: under TCG, vm-2-vnf is set against vm-1-vnf (both emulated) in the verdict
// and the ratio table, marked, and neither against the namespace baseline; with KVM the VM
// scenarios are compared with netns-baseline as usual and no TCG pair is made.
func TestTCGPairRatio(t *testing.T) {
	r, err := Build(tcgPairInput("tcg: no KVM"))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.TCGBaselineFor("vm-2-vnf"); got != "vm-1-vnf" {
		t.Errorf("TCGBaselineFor(vm-2-vnf) = %q, want vm-1-vnf", got)
	}
	for _, s := range []string{"vm-1-vnf", "netns-1-vnf", "netns-baseline"} {
		if got := r.TCGBaselineFor(s); got != "" {
			t.Errorf("TCGBaselineFor(%s) = %q, want none", s, got)
		}
	}
	q, ok := r.TCGThroughputRatio("vm-2-vnf")
	if !ok || q.Baseline != "vm-1-vnf" || fixed(q.Value, 2) != "0.50" || q.Pairs != 3 {
		t.Errorf("vm-2-vnf over vm-1-vnf: %+v (ok %v), want 0.50 over 3 pairs", q, ok)
	}
	if _, ok := r.ThroughputRatio("vm-2-vnf"); ok {
		t.Errorf("vm-2-vnf has a throughput ratio against the namespace baseline")
	}
	var md strings.Builder
	if err := r.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	verdict := section2(md.String(), "## Verdict")
	want := "- vm-2-vnf against vm-1-vnf, both VMs under TCG (" + EmulatedMark
	if !strings.Contains(verdict, want) || !strings.Contains(verdict, "throughput 0.50× vm-1-vnf") || !strings.Contains(verdict, "TCP request/response RTT 2.0") {
		t.Errorf("verdict lacks the TCG pair %q with throughput 0.50× and TCP RTT 2.0×:\n%s", want, verdict)
	}
	row := "| vm-2-vnf (" + EmulatedMark + ") | throughput | vm-1-vnf (" + EmulatedMark + ") | 0.50× |"
	if !strings.Contains(md.String(), row) {
		t.Errorf("ratio table lacks %q", row)
	}
	if strings.Contains(md.String(), "| vm-2-vnf ("+EmulatedMark+") | throughput | netns-baseline |") {
		t.Errorf("ratio table sets vm-2-vnf against netns-baseline")
	}

	kvm, err := Build(tcgPairInput("kvm: usable"))
	if err != nil {
		t.Fatal(err)
	}
	if got := kvm.TCGBaselineFor("vm-2-vnf"); got != "" {
		t.Errorf("with KVM: TCGBaselineFor(vm-2-vnf) = %q, want none", got)
	}
	if q, ok := kvm.ThroughputRatio("vm-2-vnf"); !ok || q.Baseline != "netns-baseline" {
		t.Errorf("with KVM: vm-2-vnf ratio %+v (ok %v), want against netns-baseline", q, ok)
	}
}
