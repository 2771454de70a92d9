package bench

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sfclab/sfclab/runtime/vm/accel"
)

// KVM ioctls (linux/kvm.h).
const (
	kvmGetAPIVersion = 0xAE00
	kvmCreateVM      = 0xAE01
	kvmCreateVCPU    = 0xAE41
)

// KVMStatus says whether this host can run a hardware-accelerated standard guest. It decides
// as the vm runtime does (package accel: the CPU's vmx/svm flag, PVM, SSE3), never by the
// existence of /dev/kvm: a PVM /dev/kvm opens, reports its API and creates VMs and vCPUs, yet
// a standard guest kernel hangs under it. The ioctl probe (open, API version, a VM and a vCPU
// created and released at once) is reported beside the decision.
func KVMStatus() string {
	return kvmStatus(accel.HostFacts(), probeKVM())
}

// kvmStatus words the decision for facts, with what the ioctl probe found.
func kvmStatus(f accel.Facts, probe string) string {
	flags := "no vmx/svm flag in /proc/cpuinfo"
	for _, fl := range []string{"vmx", "svm"} {
		if strings.Contains(" "+f.CPUFlags+" ", " "+fl+" ") {
			flags = fl + " flag present"
		}
	}
	d := accel.Decide(f)
	if d.Emulated() {
		return fmt.Sprintf("not usable: %s (%s; %s); sfclab's VMs run under TCG, their figures marked %q", d.Reason, flags, probe, accel.TCGMark)
	}
	return fmt.Sprintf("usable: %s (%s; %s)", d.Reason, flags, probe)
}

// probeKVM opens /dev/kvm, asks its API version and creates a VM and a vCPU.
func probeKVM() string {
	fd, err := unix.Open("/dev/kvm", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Sprintf("open /dev/kvm: %v", err)
	}
	defer unix.Close(fd)
	api, err := unix.IoctlRetInt(fd, kvmGetAPIVersion)
	if err != nil {
		return fmt.Sprintf("KVM_GET_API_VERSION: %v", err)
	}
	vm, err := unix.IoctlRetInt(fd, kvmCreateVM)
	if err != nil {
		return fmt.Sprintf("/dev/kvm API %d, KVM_CREATE_VM: %v", api, err)
	}
	defer unix.Close(vm)
	vcpu, err := unix.IoctlRetInt(vm, kvmCreateVCPU)
	if err != nil {
		return fmt.Sprintf("/dev/kvm API %d, KVM_CREATE_VCPU: %v", api, err)
	}
	unix.Close(vcpu)
	return fmt.Sprintf("/dev/kvm API %d opens and creates a VM and a vCPU", api)
}
