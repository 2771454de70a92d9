package studies

import (
	"context"
	"github.com/sfclab/sfclab/internal/benchtest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/bench"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/internal/testroot"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/report"
	nsrt "github.com/sfclab/sfclab/runtime/netns"
	"github.com/sfclab/sfclab/runtime/vm"
	"github.com/sfclab/sfclab/runtime/vm/accel"
)

// TestMain lets this test binary be the init and agent of the guests TestSingleHostChainVM
// boots (a guest image is built from the running executable).
func TestMain(m *testing.M) {
	vm.GuestMain()
	os.Exit(m.Run())
}

// TestSingleHostChainVM runs `reproduce single-host-chain --quick --runtime vm --allow-tcg`
// for real, shortened to one repetition of 1 s iperf3 transfers: the netns scenarios and the
// same chains with their functions in VMs (vm-1-vnf: the iptables NAT firewall; vm-2-vnf: it
// and HAProxy). Every scenario must carry traffic; where KVM is not usable the VM scenarios'
// figures must carry the TCG mark and no ratio to a namespace scenario, and the verdict must
// say why; with KVM they are compared with netns-baseline.
func TestSingleHostChainVM(t *testing.T) {
	testroot.Require(t, "study A with VM functions deploys namespaces and boots QEMU guests")
	if err := vm.CheckQEMU(); err != nil {
		t.Skipf("SKIPPED LOUDLY: %v", err)
	}
	if _, _, err := vm.HostKernel(); err != nil {
		t.Skipf("SKIPPED LOUDLY: %v", err)
	}
	for _, tool := range []string{"iperf3", "haproxy", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED LOUDLY: %s is not installed", tool)
		}
	}
	t.Setenv(vm.ImageRootEnv, t.TempDir())
	st, err := Get("single-host-chain")
	if err != nil {
		t.Fatal(err)
	}
	e, inputs, err := st.Load(Quick, "vm")
	if err != nil {
		t.Fatal(err)
	}
	d := accel.Host()
	if err := st.VMScenarios(e, "vm", true, d); err != nil {
		t.Fatal(err)
	}
	e.Repetitions, e.Warmup.Duration = 1, 0
	e.Probes.Iperf3.Duration.Duration = time.Second
	e.Probes.Ping.Count = 10
	e.Probes.TCPRTT.Connects, e.Probes.TCPRTT.Requests = 10, 50

	dir := t.TempDir()
	r := &bench.Runner{Deployer: &deploy.Deployer{Journal: journal.Journal{Root: t.TempDir()}}, Version: "test", Log: t.Logf}
	out, err := r.Run(context.Background(), e, dir, bench.Files(inputs))
	for _, s := range e.Scenarios {
		left, _ := (nsrt.Runtime{}).Leftovers(context.Background(), s.Plan.Lab)
		vmLeft, _ := (vm.Runtime{}).Leftovers(context.Background(), s.Plan.Lab)
		if left = append(left, vmLeft...); len(left) > 0 {
			t.Errorf("lab %s left %v", s.Plan.Lab, left)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if out.Failed > 0 {
		benchtest.LogKeptLogs(t, dir)
		t.Errorf("%d trials failed", out.Failed)
	}
	var names []string
	for _, s := range e.Scenarios {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "netns-baseline,netns-1-vnf,netns-2-vnf,vm-1-vnf,vm-2-vnf" {
		t.Fatalf("scenarios %s", got)
	}
	rep, err := bench.WriteReport(dir, st.Published, names, e.Baseline)
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range names {
		thr := meanThroughput(rep, s)
		t.Logf("%s: %.2f Gbit/s (%s)", s, thr, rep.Runtimes[s])
		if !(thr > 0) {
			t.Errorf("%s carried no throughput", s)
		}
	}
	for _, s := range []string{"vm-1-vnf", "vm-2-vnf"} {
		if rep.Runtimes[s] != "vm" {
			t.Errorf("%s ran on %q, want vm", s, rep.Runtimes[s])
		}
		if _, ok := rep.LatencyRatio(report.MetricPingRTT, s); !ok && !d.Emulated() {
			t.Errorf("%s: no ping ratio with KVM", s)
		}
		q, ok := rep.ThroughputRatio(s)
		if !d.Emulated() {
			if !ok || q.Baseline != "netns-baseline" {
				t.Errorf("%s under KVM: ratio %+v, %v; want one to netns-baseline", s, q, ok)
			}
			continue
		}
		if ok {
			t.Errorf("%s under TCG has a throughput ratio to %s: %s", s, q.Baseline, q.Text())
		}
		if !rep.Emulated(s) {
			t.Errorf("%s ran under TCG but the report does not mark it", s)
		}
		if row := "| " + s + " (" + report.EmulatedMark + ") |"; !strings.Contains(string(md), row) {
			t.Errorf("report has no row %q", row)
		}
	}
	if d.Emulated() {
		for _, want := range []string{"not comparable (TCG)", "vm-1-vnf, vm-2-vnf ran VMs under TCG"} {
			if !strings.Contains(string(md), want) {
				t.Errorf("report lacks %q", want)
			}
		}
	}
	if q, ok := rep.ThroughputRatio("netns-1-vnf"); !ok || q.Baseline != "netns-baseline" {
		t.Errorf("netns-1-vnf ratio %+v, %v; want one to netns-baseline", q, ok)
	}
}
