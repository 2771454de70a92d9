package accel

import "testing"

func TestDecide(t *testing.T) {
	const intel = "fpu pni vmx sse4_2"
	for _, tc := range []struct {
		name string
		f    Facts
		want string
	}{
		{"kvm host", Facts{DevKVM: true, CPUFlags: intel}, KVM},
		{"amd host", Facts{DevKVM: true, CPUFlags: "fpu pni svm"}, KVM},
		{"no device", Facts{CPUFlags: intel}, TCG},
		{"pvm module", Facts{DevKVM: true, CPUFlags: intel, PVMLoaded: true}, TCG},
		{"pvm config", Facts{DevKVM: true, CPUFlags: intel, KernelPVM: true}, TCG},
		{"this kind of host: device, pvm, no vmx", Facts{DevKVM: true, CPUFlags: "fpu pni hypervisor", PVMLoaded: true}, TCG},
		{"no vmx flag", Facts{DevKVM: true, CPUFlags: "fpu pni hypervisor"}, TCG},
		{"vmx as part of a word only", Facts{DevKVM: true, CPUFlags: "fpu pni vmx_ept"}, TCG},
		{"sse3 hidden", Facts{DevKVM: true, CPUFlags: "fpu vmx"}, TCG},
		{"asked for tcg", Facts{DevKVM: true, CPUFlags: intel, KVMDisabled: true}, TCG},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.f)
			if d.Accel != tc.want || d.Reason == "" {
				t.Errorf("Decide(%+v) = %v, want %s with a reason", tc.f, d, tc.want)
			}
			if d.Emulated() != (tc.want == TCG) {
				t.Errorf("Emulated() = %v for %s", d.Emulated(), d.Accel)
			}
		})
	}
}
