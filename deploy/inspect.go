package deploy

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/lb"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/vnf"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// LabInfo is what `sfclab inspect` shows of one lab: its journal, its plan and live counters.
type LabInfo struct {
	Lab    string      `json:"lab"`
	Status string      `json:"status"`
	File   string      `json:"file,omitempty"`
	Nodes  []NodeInfo  `json:"nodes"`
	Chains []ChainInfo `json:"chains"`
	// Steering is a transparent lab's data plane: classifiers, paths with per-hop counters
	// read from the BPF maps, and the instance each group picked for the last flows.
	Steering *SteeringInfo  `json:"steering,omitempty"`
	Plan     *plan.Plan     `json:"-"`
	State    *journal.State `json:"-"`
}

// NodeInfo is one node with its interfaces as the kernel reports them now.
type NodeInfo struct {
	Name       string          `json:"name"`
	Role       string          `json:"role"`
	Kind       string          `json:"kind"`
	Netns      string          `json:"netns"`
	Interfaces []InterfaceInfo `json:"interfaces"`
	// Rules are per-rule counters of a function whose kind counts its rules (vnf.RuleCounters,
	// e.g. a firewall).
	Rules []vnf.Counter `json:"rules,omitempty"`
	// Error says why the node could not be read (e.g. its namespace is gone).
	Error string `json:"error,omitempty"`
	// Down says why the node's function is not running (its process died).
	Down string `json:"down,omitempty"`
	// Machine describes a node that is a virtual machine (accelerator, TCG mark, boot).
	Machine string `json:"machine,omitempty"`
	// Balancer are a load balancer's per-backend counters (l4lb impl: sfclab).
	Balancer *lb.Stats `json:"balancer,omitempty"`
}

// InterfaceInfo is one interface with its addresses and counters.
type InterfaceInfo struct {
	Name    string           `json:"name"`
	Segment string           `json:"segment"`
	Addrs   []netip.Prefix   `json:"addrs"`
	Up      bool             `json:"up"`
	Stats   netdev.LinkStats `json:"stats"`
	// SeenBy says whose kernel reported Addrs, Up and Stats: SeenHost (a namespace, a
	// container, a pod: the host's kernel, or the cluster node's), SeenGuest (a VM's own
	// kernel, read inside the guest through its agent) or SeenHostSide (a VM whose guest could
	// not be read, Down says why: the device in the node's namespace on the host that carries
	// the guest's frames, a veth spliced to its tap or its macvtap).
	SeenBy string `json:"seen_by"`
	// HostSide are a VM port's host-side device's counters (the same device as SeenHostSide's)
	// beside the guest's; nil for other nodes. Rx there is what went towards the guest, tx
	// what the guest sent.
	HostSide *netdev.LinkStats `json:"host_side_stats,omitempty"`
	// Shaping is the interface's tbf/netem as the kernel has it, on shaped segments.
	Shaping string `json:"shaping,omitempty"`
}

// ChainInfo is one chain with its hops.
type ChainInfo struct {
	Name   string   `json:"name"`
	Path   []string `json:"path"`
	Hops   []string `json:"hops"`
	Target string   `json:"target"`
}

// guestReadBound bounds what inspect reads in one VM guest (its interfaces, rule and balancer
// counters, whether its function runs), so that a guest that stops answering halfway holds
// inspect no longer; a guest that does not answer at all is found down sooner, by its
// interfaces' read (vm.InspectTimeout).
const guestReadBound = 30 * time.Second

// InspectGuests is how many VM guests inspect reads at once (InspectLabs): a guest that does
// not answer holds its read for up to vm.InspectTimeout, so guests read one after another
// would add that bound for each hung one.
const InspectGuests = 4

// Inspect reads a deployed lab's plan and the live state of its nodes (its VM guests up to
// InspectGuests at once).
func (d *Deployer) Inspect(ctx context.Context, lab string) (*LabInfo, error) {
	infos, err := d.InspectLabs(ctx, []string{lab})
	if err != nil {
		return nil, err
	}
	return infos[0], nil
}

