package studies

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/runtime/vm/accel"
)

// runBKVM is a synthetic run of native, Docker routed and KVM without cache (1k objects at
// concurrency 1, 10,000 requests per trial), its VMs run with the accelerator vmAccel.
func runBKVM(totals map[string][]float64, vmAccel string, env map[string]string) report.Input {
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	runtimes := map[string]string{"native-nocache": "netns", "docker-routed-nocache": "docker", "kvm-nocache": "vm"}
	in := report.Input{Run: results.Run{Experiment: "b", Study: "http-proxy", Started: t0, Ended: t0.Add(time.Hour), Complete: true,
		Env: map[string]string{report.EnvVMAccel: vmAccel}}, Baseline: "native-nocache"}
	for k, v := range env {
		in.Run.Env[k] = v
	}
	for _, sc := range []string{"native-nocache", "docker-routed-nocache", "kvm-nocache"} {
		if totals[sc] == nil {
			continue
		}
		in.Scenarios = append(in.Scenarios, sc)
		for i, v := range totals[sc] {
			trial := i + 1
			in.Trials = append(in.Trials, results.Trial{Experiment: "b", Scenario: sc, Trial: trial, Status: results.TrialOK, Started: t0, Ended: t0})
			add := func(probe, metric, unit string, v float64, labels map[string]string) {
				in.Samples = append(in.Samples, results.Sample{Experiment: "b", Scenario: sc, Trial: trial, Probe: probe, Metric: metric, Unit: unit, Value: v, Time: t0, Labels: labels})
			}
			add("deploy", "deploy_time", "s", 0.3, map[string]string{"runtime": runtimes[sc], "nodes": "3"})
			add("http", "total_time", "s", v, map[string]string{"object": "1k", "concurrency": "1", "via": "proxy", "keepalive": "false"})
			add("http", "requests", "count", 10000, map[string]string{"object": "1k", "concurrency": "1", "via": "proxy", "keepalive": "false"})
		}
	}
	return in
}

// TestClaimBKVM checks study B's KVM claim both ways on KVM figures, and that TCG figures and
// a column left out decide nothing and say why.
func TestClaimBKVM(t *testing.T) {
	if report.EmulatedMark != accel.TCGMark {
		t.Fatalf("report.EmulatedMark %q differs from accel.TCGMark %q", report.EmulatedMark, accel.TCGMark)
	}
	native := []float64{7.0, 7.1, 6.9}
	docker := []float64{7.5, 7.6, 7.4}
	for _, tt := range []struct {
		name    string
		kvm     []float64
		accel   string
		env     map[string]string
		want    string
		says    string
		labeled bool
	}{
		{"the published figures", []float64{9.2, 9.3, 9.1}, "kvm: vmx", nil, report.Holds, "every one of 1 cells", false},
		{"kvm no slower", []float64{7.0, 7.1, 6.9}, "kvm: vmx", nil, report.DoesNotHold, "1 of 1 cells", false},
		{"overlapping", []float64{7.5, 7.0, 8.0}, "kvm: vmx", nil, report.NotShown, "overlap", false},
		{"tcg", []float64{30, 31, 29}, "tcg: PVM", nil, report.NotShown, report.EmulatedMark, true},
		{"not run", nil, "", map[string]string{report.EnvNotRun + "kvm-nocache": "not run: KVM is not usable"}, report.NotShown, "not run: KVM is not usable", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := report.Build(runBKVM(map[string][]float64{"native-nocache": native, "docker-routed-nocache": docker, "kvm-nocache": tt.kvm}, tt.accel, tt.env))
			if err != nil {
				t.Fatal(err)
			}
			res := kvmCostsMore(r)
			if res.Outcome != tt.want || !strings.Contains(res.Evidence, tt.says) {
				t.Errorf("%s (%s), want %s saying %q", res.Outcome, res.Evidence, tt.want, tt.says)
			}
			if got := strings.Contains(r.ScenarioLabel("kvm-nocache"), report.EmulatedMark); got != tt.labeled {
				t.Errorf("label of kvm-nocache %q: marked %v, want %v", r.ScenarioLabel("kvm-nocache"), got, tt.labeled)
			}
		})
	}
}

