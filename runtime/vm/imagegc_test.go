package vm

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime/vm/accel"
	"github.com/sfclab/sfclab/spec"
)

// TestPruneSelect: which cached images a new one removes. Busybox images go when they hold
// the same programs and were built from something else (an older agent or kernel), Debian
// roots only when of the same packages and an older kernel; an image a running VM boots, or
// a deploy used within recentUse, stays and says why; images of other programs, packages or
// kinds are not touched.
func TestPruneSelect(t *testing.T) {
	now := time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC)
	week := now.Add(-7 * 24 * time.Hour)
	base := []string{"iperf3", "ip", "nft", "ping", "sysctl", "tc"}
	squid := []string{"iperf3", "ip", "nft", "ping", "squid", "sysctl", "tc"}
	pkgs := []string{"iperf3", "iproute2", "kmod"}
	busybox := func(key, kernel string, progs []string) *Image {
		return &Image{Key: key, Kind: spec.VMImageBusybox, Kernel: kernel, Programs: progs}
	}
	debian := func(key, kernel string, p []string) *Image {
		return &Image{Key: key, Kind: spec.VMImageDebian, Kernel: kernel, Suite: "bookworm", Packages: p}
	}
	idle := ImageUse{LastUsed: week}
	for _, tc := range []struct {
		name   string
		fresh  *Image
		ims    []*Image
		use    map[string]ImageUse
		remove []string
		kept   map[string]string // key -> start of why
	}{
		{
			name:   "an older agent's image of the same programs goes",
			fresh:  busybox("new", "6.1.0-57-amd64", base),
			ims:    []*Image{busybox("new", "6.1.0-57-amd64", base), busybox("old", "6.1.0-57-amd64", base)},
			use:    map[string]ImageUse{"old": idle},
			remove: []string{"old"},
		},
		{
			name:   "an older kernel's image goes, several at once",
			fresh:  busybox("new", "6.1.0-57-amd64", base),
			ims:    []*Image{busybox("k56", "6.1.0-56-amd64", base), busybox("k55", "6.1.0-55-amd64", base)},
			use:    map[string]ImageUse{"k56": idle, "k55": idle},
			remove: []string{"k56", "k55"},
		},
		{
			name:  "an image built before Image.Kind is a busybox image",
			fresh: busybox("new", "6.1.0-57-amd64", base),
			ims:   []*Image{{Key: "legacy", Kernel: "6.1.0-56-amd64", Programs: base}},
			use:   map[string]ImageUse{"legacy": idle}, remove: []string{"legacy"},
		},
		{
			name:  "other programs stay",
			fresh: busybox("new", "6.1.0-57-amd64", base),
			ims:   []*Image{busybox("sq", "6.1.0-56-amd64", squid)},
			use:   map[string]ImageUse{"sq": idle},
		},
		{
			name:  "in use by a running VM stays",
			fresh: busybox("new", "6.1.0-57-amd64", base),
			ims:   []*Image{busybox("old", "6.1.0-57-amd64", base), busybox("older", "6.1.0-57-amd64", base)},
			use: map[string]ImageUse{"old": {VMs: []string{"lab1.fwd", "lab1.fw2"}, LastUsed: week},
				"older": idle},
			remove: []string{"older"},
			kept:   map[string]string{"old": "in use by lab1.fwd, lab1.fw2"},
		},
		{
			name:  "used by a deploy within recentUse stays",
			fresh: busybox("new", "6.1.0-57-amd64", base),
			ims:   []*Image{busybox("old", "6.1.0-57-amd64", base)},
			use:   map[string]ImageUse{"old": {LastUsed: now.Add(-10 * time.Minute)}},
			kept:  map[string]string{"old": "used 10m0s ago"},
		},
		{
			name:   "used just over recentUse ago goes",
			fresh:  busybox("new", "6.1.0-57-amd64", base),
			ims:    []*Image{busybox("old", "6.1.0-57-amd64", base)},
			use:    map[string]ImageUse{"old": {LastUsed: now.Add(-recentUse - time.Second)}},
			remove: []string{"old"},
		},
		{
			name:  "a Debian root does not supersede a busybox image, nor the reverse",
			fresh: debian("deb-new", "6.1.0-57-amd64", pkgs),
			ims:   []*Image{busybox("bb", "6.1.0-56-amd64", nil), busybox("bb2", "6.1.0-56-amd64", base)},
			use:   map[string]ImageUse{"bb": idle, "bb2": idle},
		},
		{
			name:   "a Debian root of an older kernel and the same packages goes",
			fresh:  debian("deb-new", "6.1.0-57-amd64", pkgs),
			ims:    []*Image{debian("deb-old", "6.1.0-56-amd64", pkgs), debian("deb-other", "6.1.0-56-amd64", append(slices.Clone(pkgs), "squid"))},
			use:    map[string]ImageUse{"deb-old": idle, "deb-other": idle},
			remove: []string{"deb-old"},
		},
		{
			name:  "a Debian root of the same kernel (another recipe: another sfclab's) stays",
			fresh: debian("deb-new", "6.1.0-57-amd64", pkgs),
			ims:   []*Image{debian("deb-recipe", "6.1.0-57-amd64", pkgs), debian("deb-newer", "6.1.0-58-amd64", pkgs)},
			use:   map[string]ImageUse{"deb-recipe": idle, "deb-newer": idle},
		},
		{
			name:  "a Debian root in use stays",
			fresh: debian("deb-new", "6.1.0-57-amd64", pkgs),
			ims:   []*Image{debian("deb-old", "6.1.0-56-amd64", pkgs)},
			use:   map[string]ImageUse{"deb-old": {VMs: []string{"lab2.web"}, LastUsed: week}},
			kept:  map[string]string{"deb-old": "in use by lab2.web"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remove, kept := pruneSelect(tc.fresh, tc.ims, tc.use, now)
			var got []string
			for _, im := range remove {
				got = append(got, im.Key)
			}
			if !slices.Equal(got, tc.remove) {
				t.Errorf("removed %v, want %v", got, tc.remove)
			}
			if !slices.Equal(slices.Sorted(maps.Keys(kept)), slices.Sorted(maps.Keys(tc.kept))) {
				t.Errorf("kept %v, want %v", kept, tc.kept)
			}
			for k, why := range tc.kept {
				if !strings.HasPrefix(kept[k], why) {
					t.Errorf("kept %s because %q, want %q", k, kept[k], why)
				}
			}
		})
	}
}

