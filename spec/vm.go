package spec

import (
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// RuntimeVM runs a lab's service functions as QEMU virtual machines (and any endpoint that has
// vm: settings); the other nodes are network namespaces as in runtime netns.
const RuntimeVM = "vm"

// NIC models a VM node's ports may have.
const (
	NICVirtio = "virtio"
)

// NIC backends: how a VM node's ports reach the lab's network on the host (vm: backend).
const (
	// VMBackendTap is the default: a tap per port in the node's host-side namespace, spliced
	// (tc redirect both ways) to the node's veth end, so the host side has a device per port.
	VMBackendTap = "tap"
	// VMBackendMacvtap is study D's "Linux Bridge via macvtap": each port is a macvtap whose
	// MAC the guest's NIC takes; QEMU gets the macvtap's character device (made by sfclab
	// under /dev/sfclab-vm/LAB) as the tap fd. In bridge mode on the segment's bridge in
	// routed labs (on the machine or on emulated hosts); in passthru mode on the port's own
	// device where the lab needs one: a transparent lab's veth (the steering program sits on
	// its host end) and a docker lab's Docker-made interface.
	VMBackendMacvtap = "macvtap"
)

// VMBackends are the values of vm: backend.
var VMBackends = []string{VMBackendTap, VMBackendMacvtap}

// Guest images a VM node may boot (vm: image).
const (
	// VMImageBusybox is the default: an initramfs with busybox and the host's programs copied
	// in, unpacked into the guest's memory at boot.
	VMImageBusybox = "busybox"
	// VMImageDebian is a Debian root file system (debootstrap, the packages the node's kind
	// needs) on a read-only virtio-blk disk, with the guest's writes in memory (overlayfs).
	VMImageDebian = "debian"
)

// VMImages are the values of vm: image.
var VMImages = []string{VMImageBusybox, VMImageDebian}

// VM is a node's virtual machine: `vm: {cpus: 2, memory: 512, pin: "1", nic: virtio}` on an
// endpoint or function. A node with vm: in a netns lab is a VM beside namespaces; in a lab
// with runtime: vm every function is one, with the defaults unless it says otherwise.
type VM struct {
	// CPUs is the number of vCPUs (default 1).
	CPUs int `yaml:"cpus,omitempty" json:"cpus,omitempty"`
	// Memory is the guest's memory in MiB (default 512: the guest image with the sfclab
	// binary as its agent needs about 270).
	Memory int `yaml:"memory,omitempty" json:"memory,omitempty"`
	// Pin is the host cores QEMU's threads run on (a cpuset list such as "1" or "0-1";
	// default: any).
	Pin string `yaml:"pin,omitempty" json:"pin,omitempty"`
	// NIC is the model of the guest's ports: virtio (default, virtio-net on a tap).
	NIC string `yaml:"nic,omitempty" json:"nic,omitempty"`
	// Image is the guest image the node boots: busybox (default) or debian (docs/vm.md).
	Image string `yaml:"image,omitempty" json:"image,omitempty"`
	// Backend is how the guest's ports reach the lab's network: tap (default) or macvtap
	// (docs/vm.md, "NIC backends").
	Backend string `yaml:"backend,omitempty" json:"backend,omitempty"`

	Pos Pos `yaml:"-" json:"-"`
}

// UnmarshalYAML decodes vm: settings and remembers where they were.
func (m *VM) UnmarshalYAML(n *yaml.Node) error {
	type plain VM
	return decodeAt(n, (*plain)(m), &m.Pos)
}

// VM defaults.
const (
	DefaultVMCPUs = 1
	// DefaultVMMemory: the guest unpacks its initramfs in memory (the kernel holds the
	// archive and its unpacked copy at once), 85 MB with Squid and its libraries.
	DefaultVMMemory = 512
	// MinVMMemory is the least memory a guest boots in (its kernel and initramfs).
	MinVMMemory = 128
)

// vm checks and defaults a node's vm: settings (what needs no look at the host; the vm
// runtime checks cores and memory against the host).
func (v *validator) vm(what string, m *VM) {
	if m == nil {
		return
	}
	if m.CPUs == 0 {
		m.CPUs = DefaultVMCPUs
	}
	if m.Memory == 0 {
		m.Memory = DefaultVMMemory
	}
	if m.NIC == "" {
		m.NIC = NICVirtio
	}
	if m.Image == "" {
		m.Image = VMImageBusybox
	}
	if m.Backend == "" {
		m.Backend = VMBackendTap
	}
	if m.CPUs < 0 {
		v.bad(m.Pos, "%s: vm cpus %d: give a positive number of vCPUs", what, m.CPUs)
	}
	if m.Memory < MinVMMemory {
		v.bad(m.Pos, "%s: vm memory %d MiB: a guest needs at least %d MiB", what, m.Memory, MinVMMemory)
	}
	if m.NIC != NICVirtio {
		v.bad(m.Pos, "%s: vm nic %q is not one of %s", what, m.NIC, NICVirtio)
	}
	if !slices.Contains(VMImages, m.Image) {
		v.bad(m.Pos, "%s: vm image %q is not one of %s", what, m.Image, strings.Join(VMImages, ", "))
	}
	if m.Pin != "" && !validCPUList(m.Pin) {
		v.bad(m.Pos, "%s: vm pin %q is not a list of cores such as 1, 0-1 or 0,2", what, m.Pin)
	}
	v.vmBackend(what, m)
}

// validCPUList reports whether s is a cpuset list ("1", "0-1", "0,2"): its form only; whether
// the host has those cores is checked when the lab is deployed.
func validCPUList(s string) bool {
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return false
		}
		if isRange {
			if b, err := strconv.Atoi(hi); err != nil || b < a {
				return false
			}
		}
	}
	return true
}

// vmBackend checks vm: backend. A macvtap works in every lab a VM node does: in bridge mode
// on the segment's bridge in routed labs whose bridges are sfclab's (the lab's fabric, or
// emulated hosts' bridges), in passthru mode on a device of the port's own where the lab needs
// one (a transparent lab's veth, whose host end carries the steering program; the interface
// Docker made for a container on its own network): docs/vm.md, "NIC backends".
func (v *validator) vmBackend(what string, m *VM) {
	if !slices.Contains(VMBackends, m.Backend) {
		v.bad(m.Pos, "%s: vm backend %q is not one of %s", what, m.Backend, strings.Join(VMBackends, ", "))
	}
}