// TestVMScenariosGate checks the VM scenarios of study B (the KVM column) and study A (vm-*):
// run with KVM, left out under TCG (NotRun says why) unless --allow-tcg, and --runtime vm
// keeps only them and the scenarios they are compared with (study A: the netns ones, with
// netns-baseline as the run's baseline).
func TestVMScenariosGate(t *testing.T) {
	tcg := accel.Decision{Accel: "tcg", Reason: "PVM host"}
	kvm := accel.Decision{Accel: accel.KVM, Reason: "vmx"}
	names := func(e *experiment.Experiment) string {
		var out []string
		for _, s := range e.Scenarios {
			out = append(out, s.Name)
		}
		return strings.Join(out, ",")
	}
	const (
		bAll = "native-nocache,docker-routed-nocache,docker-nat-nocache,native-cache,docker-routed-cache,docker-nat-cache"
		aAll = "baseline,1-vnf,2-vnf,netns-baseline,netns-1-vnf,netns-2-vnf,2-vnf-splice,2-vnf-sfclb,2-vnf-nftlb"
	)
	for _, tt := range []struct {
		study    string
		runtime  string
		allow    bool
		d        accel.Decision
		want     string
		baseline string
		notRun   bool
		refusedS string
	}{
		{"http-proxy", "", false, kvm, bAll + ",kvm-nocache,kvm-cache", "native-nocache", false, ""},
		{"http-proxy", "", false, tcg, bAll, "native-nocache", true, ""},
		{"http-proxy", "vm", true, tcg, "native-nocache,native-cache,kvm-nocache,kvm-cache", "native-nocache", false, ""},
		{"http-proxy", "vm", false, tcg, "", "", true, "--allow-tcg"},
		{"single-host-chain", "", false, kvm, aAll + ",vm-1-vnf,vm-2-vnf", "baseline", false, ""},
		{"single-host-chain", "", false, tcg, aAll, "baseline", true, ""},
		{"single-host-chain", "", true, tcg, aAll + ",vm-1-vnf,vm-2-vnf", "baseline", false, ""},
		{"single-host-chain", "vm", true, tcg, "netns-baseline,netns-1-vnf,netns-2-vnf,vm-1-vnf,vm-2-vnf", "netns-baseline", false, ""},
		{"single-host-chain", "vm", false, kvm, "netns-baseline,netns-1-vnf,netns-2-vnf,vm-1-vnf,vm-2-vnf", "netns-baseline", false, ""},
		{"single-host-chain", "vm", false, tcg, "", "", true, "--allow-tcg"},
	} {
		name := fmt.Sprintf("%s runtime %q allow %v %s", tt.study, tt.runtime, tt.allow, tt.d.Accel)
		st, err := Get(tt.study)
		if err != nil {
			t.Fatal(err)
		}
		e, _, err := st.Load(Quick, tt.runtime)
		if err != nil {
			t.Fatal(err)
		}
		err = st.VMScenarios(e, tt.runtime, tt.allow, tt.d)
		if tt.refusedS != "" {
			if err == nil || !strings.Contains(err.Error(), tt.refusedS) {
				t.Errorf("%s: %v; want refused naming %s", name, err, tt.refusedS)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := names(e); got != tt.want {
			t.Errorf("%s: scenarios %s, want %s", name, got, tt.want)
		}
		if e.Baseline != tt.baseline {
			t.Errorf("%s: baseline %s, want %s", name, e.Baseline, tt.baseline)
		}
		vm := "kvm-nocache"
		if tt.study == "single-host-chain" {
			vm = "vm-1-vnf"
		}
		if got := strings.Contains(e.NotRun[vm], "--allow-tcg"); got != tt.notRun {
			t.Errorf("%s: NotRun %q", name, e.NotRun)
		}
		// A scenario --runtime vm leaves out says so, and what to do, in the report.
		left := "docker-nat-cache"
		if tt.study == "single-host-chain" {
			left = "1-vnf"
		}
		if got := strings.Contains(e.NotRun[left], "leave out --runtime"); got != (tt.runtime == "vm") {
			t.Errorf("%s: NotRun[%s] = %q", name, left, e.NotRun[left])
		}
	}
}

// TestClaimBDockerNotRun: study B's Docker claim, not shown because the run left the Docker
// scenarios out (reproduce http-proxy --runtime vm), says which were left out and why; not
// shown for want of figures alone, it names none.
func TestClaimBDockerNotRun(t *testing.T) {
	why := "not run: --runtime vm runs only the VM scenarios and the scenarios they are compared with; leave out --runtime to run the study's own scenarios"
	for _, tt := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"left out", map[string]string{report.EnvNotRun + "docker-routed-nocache": why, report.EnvNotRun + "docker-nat-nocache": why},
			"no Docker cell with a native baseline in this run; docker-nat-nocache, docker-routed-nocache " + why},
		{"no figures, no reason", nil, "no Docker cell with a native baseline in this run"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := report.Build(runBKVM(map[string][]float64{"native-nocache": {7.0, 7.1}, "kvm-nocache": {30, 31}}, "tcg: PVM", tt.env))
			if err != nil {
				t.Fatal(err)
			}
			res := dockerAddsLittle(r)
			if res.Outcome != report.NotShown || res.Evidence != tt.want {
				t.Errorf("%s: %q; want %s: %q", res.Outcome, res.Evidence, report.NotShown, tt.want)
			}
		})
	}
}