// TestImageRefs: the images a process's command line boots, from QEMU's command line as
// sfclab starts it (machine.args: -kernel, -initrd, a Debian root's -drive file=) and as
// other tools could (relative paths, another spelling of the root), not from files beside
// the images or in other roots.
func TestImageRefs(t *testing.T) {
	root := "/var/lib/sfclab/vm"
	bb := &Image{Dir: root + "/0123456789abcdef", Key: "0123456789abcdef", Kind: spec.VMImageBusybox}
	deb := &Image{Dir: root + "/deb-652424afecc6", Key: "deb-652424afecc6", Kind: spec.VMImageDebian, boot: root + "/deb-652424afecc6/boot-3aea692ff52a.cpio"}
	qemu := func(im *Image) []string {
		m := machine{Name: "imagegc-t.fwd", VM: plan.VM{CPUs: 1, Memory: 256}, Accel: accel.Decision{Accel: accel.TCG},
			Image: im, Socket: "/run/sfclab-vm/imagegc-t/fwd/agent.sock", Console: "/run/sfclab-vm/imagegc-t/fwd/console.log",
			PIDFile: "/run/sfclab-vm/imagegc-t/fwd/qemu.pid", Affinity: "1"}
		return m.args()[3:] // as exec'd by taskset
	}
	for _, tc := range []struct {
		name string
		argv []string
		cwd  string
		keys []string
		vm   string
	}{
		{"busybox guest", qemu(bb), "/", []string{bb.Key}, "imagegc-t.fwd"},
		{"Debian guest", qemu(deb), "/", []string{deb.Key}, "imagegc-t.fwd"},
		{"relative paths", []string{"qemu-system-x86_64", "-name", "guest=x.y", "-kernel", "0123456789abcdef/vmlinux"}, root, []string{bb.Key}, "x.y"},
		{"root spelled otherwise", []string{"cat", "/var/lib/sfclab/./vm/0123456789abcdef//initramfs.cpio"}, "/", []string{bb.Key}, ""},
		{"the root itself, an image directory, a hidden build", []string{"ls", root, root + "/0123456789abcdef", root + "/.build-123/vmlinux"}, "/", nil, ""},
		{"another root", []string{"qemu-system-x86_64", "-kernel", "/tmp/vm/0123456789abcdef/vmlinux"}, "/", nil, ""},
		{"a shared kernel", []string{"qemu-system-x86_64", "-name", "x.y", "-kernel", root + "/kernels/6.1.0-57-amd64-0123456789ab/vmlinux", "-initrd", bb.Initramfs()}, "/", []string{"kernels/6.1.0-57-amd64-0123456789ab", bb.Key}, "x.y"},
		{"the kernel store itself", []string{"ls", root + "/kernels"}, "/", nil, ""},
		{"a prefix of the root", []string{"qemu-system-x86_64", "-kernel", root + "2/0123456789abcdef/vmlinux"}, "/", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, vm := imageRefs(tc.argv, tc.cwd, []string{root})
			if !slices.Equal(keys, tc.keys) || vm != tc.vm {
				t.Errorf("imageRefs = %v, %q; want %v, %q", keys, vm, tc.keys, tc.vm)
			}
		})
	}
}

// TestPruneLine: prune's one line names what went with the space freed and what stayed
// with why; nothing superseded, no line.
func TestPruneLine(t *testing.T) {
	fresh := &Image{Key: "new", Kind: spec.VMImageBusybox}
	if l := pruneLine(fresh, nil, 0, map[string]string{}, nil, 0); l != "" {
		t.Errorf("nothing superseded: line %q, want none", l)
	}
	l := pruneLine(fresh, []string{"a", "b"}, 73<<20, map[string]string{"c": "in use by l.n"}, nil, 0)
	want := "guest image new: removed 2 superseded busybox guest image(s) (73 MB): a b; kept superseded c (in use by l.n)"
	if l != want || strings.Contains(l, "\n") {
		t.Errorf("line %q, want %q", l, want)
	}
	l = pruneLine(fresh, []string{"a"}, 36<<20, map[string]string{}, []string{"6.1.0-56-amd64-0123456789ab"}, 31<<20)
	want = "guest image new: removed 1 superseded busybox guest image(s) (36 MB): a; removed 1 shared kernel(s) no image uses (31 MB): 6.1.0-56-amd64-0123456789ab"
	if l != want {
		t.Errorf("line %q, want %q", l, want)
	}
}
