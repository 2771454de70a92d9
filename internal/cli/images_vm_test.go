package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/runtime/vm"
	"github.com/sfclab/sfclab/spec"
)

// TestVMImageSets: which guest images `sfclab images build --runtime vm` builds for its
// flags, and the refusals. experiments/vm-source.yaml's VM client runs ab (http's ab: true from
// a VM source), so its Debian root gets apache2-utils beside the base packages, once for the
// experiment's two scenarios; `make images` builds it for TestBenchABVMSource.
func TestVMImageSets(t *testing.T) {
	abRoot := slices.Sorted(slices.Values(append(vm.DebianPackages(nil), "apache2-utils")))
	for _, tc := range []struct {
		name                 string
		lab, image, exp, err string
		want                 []vm.ProgramSet // Image and Packages compared
	}{
		{name: "default", want: []vm.ProgramSet{{Image: spec.VMImageBusybox}}},
		{name: "debian", image: "debian", want: []vm.ProgramSet{{Image: spec.VMImageDebian, Packages: vm.DebianPackages(nil)}}},
		{name: "experiment with ab from a VM source", exp: "../../experiments/vm-source.yaml",
			want: []vm.ProgramSet{{Image: spec.VMImageDebian, Packages: abRoot}}},
		{name: "experiment without VMs", exp: "../../experiments/docker-nat.yaml", err: "no scenario's lab has a VM node"},
		{name: "experiment and lab", exp: "../../experiments/vm-source.yaml", lab: "../../examples/vm-web-nat.yaml", err: "give one of --experiment, --lab, --image"},
		{name: "lab and image", lab: "../../examples/vm-web-nat.yaml", image: "debian", err: "give --lab or --image, not both"},
		{name: "unknown image", image: "alpine", err: "not one of"},
		{name: "experiment missing", exp: "../../experiments/nope.yaml", err: "nope.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sets, err := vmImageSets(tc.lab, tc.image, tc.exp)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v; want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(sets) != len(tc.want) {
				t.Fatalf("sets %+v; want %+v", sets, tc.want)
			}
			for i, w := range tc.want {
				got := sets[i]
				if got.Image != w.Image || !slices.Equal(slices.Sorted(slices.Values(got.Packages)), slices.Sorted(slices.Values(w.Packages))) {
					t.Errorf("set %d: %s %v; want %s %v", i, got.Image, got.Packages, w.Image, w.Packages)
				}
			}
		})
	}
}
