package vm

import (
	"slices"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
)

// TestDebianKey: the cache key of a Debian root changes with the package list, the suite,
// the kernel (its modules are in the root) and not with the packages' order or repeats.
func TestDebianKey(t *testing.T) {
	base := DebianKey("bookworm", "6.1.0-56-amd64", []string{"iperf3", "nftables"})
	for _, tc := range []struct {
		name          string
		suite, kernel string
		pkgs          []string
		same          bool
	}{
		{"same list", "bookworm", "6.1.0-56-amd64", []string{"iperf3", "nftables"}, true},
		{"other order, repeated", "bookworm", "6.1.0-56-amd64", []string{"nftables", "iperf3", "nftables"}, true},
		{"a package more", "bookworm", "6.1.0-56-amd64", []string{"iperf3", "nftables", "squid"}, false},
		{"a package less", "bookworm", "6.1.0-56-amd64", []string{"iperf3"}, false},
		{"other suite", "trixie", "6.1.0-56-amd64", []string{"iperf3", "nftables"}, false},
		{"other kernel", "bookworm", "6.1.0-57-amd64", []string{"iperf3", "nftables"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := DebianKey(tc.suite, tc.kernel, tc.pkgs)
			if (k == base) != tc.same {
				t.Errorf("key %s vs %s: same = %v, want %v", k, base, k == base, tc.same)
			}
		})
	}
	// The root holds the modules the image takes: a module more (as the socket diagnostics
	// `ss` needs were) makes another root, or a cached root would go on lacking it.
	saved := helperModules
	helperModules = append(slices.Clone(helperModules), "sctp_diag")
	k := DebianKey("bookworm", "6.1.0-56-amd64", []string{"iperf3", "nftables"})
	helperModules = saved
	if k == base {
		t.Errorf("key %s did not change with a module more", k)
	}
}

// TestDebianPackages: a Debian guest has the base packages and its kind's, each once.
func TestDebianPackages(t *testing.T) {
	for _, tc := range []struct {
		kinds []string
		want  []string
	}{
		{nil, DebianBasePackages},
		{[]string{"forwarder"}, DebianBasePackages},
		{[]string{"firewall"}, []string{"iperf3", "iproute2", "iptables", "iputils-ping", "kmod", "nftables", "procps"}},
		{[]string{"http-proxy", "firewall"}, []string{"iperf3", "iproute2", "iptables", "iputils-ping", "kmod", "nftables", "procps", "squid"}},
	} {
		if got := DebianPackages(tc.kinds); !slices.Equal(got, tc.want) {
			t.Errorf("DebianPackages(%v) = %v, want %v", tc.kinds, got, tc.want)
		}
	}
}