// InspectLabs reads labs as Inspect does, in the order given, up to InspectGuests labs and
// InspectGuests VM guests (of all of them) at once: hung guests hold it about one bound
// (vm.InspectTimeout) in all, not one each. A lab that cannot be read (its journal or plan)
// fails it with the first such lab's error, in the order given.
func (d *Deployer) InspectLabs(ctx context.Context, labs []string) ([]*LabInfo, error) {
	if len(labs) == 0 {
		return nil, nil
	}
	labSlots, guests := make(chan struct{}, InspectGuests), make(chan struct{}, InspectGuests)
	infos := make([]*LabInfo, len(labs))
	errs := make([]error, len(labs))
	var wg sync.WaitGroup
	for i, lab := range labs {
		wg.Go(func() {
			labSlots <- struct{}{}
			defer func() { <-labSlots }()
			infos[i], errs[i] = d.inspect(ctx, lab, guests)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return infos, nil
}

// inspect reads one lab; its VM guests are read concurrently, each holding a slot of guests
// while it is read, the other nodes in order.
func (d *Deployer) inspect(ctx context.Context, lab string, guests chan struct{}) (*LabInfo, error) {
	st, err := d.Journal.ReadState(lab)
	if err != nil {
		return nil, err
	}
	p, err := d.journal().ReadPlan(lab)
	if err != nil {
		return nil, err
	}
	info := &LabInfo{Lab: lab, Status: st.Status, File: st.File, Plan: p, State: st}
	var machines runtime.MachineDescriber
	if rt, err := d.Runtime(p.Runtime); err == nil {
		machines, _ = rt.(runtime.MachineDescriber)
	}
	info.Nodes = make([]NodeInfo, len(p.Nodes))
	var wg sync.WaitGroup
	for k, n := range p.Nodes {
		ni := &info.Nodes[k]
		*ni = NodeInfo{Name: n.Name, Role: n.Role, Kind: n.Kind, Netns: n.Netns}
		if machines != nil {
			ni.Machine, ni.Down = machines.DescribeMachine(p, n.Name)
		}
		if ni.Machine == "" {
			readNodeInfo(ctx, d, p, n, ni)
			continue
		}
		wg.Go(func() {
			select {
			case guests <- struct{}{}:
				defer func() { <-guests }()
			case <-ctx.Done():
				ni.Error = fmt.Sprintf("read VM node %s: %v", n.Name, ctx.Err())
				return
			}
			gctx, cancel := context.WithTimeout(ctx, guestReadBound)
			defer cancel()
			readNodeInfo(gctx, d, p, n, ni)
		})
	}
	wg.Wait()
	for _, c := range p.Chains {
		ci := ChainInfo{Name: c.Name, Path: c.Path, Target: c.Target.String()}
		if c.Port != 0 {
			ci.Target = fmt.Sprintf("%s:%d", c.Target, c.Port)
		}
		for _, h := range c.Hops {
			ci.Hops = append(ci.Hops, fmt.Sprintf("%s(%s)x%d", h.Group, h.Kind, len(h.Instances)))
		}
		info.Chains = append(info.Chains, ci)
	}
	if p.Transparent != nil {
		m, err := d.Journal.ReadSteerModel(lab)
		if err != nil || m == nil {
			m = p.Transparent.Model
		}
		rt, _ := d.Runtime(p.Runtime) // nil: the maps on this machine
		info.Steering = inspectSteering(ctx, rt, p, m)
	}
	return info, nil
}

// readNodeInfo reads node n's interfaces, counters and function into ni.
func readNodeInfo(ctx context.Context, d *Deployer, p *plan.Plan, n *plan.Node, ni *NodeInfo) {
	if err := readNode(ctx, d, p, n, ni); err != nil {
		ni.Error = err.Error()
	} else if ni.Down == "" { // a machine that is down says why, not what its kind cannot reach
		readFunction(ctx, d, p, n, ni)
	}
}

// Whose kernel reported an interface's figures (InterfaceInfo.SeenBy).
const (
	SeenHost     = "host"
	SeenGuest    = "guest"
	SeenHostSide = "host side"
)

// guestLinker is a node with a kernel of its own (a VM guest): its interfaces are read inside
// it, within a bound (vm.InspectTimeout); OpenNS gives its host side.
type guestLinker interface {
	GuestLinks(ctx context.Context) ([]netdev.LinkInfo, error)
}

// nsOpener is a node whose network namespace has no name (a container).
type nsOpener interface{ OpenNS() (*netdev.NS, error) }

// linkLister is a node whose interfaces are read where it runs (a kubernetes pod, through the
// sfclab agent on its node), not through a namespace this process opens.
type linkLister interface {
	Links(ctx context.Context) ([]netdev.LinkInfo, error)
}

func readNode(ctx context.Context, d *Deployer, p *plan.Plan, n *plan.Node, ni *NodeInfo) error {
	var ns *netdev.NS // nil: the node lists its links itself, unshaped
	var links []netdev.LinkInfo
	node, err := d.Node(p, n.Name)
	if err != nil {
		return err
	}
	if ll, ok := node.(linkLister); ok {
		if links, err = ll.Links(ctx); err != nil {
			return err
		}
	} else {
		o, ok := node.(nsOpener)
		if !ok {
			return fmt.Errorf("open namespace of node %s: runtime %s cannot", n.Name, p.Runtime)
		}
		if ns, err = o.OpenNS(); err != nil {
			return err
		}
		defer ns.Close()
		if links, err = ns.Links(); err != nil {
			return err
		}
	}
	byName := map[string]netdev.LinkInfo{}
	for _, l := range links {
		byName[l.Name] = l
	}
	seen, guest := SeenHost, map[string]netdev.LinkInfo(nil)
	if gl, ok := node.(guestLinker); ok {
		// A guest that is down (its QEMU gone) or does not answer shows its host side, and no
		// figure read in it (rules) is asked for.
		seen = SeenHostSide
		if ni.Down == "" {
			gls, err := gl.GuestLinks(ctx)
			if err != nil {
				ni.Down = err.Error()
			} else {
				seen, guest = SeenGuest, map[string]netdev.LinkInfo{}
				for _, l := range gls {
					guest[l.Name] = l
				}
			}
		}
	}
	ifs := n.Interfaces
	if p.Transparent != nil {
		if tn := p.Transparent.Node(n.Name); tn != nil {
			ifs = nil
			for _, pt := range tn.Ports {
				ifs = append(ifs, &plan.Interface{Name: pt.Ifname, Segment: pt.Network})
			}
		}
	}
	for _, i := range ifs {
		l, ok := byName[i.Name]
		ii := InterfaceInfo{Name: i.Name, Segment: i.Segment, SeenBy: seen}
		if guest != nil {
			if ok {
				st := l.Stats
				ii.HostSide = &st
			}
			l, ok = guest[i.Name]
		}
		if ok {
			ii.Addrs, ii.Up, ii.Stats = l.Addrs, l.Up, l.Stats
			if seg := p.Segment(i.Segment); seg != nil && seg.Shape != nil && ns != nil {
				if ii.Shaping, err = ns.Shaping(i.Name); err != nil {
					ii.Shaping = "unreadable: " + err.Error()
				}
			}
		}
		ni.Interfaces = append(ni.Interfaces, ii)
	}
	if n.Function == nil || seen == SeenHostSide {
		return nil
	}
	k, err := kinds.Get(n.Function.Kind)
	if err != nil {
		return err
	}
	rc, ok := k.(vnf.RuleCounters)
	if !ok {
		return nil
	}
	if ni.Rules, err = rc.Counters(ctx, node, n.Function); err != nil {
		return err
	}
	return nil
}
