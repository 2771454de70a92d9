package vm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/netns"
	"github.com/sfclab/sfclab/runtime/vm"
	"github.com/sfclab/sfclab/spec"
)

// Memory or vCPUs beyond the host are refused before anything is created, at the vm:
// settings' place in the lab file.
func TestLimitsRefused(t *testing.T) {
	labtest.RequireRoot(t) // Preflight looks up programs as netns does
	if err := vm.CheckQEMU(); err != nil {
		t.Skipf("SKIPPED LOUDLY: %v", err)
	}
	for _, tc := range []struct{ name, vmLine, want string }{
		{"cpus", "vm: {cpus: 4096}", "test.yaml:8:9: node fwd: vm cpus 4096: this host has"},
		{"memory", "vm: {memory: 16777216}", "test.yaml:8:9: node fwd: vm memory 16777216 MiB: this host has"},
		{"pin", "vm: {pin: \"4095\"}", "test.yaml:8:9: node fwd: vm pin \"4095\": this host has cores"},
		// A pin that is no list of cores is refused when the file is read (spec's TestVMBad).
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := labtest.Plan(t, `name: t-vmlim
endpoints:
  client: {kind: client}
  server: {kind: server}
functions:
  fwd:
    kind: forwarder
    `+tc.vmLine+`
chains:
  - {from: client, to: server, hops: [fwd]}
`)
			err := vm.Runtime{}.Preflight(context.Background(), p)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Preflight = %v, want an error starting %q", err, tc.want)
			}
		})
	}
	// Two VMs, each within the host's memory, together beyond it: refused naming both and
	// their places.
	half := hostMiB(t)/2 + 1
	two := labtest.Plan(t, fmt.Sprintf(`name: t-vmlim
endpoints:
  client: {kind: client, vm: {memory: %d}}
  server: {kind: server}
functions:
  fwd:
    kind: forwarder
    vm: {memory: %d}
chains:
  - {from: client, to: server, hops: [fwd]}
`, half, half))
	want := fmt.Sprintf("lab t-vmlim: its VMs ask for %d MiB of memory together (client %d MiB at test.yaml:3:", 2*half, half)
	if err := (vm.Runtime{}).Preflight(context.Background(), two); err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), fmt.Sprintf("fwd %d MiB at test.yaml:8:9", half)) {
		t.Errorf("Preflight of two VMs beyond the host together = %v, want an error starting %q naming fwd at test.yaml:8:9", err, want)
	}
	ok := labtest.Plan(t, strings.Replace(routedLab, "t-vmfwd", "t-vmlim", 1))
	if err := (vm.Runtime{}).Preflight(context.Background(), ok); err != nil {
		t.Errorf("a VM within the host's means was refused: %v", err)
	}
}

// hostMiB is the host's memory in MiB (MemTotal), as Preflight reads it.
func hostMiB(t *testing.T) int {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		t.Fatal(err)
	}
	return int(uint64(si.Totalram) * uint64(si.Unit) >> 20)
}

// A guest that does not come up makes the deploy fail with the guest's last console lines and
// unwind: no namespace, QEMU, run directory or cgroup left.
func TestBootFailureUnwinds(t *testing.T) {
	requireVM(t)
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	for _, tc := range []struct {
		name string
		rt   vm.Runtime
		want []string
	}{
		// A missing init: the kernel panics, QEMU exits (panic=-1, -no-reboot).
		{"kernel panics", vm.Runtime{Cmdline: "rdinit=/nonexistent"}, []string{"QEMU exited", "last lines of console.log", "Kernel panic"}},
		// A deadline shorter than any boot.
		{"deadline", vm.Runtime{BootTimeout: 300 * time.Millisecond}, []string{"did not answer within the boot deadline"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := labtest.Plan(t, strings.Replace(routedLab, "t-vmfwd", "t-vmbad", 1))
			// The runtime shares the journal's node directory into the guest: it must know the
			// deployer's root, as runtimes.All tells it.
			rt := tc.rt
			rt.StateRoot = t.TempDir()
			d := &deploy.Deployer{Journal: journal.Journal{Root: rt.StateRoot}, Log: t.Logf,
				Runtimes: map[string]runtime.Runtime{spec.RuntimeVM: rt, spec.RuntimeNetns: netns.Runtime{}}}
			t.Cleanup(func() { _ = d.Destroy(context.Background(), p.Lab) })
			_, err := d.Deploy(context.Background(), p, "test")
			if err == nil {
				t.Fatal("deploy of a guest that cannot boot succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("deploy error lacks %q:\n%v", w, err)
				}
			}
			assertNoVMLeft(t, p)
		})
	}
}

// assertNoVMLeft fails when anything of the lab's VMs is left on the host.
func assertNoVMLeft(t *testing.T, p *plan.Plan) {
	t.Helper()
	if ns, _ := netdev.ListNetns(plan.NetnsName(p.Lab, "")); len(ns) > 0 {
		t.Errorf("namespaces left: %v", ns)
	}
	if _, err := os.Stat(filepath.Join(vm.RunRoot, p.Lab)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("run directory %s left (%v)", filepath.Join(vm.RunRoot, p.Lab), err)
	}
	if _, err := os.Stat(filepath.Join(vm.DevRoot, p.Lab)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("macvtap device directory %s left (%v)", filepath.Join(vm.DevRoot, p.Lab), err)
	}
	if pids := vm.QEMUPids(p.Lab); len(pids) > 0 {
		t.Errorf("QEMU processes left: %v", pids)
	}
	if _, err := cgroup.Open("labs/" + p.Lab); err == nil {
		t.Errorf("cgroup of lab %s left", p.Lab)
	}
}