// TestProgramSetsByImage: VM nodes of the same kind get one image per vm: image, and a Debian
// set carries its kind's packages.
func TestProgramSetsByImage(t *testing.T) {
	p := &plan.Plan{Lab: "x", Nodes: []*plan.Node{
		{Name: "a", Function: &plan.Function{Kind: "forwarder"}, VM: &plan.VM{Image: spec.VMImageDebian}},
		{Name: "b", Function: &plan.Function{Kind: "forwarder"}, VM: &plan.VM{Image: spec.VMImageBusybox}},
		{Name: "c", Function: &plan.Function{Kind: "forwarder"}, VM: &plan.VM{Image: spec.VMImageDebian}},
		{Name: "d", Function: &plan.Function{Kind: "forwarder"}, VM: &plan.VM{}},
	}}
	sets, err := ProgramSets(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != 2 {
		t.Fatalf("sets = %+v, want 2 (debian a c, busybox b d)", sets)
	}
	for _, s := range sets {
		switch s.Image {
		case spec.VMImageDebian:
			if !slices.Equal(s.Nodes, []string{"a", "c"}) || !slices.Equal(s.Packages, DebianBasePackages) {
				t.Errorf("debian set = %+v", s)
			}
		case spec.VMImageBusybox:
			if !slices.Equal(s.Nodes, []string{"b", "d"}) || len(s.Packages) != 0 {
				t.Errorf("busybox set = %+v", s)
			}
		default:
			t.Errorf("set of image %q", s.Image)
		}
	}
}

// TestRootFromCmdline: the guest's init finds the root disk on its kernel command line.
func TestRootFromCmdline(t *testing.T) {
	if got := rootFromCmdline("console=ttyS0 sfclab.root=/dev/vda quiet"); got != "/dev/vda" {
		t.Errorf("got %q", got)
	}
	if got := rootFromCmdline("console=ttyS0 quiet"); got != "" {
		t.Errorf("no root: got %q", got)
	}
}

// TestMachineArgsDebian: a Debian image boots its own initramfs with the root disk attached
// read-only and named on the kernel command line; a busybox image has no disk.
func TestMachineArgsDebian(t *testing.T) {
	for _, tc := range []struct {
		name string
		im   *Image
		want []string
		not  []string
	}{
		{"debian", &Image{Dir: "/img", Kind: spec.VMImageDebian, boot: "/img/boot-x.cpio"},
			[]string{"-initrd /img/boot-x.cpio", "sfclab.root=/dev/vda",
				"-drive file=/img/rootfs.ext4,if=none,id=root,format=raw,readonly=on -device virtio-blk-device,drive=root"}, nil},
		{"busybox", &Image{Dir: "/img", Kind: spec.VMImageBusybox},
			[]string{"-initrd /img/initramfs.cpio"}, []string{"sfclab.root", "virtio-blk", "-drive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := machine{Name: "lab.fwd", VM: plan.VM{CPUs: 1, Memory: 512}, Image: tc.im, Socket: "/s", Console: "/c", PIDFile: "/p"}
			a := strings.Join(m.args(), " ")
			for _, w := range tc.want {
				if !strings.Contains(a, w) {
					t.Errorf("args lack %q:\n%s", w, a)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(a, w) {
					t.Errorf("args have %q:\n%s", w, a)
				}
			}
		})
	}
}

// TestProgramSetsProbePrograms: a program an experiment's probe starts in a guest
// (plan.VM.Programs: ab for http's ab: true from a VM source) becomes its package in a Debian
// root (apache2-utils, so another root key than the base one) and a copied program in a busybox
// image; a node without it keeps its set.
func TestProgramSetsProbePrograms(t *testing.T) {
	p := &plan.Plan{Lab: "x", Nodes: []*plan.Node{
		{Name: "deb-ab", VM: &plan.VM{Image: spec.VMImageDebian, Programs: []string{"ab"}}},
		{Name: "deb", VM: &plan.VM{Image: spec.VMImageDebian}},
		{Name: "bb-ab", VM: &plan.VM{Programs: []string{"ab"}}},
		{Name: "bb", VM: &plan.VM{}},
	}}
	sets, err := ProgramSets(p)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]ProgramSet{}
	for _, s := range sets {
		for _, n := range s.Nodes {
			by[n] = s
		}
	}
	if len(sets) != 4 {
		t.Fatalf("sets = %+v, want one per node", sets)
	}
	withAB := slices.Sorted(slices.Values(append(slices.Clone(DebianBasePackages), "apache2-utils")))
	for _, tt := range []struct {
		node           string
		programs, pkgs []string
	}{
		{"deb-ab", nil, withAB},
		{"deb", nil, DebianBasePackages},
		{"bb-ab", []string{"ab"}, nil},
		{"bb", nil, nil},
	} {
		s := by[tt.node]
		if !slices.Equal(s.Programs, tt.programs) || !slices.Equal(s.Packages, tt.pkgs) {
			t.Errorf("%s: programs %v, packages %v; want %v, %v", tt.node, s.Programs, s.Packages, tt.programs, tt.pkgs)
		}
	}
	if DebianKey("bookworm", "6.1", by["deb-ab"].Packages) == DebianKey("bookworm", "6.1", by["deb"].Packages) {
		t.Error("the Debian root with apache2-utils has the base root's key")
	}
}
