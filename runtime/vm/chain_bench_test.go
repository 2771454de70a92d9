package vm_test

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/runtime/vm"
	"github.com/sfclab/sfclab/runtime/vm/accel"
)

// vmChainLab is a routed chain of n VM forwarders between two namespace endpoints.
func vmChainLab(name string, n int) string {
	var fs, hops []string
	for i := 1; i <= n; i++ {
		fs = append(fs, fmt.Sprintf("  f%d: {kind: forwarder, vm: {cpus: 1}}\n", i))
		hops = append(hops, fmt.Sprintf("f%d", i))
	}
	return "name: " + name + "\nendpoints:\n  client: {kind: client}\n  server: {kind: server}\nfunctions:\n" +
		strings.Join(fs, "") + "chains:\n  - {name: c, from: client, to: server, hops: [" + strings.Join(hops, ", ") + "]}\n"
}

// qemuCPU is the user+system CPU time, in seconds, of the lab's running QEMU processes.
func qemuCPU(lab string) float64 {
	var sum float64
	for _, pid := range vm.QEMUPids(lab) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The fields after the command's closing parenthesis; utime and stime are the 14th
		// and 15th of the line.
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(f) > 12 {
			u, _ := strconv.ParseFloat(f[11], 64)
			s, _ := strconv.ParseFloat(f[12], 64)
			sum += (u + s) / clockTicks
		}
	}
	return sum
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times (100 on Linux).
const clockTicks = 100

// BenchmarkVMChainDeploy deploys and destroys a 1-VM and a 4-VM forwarder chain in the same
// run, alternately: the 4 guests boot at once (the vm runtime's Link), so the 4-VM deploy
// should take well under 4 times the 1-VM one (the target: within 2 times). Reports
// each lab's deploy and destroy time and the ratio, and logs the slowest guest's boot phases.
// Under TCG the guests' CPU is emulated (accel.TCGMark): the boots are CPU-bound and the 4
// guests share the host's cores.
//
// It also reports the QEMU processes' CPU time (vm1-qemu-cpu-s, vm4-qemu-cpu-s): a 4-VM deploy
// cannot take less than that CPU divided by the host's cores.
//
// Run: flock /tmp/sfclab-suite.lock go test -run '^$' -bench VMChainDeploy -benchtime 2x ./runtime/vm/
func BenchmarkVMChainDeploy(b *testing.B) {
	labtest.RequireRoot(b)
	if err := vm.CheckQEMU(); err != nil {
		b.Skipf("SKIPPED LOUDLY: %v", err)
	}
	b.Setenv(vm.ImageRootEnv, b.TempDir())
	useGuestAgent(b)
	labtest.Exclusive(b)
	// The guest image, built once, outside the timing (a lab of another name).
	warm := labtest.Deploy(b, vmChainLab("t-vmcwarm", 1))
	if err := warm.D.Destroy(context.Background(), warm.P.Lab); err != nil {
		b.Fatal(err)
	}
	var dep, des [2]time.Duration
	var bootCPU [2]float64
	sizes := [2]int{1, 4}
	for range b.N {
		for i, n := range sizes {
			t0 := time.Now()
			l := labtest.Deploy(b, vmChainLab(fmt.Sprintf("t-vmc%d", n), n))
			dep[i] += time.Since(t0)
			var slowest vm.BootRecord
			for j := 1; j <= n; j++ {
				rec, err := vm.ReadBoot(l.P.Lab, fmt.Sprintf("f%d", j))
				if err != nil {
					b.Fatal(err)
				}
				if rec.Configured > slowest.Configured {
					slowest = *rec
				}
			}
			cpu := qemuCPU(l.P.Lab)
			bootCPU[i] += cpu
			b.Logf("%d-VM chain: slowest guest %s; QEMU CPU through the deploy %.2f s (all VMs)", n, slowest.Phases(), cpu)
			t1 := time.Now()
			if err := l.D.Destroy(context.Background(), l.P.Lab); err != nil {
				b.Fatal(err)
			}
			des[i] += time.Since(t1)
		}
	}
	k := float64(b.N)
	b.ReportMetric(dep[0].Seconds()/k, "vm1-deploy-s")
	b.ReportMetric(des[0].Seconds()/k, "vm1-destroy-s")
	b.ReportMetric(dep[1].Seconds()/k, "vm4-deploy-s")
	b.ReportMetric(des[1].Seconds()/k, "vm4-destroy-s")
	b.ReportMetric(dep[1].Seconds()/dep[0].Seconds(), "vm4/vm1")
	// The CPU the guests' boots took (QEMU's user+system time, all threads, until the deploy
	// returned): under TCG a boot is CPU-bound, so 4 boots on this host's cores take at least
	// their CPU divided by the cores.
	b.ReportMetric(bootCPU[0]/k, "vm1-qemu-cpu-s")
	b.ReportMetric(bootCPU[1]/k, "vm4-qemu-cpu-s")
	b.Logf("4-VM deploy floor on %d cores: %.2f s of QEMU CPU / cores = %.2f s", goruntime.NumCPU(), bootCPU[1]/k, bootCPU[1]/k/float64(goruntime.NumCPU()))
	b.Logf("accelerator %s (VM figures: %s)", accel.Host(), accel.TCGMark)
}
