package vm

import (
	"slices"
	"testing"
)

// TestKernelSelect: a shared kernel goes when its vmlinux has no link but the store's (no
// image, no build holds it) and no process names it; a directory without a vmlinux (a
// build's MkdirAll before its link) goes too; a kernel an image links, or a process names,
// stays.
func TestKernelSelect(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ks     []storedKernel
		remove []string
	}{
		{"no image links it", []storedKernel{{ID: "k1", Links: 1}}, []string{"k1"}},
		{"one image links it", []storedKernel{{ID: "k1", Links: 2}}, nil},
		{"many images link it", []storedKernel{{ID: "k1", Links: 9}}, nil},
		{"named by a process only", []storedKernel{{ID: "k1", Links: 1, VMs: []string{"lab.fwd"}}}, nil},
		{"empty directory", []storedKernel{{ID: "k1"}}, []string{"k1"}},
		{"of two, the unused one", []storedKernel{{ID: "old", Links: 1}, {ID: "new", Links: 3}}, []string{"old"}},
		{"none", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, k := range kernelSelect(tc.ks) {
				got = append(got, k.ID)
			}
			if !slices.Equal(got, tc.remove) {
				t.Errorf("removed %v, want %v", got, tc.remove)
			}
		})
	}
}
