package custom

import "github.com/sfclab/sfclab/spec"

// Kind is the kind's name in a lab file (the register, vnf/kinds, maps it to this package).
const Kind = "custom"

// CustomParams are the parameters of a custom function: any commands in the node.
type CustomParams struct {
	// Setup commands run once, in order, and must exit 0.
	Setup []string `yaml:"setup,omitempty" json:"setup,omitempty"`
	// Run commands are started and kept running for the life of the lab.
	Run []string `yaml:"run,omitempty" json:"run,omitempty"`
	// Teardown commands run when the lab is destroyed (errors are reported, not fatal).
	Teardown []string `yaml:"teardown,omitempty" json:"teardown,omitempty"`
	// Forward turns IP forwarding on in the node (default true).
	Forward *bool `yaml:"forward,omitempty" json:"forward,omitempty"`
	// Requires lists programs that must be installed on the host.
	Requires []string `yaml:"requires,omitempty" json:"requires,omitempty"`
}

// ForwardsIP is forward:, when set (spec.IPForwarding).
func (p *CustomParams) ForwardsIP() (forward, set bool) {
	if p.Forward == nil {
		return false, false
	}
	return *p.Forward, true
}

// Check checks that the function runs something.
func (p *CustomParams) Check(fn *spec.Function, pr *spec.Problems) {
	if len(p.Setup)+len(p.Run) == 0 {
		pr.Addf("a custom function needs setup or run commands")
	}
}
