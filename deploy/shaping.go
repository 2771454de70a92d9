package deploy

import (
	"fmt"
	"strings"

	"github.com/sfclab/sfclab/hosts"
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
	for _, h := range p.AllHosts() {
		if h.Link != nil && h.Link.NeedsNetem() {
			if err := netdev.NetemAvailable(); err != nil {
				return fmt.Errorf("shape the link of host %s (%s): %w", h.Name, h.Link, err)
			}
		}
	}
	return nil
}

// shapeHosts limits every shaped host's link: its underlay interface's egress, so each
// direction between two hosts gets the rate (as a back-to-back link has it per direction).
//
// Equivalent to: tc -n sfc.LAB.host-H qdisc replace dev ul0 root tbf rate RATE burst B latency L
func (b *build) shapeHosts() error {
	for _, h := range b.p.AllHosts() {
		if h.Link == nil {
			continue
		}
		ns, err := netdev.OpenNS(h.Netns)
		if err != nil {
			return fmt.Errorf("shape the link of host %s: %w", h.Name, err)
		}
		sh := netdev.Shape{RateBits: h.Link.RateBits, BurstBytes: h.Link.BurstBytes, Delay: h.Link.Delay,
			Jitter: h.Link.Jitter, LossPercent: h.Link.LossPercent}
		err = ns.SetShape(hosts.UnderlayDev, sh)
		ns.Close()
		if err != nil {
			return fmt.Errorf("shape the link of host %s: %w", h.Name, err)
		}
	}
	return nil
}

// shaping limits the egress of every member interface of each shaped segment. The queueing
// disciplines go with the interfaces, so there is nothing to undo.
func (b *build) shaping() error {
	if err := b.shapeHosts(); err != nil {
		return err
	}
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
