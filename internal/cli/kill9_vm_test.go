package cli

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/runtime/vm"
)

// After kill -9 of a transparent deploy with a VM function on two emulated hosts (the guest
// up, its taps spliced to its ports, steering attached and its maps pinned, another
// function's setup running), destroy --all leaves no QEMU, namespace (with the taps, tc
// filters and VXLAN devices in them), pinned map, VM run directory (socket, console) or
// cgroup.
func TestKill9TransparentVMThenDestroyAll(t *testing.T) {
	requireVMLab(t)
	const lab = "t-kvmtr9"
	file := writeLabFile(t, `name: t-kvmtr9
steering: transparent
hosts: [h1, h2]
endpoints: {client: {kind: client}, server: {kind: server, host: h2}}
functions:
  a: {kind: forwarder, host: h2, vm: {}}
  slow: {kind: custom, params: {setup: ["sleep 47"]}}
port_pairs:
  pa: {ingress: a.eth0, egress: a.eth0}
  ps: {ingress: slow.eth0, egress: slow.eth0}
port_pair_groups: {ga: {port_pairs: [pa]}, gs: {port_pairs: [ps]}}
flow_classifiers: {all: {logical_source_port: client.eth0}}
port_chains: {c: {flow_classifiers: [all], port_pair_groups: [ga, gs]}}
`)
	killDeploy(t, file, 150*time.Second, 20*time.Millisecond, func() bool { return sleepRunning("47") }, "deploy never reached the slow setup") // the guest image is built first, then a TCG boot
	pins := "/sys/fs/bpf/sfclab/" + lab
	if _, err := os.Stat(pins); err != nil {
		t.Fatalf("test setup: the killed deploy left no pinned maps: %v", err)
	}
	if len(vm.QEMUPids(lab)) == 0 {
		t.Fatal("test setup: the killed deploy left no QEMU running")
	}
	if out, _ := exec.Command("ip", "netns", "exec", "sfc."+lab+".a", "ip", "-o", "link", "show", "type", "tun").Output(); !strings.Contains(string(out), "vt0") {
		t.Fatalf("test setup: no tap in the VM node's namespace:\n%s", out)
	}
	code, out, errOut := run(t, "destroy", "--all")
	if code != 0 || !strings.Contains(out, "destroyed lab "+lab) {
		t.Fatalf("destroy --all: exit %d\n%s%s", code, out, errOut)
	}
	if pids := vm.QEMUPids(lab); len(pids) > 0 {
		t.Errorf("QEMU left: %v", pids)
	}
	if ns, _ := netdev.ListNetns("sfc." + lab); len(ns) > 0 {
		t.Errorf("namespaces (with the taps, tc filters and VXLAN devices) left: %v", ns)
	}
	if _, err := os.Stat(pins); err == nil {
		t.Errorf("pinned maps left in %s", pins)
	}
	if _, err := os.Stat(filepath.Join(vm.RunRoot, lab)); !os.IsNotExist(err) {
		t.Errorf("VM run directory (socket, console) left: %v", err)
	}
	if _, err := cgroup.Open("labs/" + lab); err == nil {
		t.Error("cgroup left")
	}
	if sleepRunning("47") {
		t.Error("the setup's process survived destroy --all")
	}
}

// After kill -9 of a deploy whose VM's ports are macvtaps (QEMU started on the character
// devices sfclab made), destroy --all leaves no QEMU, namespace, device node (the lab's
// directory under vm.DevRoot) or macvtap (a node made from each one's number no longer opens).
func TestKill9MacvtapVMThenDestroyAll(t *testing.T) {
	requireVMLab(t)
	const lab = "t-kvmmv9"
	file := writeLabFile(t, `name: t-kvmmv9
endpoints: {client: {}, server: {}}
functions:
  a: {kind: forwarder, vm: {backend: macvtap}}
chains: [{from: client, to: server, hops: [a]}]
`)
	killDeploy(t, file, 60*time.Second, 10*time.Millisecond, func() bool { return len(vm.QEMUPids(lab)) > 0 }, "deploy never started QEMU") // the guest image is built first
	devDir := filepath.Join(vm.DevRoot, lab)
	nodes, err := filepath.Glob(filepath.Join(devDir, "a.*"))
	if err != nil || len(nodes) != 2 {
		t.Fatalf("test setup: the killed deploy left %v (%v) in %s, want the two macvtaps' device nodes", nodes, err, devDir)
	}
	probeDir := t.TempDir()
	var probes []string
	for _, n := range nodes {
		var st syscall.Stat_t
		if err := syscall.Stat(n, &st); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(probeDir, filepath.Base(n))
		if err := syscall.Mknod(p, syscall.S_IFCHR|0o600, int(st.Rdev)); err != nil {
			t.Fatal(err)
		}
		probes = append(probes, p)
	}
	code, out, errOut := run(t, "destroy", "--all")
	if code != 0 || !strings.Contains(out, "destroyed lab "+lab) {
		t.Fatalf("destroy --all: exit %d\n%s%s", code, out, errOut)
	}
	if pids := vm.QEMUPids(lab); len(pids) > 0 {
		t.Errorf("QEMU left: %v", pids)
	}
	if ns, _ := netdev.ListNetns("sfc." + lab); len(ns) > 0 {
		t.Errorf("namespaces (with the macvtaps) left: %v", ns)
	}
	if _, err := os.Stat(devDir); !os.IsNotExist(err) {
		t.Errorf("macvtap device directory %s left: %v", devDir, err)
	}
	// The macvtaps go with their namespace, deleted by the kernel shortly after.
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range probes {
		for {
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				if !errors.Is(err, syscall.ENXIO) && !errors.Is(err, syscall.ENODEV) {
					t.Errorf("open %s after destroy --all: %v, want ENXIO (no such macvtap)", p, err)
				}
				break
			}
			f.Close()
			if time.Now().After(deadline) {
				t.Fatalf("macvtap %s still exists 10 s after destroy --all", filepath.Base(p))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
