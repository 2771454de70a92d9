// Package accel decides how a lab's virtual machines run their CPU: hardware-assisted (KVM)
// or emulated (QEMU's TCG). It decides by what KVM needs to run a standard guest kernel, never
// by the existence of /dev/kvm: a host whose /dev/kvm is PVM (a paravirtualised KVM that boots
// only PVM-enabled guest kernels) or that hides the CPU's virtualisation flags gets TCG.
package accel

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Accelerators.
const (
	KVM = "kvm"
	TCG = "tcg"
)

// TCGMark labels every figure measured on a TCG guest.
const TCGMark = "emulated CPU (TCG): not comparable"

// Decision is the accelerator chosen and why.
type Decision struct {
	Accel  string `json:"accel"`
	Reason string `json:"reason"`
}

// Emulated reports whether guests run under TCG.
func (d Decision) Emulated() bool { return d.Accel != KVM }

func (d Decision) String() string { return d.Accel + ": " + d.Reason }

// Facts are what the decision reads from the host.
type Facts struct {
	DevKVM      bool   // /dev/kvm exists
	CPUFlags    string // the flags line of /proc/cpuinfo
	PVMLoaded   bool   // /sys/module/kvm_pvm exists
	KernelPVM   bool   // CONFIG_KVM_PVM=y or m in the running kernel's config
	KVMDisabled bool   // the user asked for TCG
}

// Decide applies the static checks in order; the first that fails picks TCG and is the
// reason. They take milliseconds; a hung KVM boot takes forever, which is why they come first.
func Decide(f Facts) Decision {
	flags := " " + f.CPUFlags + " "
	has := func(flag string) bool { return strings.Contains(flags, " "+flag+" ") }
	switch {
	case f.KVMDisabled:
		return Decision{TCG, "TCG asked for"}
	case !f.DevKVM:
		return Decision{TCG, "no /dev/kvm"}
	case f.PVMLoaded || f.KernelPVM:
		return Decision{TCG, "/dev/kvm is PVM (module kvm_pvm / CONFIG_KVM_PVM), which boots only PVM-enabled guest kernels; a standard kernel hangs under it"}
	case !has("vmx") && !has("svm"):
		return Decision{TCG, "the CPU shows no vmx/svm flag (no nested virtualisation): /dev/kvm cannot run a standard guest"}
	case !has("pni"):
		return Decision{TCG, "SSE3 (pni) is hidden from this host's CPU, which KVM guests need"}
	}
	return Decision{KVM, "vmx/svm present, /dev/kvm is not PVM (static checks only; not confirmed by a boot)"}
}

// HostFacts reads the facts of this host.
func HostFacts() Facts {
	var f Facts
	_, err := os.Stat("/dev/kvm")
	f.DevKVM = err == nil
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
				f.CPUFlags = strings.TrimSpace(v)
				break
			}
		}
	}
	_, err = os.Stat("/sys/module/kvm_pvm")
	f.PVMLoaded = err == nil
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		if b, err := os.ReadFile("/boot/config-" + unix.ByteSliceToString(u.Release[:])); err == nil {
			s := string(b)
			f.KernelPVM = strings.Contains(s, "\nCONFIG_KVM_PVM=y") || strings.Contains(s, "\nCONFIG_KVM_PVM=m")
		}
	}
	return f
}

// Host decides for this host.
func Host() Decision { return Decide(HostFacts()) }

// Describe is the environment line of a report: what /dev/kvm is and what sfclab's VMs use.
func Describe() string {
	d := Host()
	return fmt.Sprintf("VM acceleration %s", d)
}
