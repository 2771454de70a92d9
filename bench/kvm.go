package bench

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// KVM ioctls (linux/kvm.h).
const (
	kvmGetAPIVersion = 0xAE00
	kvmCreateVM      = 0xAE01
	kvmCreateVCPU    = 0xAE41
)

// KVMStatus says whether this host could run a hardware-accelerated guest: it opens /dev/kvm,
// asks its API version and creates a VM and a vCPU (released at once), and reports the CPU's
// virtualisation flags. A KVM platform needs a VM runtime sfclab does not have; the report
// prints this line so a reader knows what the host offers.
func KVMStatus() string {
	flags := "no vmx/svm flag in /proc/cpuinfo"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, f := range []string{" vmx", " svm"} {
			if strings.Contains(string(b), f) {
				flags = strings.TrimSpace(f) + " flag present"
			}
		}
	}
	fd, err := unix.Open("/dev/kvm", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Sprintf("not usable: open /dev/kvm: %v (%s)", err, flags)
	}
	defer unix.Close(fd)
	api, err := unix.IoctlRetInt(fd, kvmGetAPIVersion)
	if err != nil {
		return fmt.Sprintf("not usable: KVM_GET_API_VERSION: %v (%s)", err, flags)
	}
	vm, err := unix.IoctlRetInt(fd, kvmCreateVM)
	if err != nil {
		return fmt.Sprintf("not usable: API %d, KVM_CREATE_VM: %v (%s)", api, err, flags)
	}
	defer unix.Close(vm)
	vcpu, err := unix.IoctlRetInt(vm, kvmCreateVCPU)
	if err != nil {
		return fmt.Sprintf("not usable: API %d, KVM_CREATE_VCPU: %v (%s)", api, err, flags)
	}
	unix.Close(vcpu)
	return fmt.Sprintf("usable: /dev/kvm API %d, a VM and a vCPU created (%s); sfclab has no VM runtime to measure it", api, flags)
}
