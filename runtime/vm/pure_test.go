package vm

import (
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime/vm/accel"
)

func TestTSCFromText(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       int
	}{
		{"refined wins", "[0.0] tsc: Detected 2596.130 MHz processor\n[1.2] tsc: Refined TSC clocksource calibration: 2596.001 MHz\n", 2596001},
		{"detected", "[0.000063] tsc: Detected 2596.130 MHz processor\n", 2596130},
		{"cpuinfo", "processor\t: 0\ncpu MHz\t\t: 2100.000\n", 2100000},
		{"nothing", "no clock here", 0},
	} {
		if got := tscFromText(tc.text); got != tc.want {
			t.Errorf("%s: tscFromText = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestParseCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		ok   bool
	}{
		{"1", []int{1}, true}, {"0-2", []int{0, 1, 2}, true}, {"0,3", []int{0, 3}, true},
		{"2-1", nil, false}, {"x", nil, false}, {"-1", nil, false},
	} {
		got, err := parseCPUList(tc.in)
		if (err == nil) != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// The command line carries the host's TSC frequency, the accelerator decided, pinning, and a
// virtio-net device per port with the veth's MAC on its tap (or, for a macvtap, on the
// descriptor QEMU inherits).
func TestMachineArgs(t *testing.T) {
	m := machine{Name: "lab.fwd", VM: plan.VM{CPUs: 2, Memory: 300}, Accel: accel.Decision{Accel: accel.TCG},
		Image: &Image{Dir: "/img"}, TSCkHz: 2596130, Socket: "/s", Console: "/c", PIDFile: "/p", Affinity: "1",
		Ports: []port{{Tap: "vt0", MAC: "02:00:00:00:00:01"}, {Tap: "vt1", MAC: "02:00:00:00:00:02"}, {FD: 3, MAC: "02:00:00:00:00:03"}}}
	a := strings.Join(m.args(), " ")
	for _, want := range []string{"taskset -c 1 qemu-system-x86_64", "microvm,accel=tcg", "-smp 2 -m 300",
		"tsc_early_khz=2596130", "-kernel /img/vmlinux -initrd /img/initramfs.cpio",
		"tap,id=n1,ifname=vt1,script=no,downscript=no -device virtio-net-device,netdev=n1,mac=02:00:00:00:00:02",
		"-netdev tap,id=n2,fd=3 -device virtio-net-device,netdev=n2,mac=02:00:00:00:00:03",
		"socket,id=agent,path=/s,server=on,wait=off", "-name lab.fwd,debug-threads=on"} {
		if !strings.Contains(a, want) {
			t.Errorf("args lack %q:\n%s", want, a)
		}
	}
	m.Accel, m.TSCkHz, m.Affinity = accel.Decision{Accel: accel.KVM}, 0, ""
	a = strings.Join(m.args(), " ")
	if !strings.Contains(a, "accel=kvm") || strings.Contains(a, "tsc_early_khz") || strings.HasPrefix(a, "taskset") {
		t.Errorf("KVM args without TSC or pinning wrong:\n%s", a)
	}
}

func TestLoadOrder(t *testing.T) {
	deps, byName := parseModuleDeps(`kernel/drivers/virtio/virtio_mmio.ko:
kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko
kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko
kernel/net/core/failover.ko:
kernel/net/9p/9pnet-virtio.ko: kernel/net/9p/9pnet.ko
kernel/net/9p/9pnet.ko:
`)
	for _, tc := range []struct {
		name  string
		names []string
		want  []string
		ok    bool
	}{
		{"dependencies first, deepest first", []string{"virtio_net"},
			[]string{"kernel/net/core/failover.ko", "kernel/drivers/net/net_failover.ko", "kernel/drivers/net/virtio_net.ko"}, true},
		{"each once", []string{"virtio_mmio", "net_failover", "virtio_net"},
			[]string{"kernel/drivers/virtio/virtio_mmio.ko", "kernel/net/core/failover.ko", "kernel/drivers/net/net_failover.ko", "kernel/drivers/net/virtio_net.ko"}, true},
		{"dash and underscore are one name", []string{"9pnet_virtio"},
			[]string{"kernel/net/9p/9pnet.ko", "kernel/net/9p/9pnet-virtio.ko"}, true},
		{"unknown module", []string{"nosuch"}, nil, false},
	} {
		got, err := loadOrder(deps, byName, tc.names)
		if (err == nil) != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("%s: loadOrder(%v) = %v, %v; want %v ok=%v", tc.name, tc.names, got, err, tc.want, tc.ok)
		}
	}
}

func TestSameBuildInfo(t *testing.T) {
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	info := func(goVer, rev string, deps ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: goVer, Main: debug.Module{Path: "github.com/sfclab/sfclab"}}
		if rev != "" {
			bi.Settings = []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}
		}
		for _, d := range deps {
			p, v, _ := strings.Cut(d, "@")
			bi.Deps = append(bi.Deps, &debug.Module{Path: p, Version: v})
		}
		return bi
	}
	sfclab := info("go1.23", "", "golang.org/x/sys@v0.30.0", "k8s.io/client-go@v0.31.0")
	for _, tc := range []struct {
		name  string
		guest *debug.BuildInfo
		built time.Duration // after sfclab
		ok    bool
		why   string
	}{
		{"built with it", info("go1.23", "", "golang.org/x/sys@v0.30.0"), time.Second, true, ""},
		{"built before it", info("go1.23", "", "golang.org/x/sys@v0.30.0"), -time.Minute, false, "not built with sfclab"},
		{"built long after", info("go1.23", "", "golang.org/x/sys@v0.30.0"), time.Hour, false, "not built with sfclab"},
		{"another dependency version", info("go1.23", "", "golang.org/x/sys@v0.29.0"), time.Second, false, "golang.org/x/sys v0.29.0"},
		{"another Go", info("go1.22", "", "golang.org/x/sys@v0.30.0"), time.Second, false, "go1.22"},
		{"another revision", info("go1.23", "abc", "golang.org/x/sys@v0.30.0"), time.Second, false, "another revision"},
	} {
		ok, why := sameBuildInfo(sfclab, tc.guest, at, at.Add(tc.built), "sfclab-guest")
		if ok != tc.ok || !strings.Contains(why, tc.why) {
			t.Errorf("%s: sameBuildInfo = %v, %q; want %v, %q", tc.name, ok, why, tc.ok, tc.why)
		}
	}
}
