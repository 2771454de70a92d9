package forwarder

import "github.com/sfclab/sfclab/spec"

// Kind is the kind's name in a lab file (the register, vnf/kinds, maps it to this package).
const Kind = "forwarder"

// ForwarderParams are the parameters of a forwarder: a plain L3 router.
type ForwarderParams struct {
	// Datapath is how a forwarder in a transparent lab forwards: "bpf" (default there: a tc
	// program at its ingress port hands each packet back to the host side, no IP stack) or
	// "kernel" (the kernel's IP forwarding, as a VM or a container forwards: study C's VNFs).
	// A routed lab's forwarders always forward by the kernel.
	Datapath string `yaml:"datapath,omitempty" json:"datapath,omitempty"`
}

// Forwarder datapaths.
const (
	DatapathBPF    = "bpf"
	DatapathKernel = "kernel"
)

// FastPath is the bump program unless the datapath is the kernel's (spec.FastPath).
func (p *ForwarderParams) FastPath() string {
	if p.Datapath == DatapathKernel {
		return ""
	}
	return spec.FastPathBump
}

// CheckRouted refuses datapath bpf in a routed lab (spec.RoutedChecker): its program sits
// between the function's port and the host's bridge, which only transparent steering has.
func (p *ForwarderParams) CheckRouted(pr *spec.Problems) {
	if p.Datapath == DatapathBPF {
		pr.Addf("datapath bpf is transparent steering's (its program sits between the function's port and the host's bridge); a routed forwarder forwards by the kernel: drop datapath or use steering: transparent")
	}
}

// Check checks the datapath.
func (p *ForwarderParams) Check(fn *spec.Function, pr *spec.Problems) {
	if p.Datapath != "" {
		pr.OneOf("datapath", p.Datapath, DatapathBPF, DatapathKernel)
	}
}
