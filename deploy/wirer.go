package deploy

import (
	"context"
	"fmt"

	"github.com/sfclab/sfclab/hosts"
	"github.com/sfclab/sfclab/netdev"
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

// RemoteNodes is a runtime whose nodes' network namespaces sfclab's own process never enters
// (kubernetes: they are on the cluster's nodes, where the sfclab agent sets them): its
// CreateNodes returns no namespaces, and deploy hands it what each phase writes into them;
// its nodes run commands on their machines (runtime.Node without Do). Deploy and inspect
// read the lab's steering maps through it too.
type RemoteNodes interface {
	SegmentWirer
	// Configure writes each node's settings into its namespace (by node name), all nodes in
	// one go; a node not named is left alone.
	Configure(ctx context.Context, p *plan.Plan, set map[string]netdev.Settings) error
	// BumpInTheWire makes transparent nodes bumps in the wire (steer.BumpInTheWire in each).
	BumpInTheWire(ctx context.Context, p *plan.Plan, nodes []*plan.TNode) error
	// SteeringMaps reaches the lab's pinned steering maps where they are; the caller
	// closes them.
	SteeringMaps(ctx context.Context, p *plan.Plan) (steer.Maps, error)
}

// remote returns the runtime as RemoteNodes, or nil.
func remote(rt runtime.Runtime) RemoteNodes {
	r, _ := rt.(RemoteNodes)
	return r
}

// apply writes each node's settings into its namespace: through the runtime when its nodes
// are remote, else through the namespaces CreateNodes opened, nodes in parallel.
func (b *build) apply(ctx context.Context, set map[string]netdev.Settings) error {
	for name, s := range set {
		if s.Empty() {
			delete(set, name)
		}
	}
	if len(set) == 0 {
		return nil
	}
	if r := remote(b.rt); r != nil {
		return r.Configure(ctx, b.p, set)
	}
	return eachNode(ctx, b.p.Nodes, func(n *plan.Node) error {
		s, ok := set[n.Name]
		if !ok {
			return nil
		}
		if err := b.ns[n.Name].Apply(s); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		return nil
	})
}

// steeringMaps opens a lab's pinned steering maps: through the runtime when they are on its
// nodes' machines, else on this machine.
func steeringMaps(ctx context.Context, rt runtime.Runtime, p *plan.Plan) (steer.Maps, error) {
	if r := remote(rt); r != nil {
		return r.SteeringMaps(ctx, p)
	}
	return steer.Open(p.Lab)
}
