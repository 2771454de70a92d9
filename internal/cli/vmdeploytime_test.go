package cli

import (
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime/vm/accel"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// TestVMDeployTimeLabels: with --vm the deploy-time lab's functions are guests and its
// endpoints namespaces, and what the report says of them names the guests, their machine and
// the accelerator, with the TCG mark under TCG and without it under KVM; the note keeps the
// lab's deploy (the guests' boot) out of the figures. Before, `--runtime vm --part
// deploy-time` ran this lab on namespaces.
func TestVMDeployTimeLabels(t *testing.T) {
	data, err := fs.ReadFile(sfclab.Files, openstackSFCLab)
	if err != nil {
		t.Fatal(err)
	}
	lab, err := spec.Decode(data, openstackSFCLab, kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	keepFunctions(lab, quickFunctions)
	if err := experiment.Override(lab, spec.RuntimeVM, ""); err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(lab)
	if err != nil {
		t.Fatal(err)
	}
	if p.Runtime != spec.RuntimeVM {
		t.Fatalf("plan runtime %q, want vm", p.Runtime)
	}
	for _, n := range p.Nodes {
		if isFunction := strings.HasPrefix(n.Name, "f"); isFunction != (n.VM != nil) {
			t.Errorf("node %s: VM %v, want a VM exactly for the functions", n.Name, n.VM)
		}
	}
	tcg := accel.Decision{Accel: accel.TCG, Reason: "PVM"}
	kvm := accel.Decision{Accel: accel.KVM, Reason: "checks passed"}
	timing := deploy.Timing{Total: 7 * time.Second}
	for _, tc := range []struct {
		d            accel.Decision
		want, reject []string
	}{
		{tcg, []string{"runtime vm: client and server network namespaces", "the functions f1, f2, f3 QEMU guests (1 vCPU, 512 MiB each) under TCG", accel.TCGMark, "(PVM)"}, nil},
		{kvm, []string{"the functions f1, f2, f3 QEMU guests (1 vCPU, 512 MiB each) under KVM"}, []string{accel.TCGMark, "TCG"}},
	} {
		where := vmDeployTimeRuntime(p, tc.d)
		note := vmDeployTimeNote(tc.d, timing)
		for _, w := range tc.want {
			if !strings.Contains(where, w) {
				t.Errorf("%s: runtime %q lacks %q", tc.d.Accel, where, w)
			}
		}
		for _, r := range tc.reject {
			if strings.Contains(where+note, r) {
				t.Errorf("%s: %q / %q says %q", tc.d.Accel, where, note, r)
			}
		}
		if tc.d.Emulated() != strings.Contains(note, "**"+accel.TCGMark+"**") {
			t.Errorf("%s: note %q: TCG mark present %v, want %v", tc.d.Accel, note, !tc.d.Emulated(), tc.d.Emulated())
		}
		if !strings.Contains(note, "took 7s (not one of the figures below)") {
			t.Errorf("%s: note %q does not give the lab's deploy apart from the figures", tc.d.Accel, note)
		}
	}
}
