// Package tap is the function of a tap port pair group (transparent steering): it only
// receives copies of a chain's traffic. Its port's packet counters count them (sfclab
// inspect); with params.pcap it also writes them to a pcap file. Whatever it sends is
// dropped by the steering program.
package tap

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/vnf"
)

// Tap implements vnf.Function.
type Tap struct{}

func params(f *plan.Function) *TapParams {
	if p, ok := f.Params.(*TapParams); ok {
		return p
	}
	return &TapParams{}
}

// NewParams returns the kind's empty parameters (TapParams) for the decoder.
func (Tap) NewParams() any { return &TapParams{} }

// Requires lists tcpdump when the tap writes a pcap.
func (Tap) Requires(f *plan.Function) []string {
	if params(f).Pcap != "" {
		return []string{"tcpdump"}
	}
	return nil
}

// Setup starts the capture when asked for: the file lands in the lab's state directory.
// Equivalent to: tcpdump -i IF -n -w STATEDIR/PCAP
func (Tap) Setup(ctx context.Context, env vnf.Env) error {
	p := params(env.Plan.Function)
	if p.Pcap == "" {
		return nil
	}
	out := filepath.Join(env.StateDir, filepath.Base(p.Pcap))
	argv := []string{"tcpdump", "-i", env.Plan.Function.Ingress, "-n", "-U", "-w", out}
	if _, err := env.Node.Daemon(argv, env.Path(".tap.log")); err != nil {
		return fmt.Errorf("start tap capture on %s: %w", env.Plan.Name, err)
	}
	return nil
}

// Teardown does nothing: the node's processes are stopped with the node.
func (Tap) Teardown(context.Context, vnf.Env) error { return nil }
