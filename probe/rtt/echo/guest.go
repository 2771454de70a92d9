package echo

import (
	"context"
	"fmt"
	"net/netip"
	"time"
)

// MaxGuestCount bounds the echoes of one run in a VM guest: its result (every echo's four
// timestamps) comes back through the guest's agent as one message.
const MaxGuestCount = 100_000

// Guest is a VM guest source whose agent runs Measure in the guest (runtime/vm.Node): the
// echoes leave from the guest's own stack, and every timestamp is the guest's clock.
type Guest interface {
	Echo(ctx context.Context, dst netip.AddrPort, cfg Config) (*Result, error)
}

// GuestRun is a run of Measure an agent is asked for.
type GuestRun struct {
	Dst netip.AddrPort `json:"dst"`
	Cfg Config         `json:"cfg"`
}

// Validate checks a run before a guest's agent starts it: the configuration (Validate), no
// tc path end (the host attaches those programs), no XDP method, at most MaxGuestCount echoes.
func (g GuestRun) Validate() error {
	c := g.Cfg.WithDefaults()
	if err := c.Validate(); err != nil {
		return err
	}
	switch {
	case !g.Dst.IsValid():
		return fmt.Errorf("%w: no destination", ErrConfig)
	case c.Method == MethodXDP:
		return fmt.Errorf("%w: method xdp does not run in a guest (its generator is attached from the host)", ErrConfig)
	case c.PathEnd == PathEndTC:
		return fmt.Errorf("%w: path_end tc does not run in a guest (its programs are attached from the host)", ErrConfig)
	case c.Count > MaxGuestCount:
		return fmt.Errorf("%w: count %d: at most %d echoes in a guest", ErrConfig, c.Count, MaxGuestCount)
	}
	return nil
}

// Bound is the longest the agent's run may take (Config.Bound).
func (g GuestRun) Bound() time.Duration { return g.Cfg.Bound() }
