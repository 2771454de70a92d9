package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/runtime/vm"
	"github.com/sfclab/sfclab/runtime/vm/accel"
)

// TestReproduceOpenStackSFCVMRefusals: study C's VM flags that cannot run are refused before
// anything is deployed, each saying what to do. `--runtime vm --part deploy-time` ran the
// deploy-time lab on namespaces before (a user asking for VMs got namespace figures).
func TestReproduceOpenStackSFCVMRefusals(t *testing.T) {
	privateState(t)
	type refusal struct {
		args []string
		want string
	}
	cases := []refusal{
		{[]string{"--runtime", "vm", "--part", "deploy-time"}, "--runtime vm is not how it runs VMs; run `sfclab reproduce openstack-sfc --vm --part deploy-time`"},
		{[]string{"--runtime", "vm"}, "run `sfclab reproduce openstack-sfc --vm`"},
		{[]string{"--vm", "--runtime", "docker"}, "leave out --runtime docker"},
		{[]string{"--vm", "--part", "both"}, `--part "both": use data-plane or deploy-time`},
		{[]string{"--vm", "--standard"}, "it has no --standard scale"},
		{[]string{"--vm", "--part", "deploy-time", "--duration", "1s"}, "the deploy-time experiment has no iperf3 duration"},
		{[]string{"--vm", "--scenario", "c1"}, "--scenario is for openstack-sfc's data plane only (without --vm)"},
	}
	if d := accel.Host(); d.Emulated() {
		// Without --allow-tcg neither part boots a guest under TCG.
		cases = append(cases,
			refusal{[]string{"--vm", "--part", "deploy-time"}, "KVM is not usable on this host"},
			refusal{[]string{"--vm", "--part", "data-plane"}, "KVM is not usable on this host"},
			refusal{[]string{"--vm"}, "--allow-tcg runs them under TCG"})
	}
	for _, tc := range cases {
		args := append([]string{"reproduce", "openstack-sfc", "--quick", "--out", t.TempDir()}, tc.args...)
		code, _, errOut := run(t, args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("sfclab %s: exit %d, %q; want it refused with %q", strings.Join(args, " "), code, errOut, tc.want)
		}
	}
}

// TestReproduceOpenStackSFCVMDeployTime runs study C's deploy-time experiment with its
// functions as VMs (`--vm --part deploy-time --quick`, one repetition): the three forwarders
// boot as guests, chains of 1 to 3 of them are created over the API, and the first packet
// crosses them (its TTL lowered by each guest's kernel). The report says the functions were
// guests, on which accelerator, with the TCG mark under TCG, and gives the lab's deploy apart
// from the figures; no QEMU of the lab is left.
func TestReproduceOpenStackSFCVMDeployTime(t *testing.T) {
	requireVMLab(t)
	out := t.TempDir()
	code, stdout, errOut := run(t, "reproduce", "openstack-sfc", "--vm", "--allow-tcg", "--part", "deploy-time", "--quick", "--repetitions", "1", "--out", out)
	if pids := vm.QEMUPids("study-c"); len(pids) > 0 {
		t.Errorf("QEMU of lab study-c left: %v", pids)
	}
	if code != 0 {
		t.Fatalf("reproduce: exit %d\n%s%s", code, stdout, errOut)
	}
	rep, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"| 3 | 1 |", "first packet after the PC answer", "lab study-c (3 forwarders)",
		"Lab on runtime vm: client and server network namespaces of this host, the functions f1, f2, f3 QEMU guests (1 vCPU, 512 MiB each)",
		"The functions are VMs, as study C's VNFs were", "the guests' boot included, took"}
	if accel.Host().Emulated() {
		want = append(want, "**"+accel.TCGMark+"**", "first packet after the PC answer ("+accel.TCGMark+")")
	}
	for _, w := range want {
		if !strings.Contains(string(rep), w) {
			t.Errorf("report lacks %q:\n%s", w, rep)
		}
	}
	if strings.Contains(string(rep), "every node a network namespace") {
		t.Errorf("report of a VM run says its nodes were namespaces:\n%s", rep)
	}
	samples, _ := os.ReadFile(filepath.Join(out, "samples.csv"))
	// One repetition per length 1..3: FC, PP, PPG, PC, total, first_packet, first_packet_pc.
	if n := strings.Count(string(samples), "\n"); n != 1+3*7 {
		t.Errorf("samples.csv has %d lines, want %d:\n%s", n, 1+3*7, samples)
	}
}
