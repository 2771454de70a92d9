package bench

import (
	"strings"
	"testing"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime/vm/accel"
)

func TestKVMStatusSaysWhy(t *testing.T) {
	s := KVMStatus()
	t.Logf("kvm: %s", s)
	if !strings.HasPrefix(s, "usable: ") && !strings.HasPrefix(s, "not usable: ") {
		t.Fatalf("KVMStatus() = %q: must start with usable/not usable", s)
	}
	if !strings.Contains(s, "vmx") && !strings.Contains(s, "svm") {
		t.Errorf("KVMStatus() = %q does not report the CPU flags", s)
	}
	if accel.Host().Emulated() != strings.HasPrefix(s, "not usable") {
		t.Errorf("KVMStatus() = %q disagrees with the vm runtime's decision %v", s, accel.Host())
	}
}

// A PVM /dev/kvm that opens and creates VMs is not usable for a standard guest: the line says
// so whatever the ioctl probe found (the old line called such a host "usable").
func TestKVMStatusPVMNotUsable(t *testing.T) {
	pvm := accel.Facts{DevKVM: true, CPUFlags: "fpu pni hypervisor", PVMLoaded: true}
	s := kvmStatus(pvm, "/dev/kvm API 12 opens and creates a VM and a vCPU")
	if !strings.HasPrefix(s, "not usable: ") || !strings.Contains(s, "PVM") || !strings.Contains(s, accel.TCGMark) {
		t.Errorf("PVM host: %q", s)
	}
	kvm := accel.Facts{DevKVM: true, CPUFlags: "fpu pni vmx"}
	if s := kvmStatus(kvm, "ok"); !strings.HasPrefix(s, "usable: ") || !strings.Contains(s, "vmx flag present") {
		t.Errorf("KVM host: %q", s)
	}
}

// TestRuntimeLabel: a docker lab with a VM node is labelled docker+vm (the report marks its
// figures under TCG as runtime vm's); other plans keep their runtime.
func TestRuntimeLabel(t *testing.T) {
	vmNode := &plan.Node{Name: "fwd", VM: &plan.VM{CPUs: 1, Memory: 512}}
	ct := &plan.Node{Name: "client"}
	for _, tc := range []struct {
		runtime string
		nodes   []*plan.Node
		want    string
	}{
		{"docker", []*plan.Node{ct, vmNode}, "docker+vm"},
		{"docker", []*plan.Node{ct}, "docker"},
		{"vm", []*plan.Node{ct, vmNode}, "vm"},
		{"netns", []*plan.Node{ct}, "netns"},
	} {
		if got := runtimeLabel(&plan.Plan{Runtime: tc.runtime, Nodes: tc.nodes}); got != tc.want {
			t.Errorf("runtime %s, %d nodes: label %q, want %q", tc.runtime, len(tc.nodes), got, tc.want)
		}
	}
}
