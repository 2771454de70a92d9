package bench

import (
	"strings"
	"testing"

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
