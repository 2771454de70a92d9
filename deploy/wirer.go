package deploy

import (
	"context"

	"github.com/sfclab/sfclab/hosts"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/steer"
)

// SegmentWirer is a runtime whose segments are wired on the machines its nodes run on, not by
// sfclab's own process (kubernetes: the sfclab agent on every node). Deploy computes what to
// build as for any runtime and hands it over instead of calling package hosts and steer itself.
// It is declared here, where it is used, so that package runtime stays below hosts and steer.
type SegmentWirer interface {
	// BuildHosts builds topo (what hosts.Build builds, with NodesExist) and returns where
	// each veth port is, by hosts.PortKey (Topology.PortLinks). Undo removes what it built.
	BuildHosts(ctx context.Context, p *plan.Plan, topo *hosts.Topology, undo runtime.Undo) (map[string]hosts.PortAt, error)
	// AttachSteering installs the lab's steering programs (steer.Install); the chains'
	// tables are written afterwards through the pinned maps.
	AttachSteering(ctx context.Context, p *plan.Plan, a steer.Attachment, undo runtime.Undo) error
}
