// Package runtimes lists every runtime this build has: the explicit registry (no init() side
// effects, no global map a caller fills), as vnf/kinds lists the function kinds. Adding a
// runtime means a package under runtime/ and a line here.
package runtimes

import (
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/docker"
	"github.com/sfclab/sfclab/runtime/kubernetes"
	"github.com/sfclab/sfclab/runtime/netns"
	"github.com/sfclab/sfclab/runtime/vm"
	"github.com/sfclab/sfclab/spec"
)

// Options configure the built-in runtimes.
type Options struct {
	// StateRoot is the journal root of the deployer using the runtimes ("" = the default).
	StateRoot string
	// Kubeconfig is the kubernetes runtime's kubeconfig ("" = $KUBECONFIG or ~/.kube/config).
	Kubeconfig string
	// ImageProgress receives the steps of a docker node image build; nil means silent.
	ImageProgress func(docker.BuildProgress)
	// VMLog receives the steps of a guest image build; nil means silent.
	VMLog func(format string, args ...any)
	// Log receives what a runtime did beside building a lab that the user should be told
	// (kubernetes: destroyed labs' state swept from the cluster's nodes before a deploy); nil
	// means silent.
	Log func(format string, args ...any)
}

// All returns the built-in runtimes by name.
func All(o Options) map[string]runtime.Runtime {
	// A docker lab's VM nodes are booted by the same vm runtime (docker.Runtime.Machines).
	machines := vm.Runtime{Images: vm.Builder{Log: o.VMLog}, StateRoot: o.StateRoot}
	return map[string]runtime.Runtime{
		spec.RuntimeNetns:      netns.Runtime{},
		spec.RuntimeDocker:     docker.Runtime{StateRoot: o.StateRoot, Progress: o.ImageProgress, Machines: machines},
		spec.RuntimeKubernetes: kubernetes.Runtime{StateRoot: o.StateRoot, Kubeconfig: o.Kubeconfig, Log: o.Log},
		spec.RuntimeVM:         machines,
	}
}
