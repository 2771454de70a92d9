// Package runtimes lists every runtime this build has: the explicit registry (no init() side
// effects, no global map a caller fills), as vnf/kinds lists the function kinds. Adding a
// runtime means a package under runtime/ and a line here.
package runtimes

import (
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/docker"
	"github.com/sfclab/sfclab/runtime/netns"
	"github.com/sfclab/sfclab/spec"
)

// Options configure the built-in runtimes.
type Options struct {
	// StateRoot is the journal root of the deployer using the runtimes ("" = the default).
	StateRoot string
	// ImageProgress receives the steps of a docker node image build; nil means silent.
	ImageProgress func(docker.BuildProgress)
}

// All returns the built-in runtimes by name.
func All(o Options) map[string]runtime.Runtime {
	return map[string]runtime.Runtime{
		spec.RuntimeNetns:  netns.Runtime{},
		spec.RuntimeDocker: docker.Runtime{StateRoot: o.StateRoot, Progress: o.ImageProgress},
	}
}
