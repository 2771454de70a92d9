package bench

import (
	"strings"
	"testing"
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
}
