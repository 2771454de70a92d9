package deploy

import (
	"fmt"
	"strings"

	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
)

// checkShaping refuses, before anything is created, a plan whose shaping needs netem on a
// kernel without it.
func checkShaping(p *plan.Plan) error {
	for _, s := range p.Segments {
		if s.Shape != nil && s.Shape.NeedsNetem() {
			if err := netdev.NetemAvailable(); err != nil {
				return fmt.Errorf("shape segment %s (%s): %w", s.Name, s.Shape, err)
			}
		}
	}
	return nil
}

// shaping limits the egress of every member interface of each shaped segment. The queueing
// disciplines go with the interfaces, so there is nothing to undo.
func (b *build) shaping() error {
	for _, s := range b.p.Segments {
		if s.Shape == nil {
			continue
		}
		for _, m := range s.Members {
			node, ifname, _ := strings.Cut(m, "/")
			ns := b.ns[node]
			if ns == nil {
				return fmt.Errorf("shape segment %s: node %s has no namespace", s.Name, node)
			}
			sh := netdev.Shape{RateBits: s.Shape.RateBits, BurstBytes: s.Shape.BurstBytes, Delay: s.Shape.Delay,
				Jitter: s.Shape.Jitter, LossPercent: s.Shape.LossPercent}
			if err := ns.SetShape(ifname, sh); err != nil {
				return fmt.Errorf("segment %s: %w", s.Name, err)
			}
		}
	}
	return nil
}
