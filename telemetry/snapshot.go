// Package telemetry reads the live counters of every deployed lab — per interface packets,
// bytes and drops, per firewall rule packets, per node CPU time from its cgroup, per chain hop
// counters and the lab's deploy duration — and exposes them as Prometheus metrics collected on
// scrape (no background polling), and as snapshots for `sfclab top`.
package telemetry

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/vm/accel"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf"
)

// Source is where telemetry finds labs and their live state. FromDeployer adapts a
// *deploy.Deployer; tests may pass their own.
type Source interface {
	// Labs lists the journaled labs.
	Labs() ([]string, error)
	// Inspect reads a lab's plan and the kernel's counters of its interfaces and rules.
	Inspect(ctx context.Context, lab string) (*deploy.LabInfo, error)
	// Node returns a deployed node, for its CPU time.
	Node(p *plan.Plan, name string) (runtime.Node, error)
}

// FromDeployer reads the labs journaled by d.
func FromDeployer(d *deploy.Deployer) Source { return deployerSource{d} }

type deployerSource struct{ *deploy.Deployer }

func (s deployerSource) Labs() ([]string, error) { return s.Journal.Labs() }

// HopCounters is a data plane that keeps its own per chain hop counters (the transparent
// steering's eBPF maps in package steer). Telemetry asks it on every scrape; a lab it does
// not steer gives no counts and no error.
type HopCounters interface {
	HopCounts(ctx context.Context, lab string) ([]HopCount, error)
}

// HopCount is one hop's counters as a data plane keeps them.
type HopCount struct {
	Chain string
	// Hop is the hop's index in the chain's path, 0 = the source.
	Hop     int
	Node    string
	Packets uint64
	Bytes   uint64
}

// Lab is one lab's counters at one moment.
type Lab struct {
	Lab     string
	Status  string
	Runtime string
	// Deployed is how long the deploy took (0 while deploying).
	Deployed time.Duration
	Nodes    []Node
	// Hops are per chain hop counters: the ingress interface of every hop's node (source
	// "interface"), and a data plane's own counters where it keeps them (source "steer").
	Hops []Hop
	// Err is why the data plane's hop counters could not be read, if so.
	Err string
}

// Node is one node's counters.
type Node struct {
	Name  string
	Role  string
	Kind  string
	Chain string
	// Interfaces are the node's interfaces in plan order, with the kernel's counters.
	Interfaces []deploy.InterfaceInfo
	// Rules are a firewall's per rule counters.
	Rules []vnf.Counter
	// CPU is the CPU time of the node's processes; CPUErr says why it is missing.
	CPU    cgroup.Usage
	CPUErr string
	// Err says why the node could not be read (its namespace is gone, ...).
	Err string
	// Emulated says the node is a VM whose CPU is emulated (QEMU's TCG): its CPU is that of
	// the emulator, every figure of it carries accel.TCGMark.
	Emulated bool
}

// Up reports whether the node's counters could be read.
func (n Node) Up() bool { return n.Err == "" }

// Hop is the counters of one node as a hop of a chain: the traffic that entered the hop in
// the chain's direction (what the source sent, what a function or the destination received).
type Hop struct {
	Chain string
	// Index is the hop's place in the chain: 0 the source, 1.. the functions, last the
	// destination.
	Index     int
	Group     string
	Node      string
	Interface string
	// Source is "interface" (the kernel's device counters) or "steer" (a data plane's own).
	Source  string
	Packets uint64
	Bytes   uint64
	// Drops are the interface's receive and transmit drops.
	Drops uint64
}

// Reader takes snapshots of labs.
type Reader struct {
	Source Source
	// Hops, if set, adds a data plane's per hop counters.
	Hops HopCounters
}

// Snapshot reads every lab in the journal (or only the labs named). A lab that disappears
// while it is read (being destroyed) is left out; a node that cannot be read carries Err.
// Only listing the journal itself can fail.
func (r *Reader) Snapshot(ctx context.Context, labs ...string) ([]Lab, error) {
	if len(labs) == 0 {
		var err error
		if labs, err = r.Source.Labs(); err != nil {
			return nil, fmt.Errorf("list labs: %w", err)
		}
	}
	out := make([]Lab, 0, len(labs))
	for _, name := range labs {
		l, err := r.lab(ctx, name)
		if err != nil {
			continue // gone between listing and reading: report what exists
		}
		out = append(out, *l)
	}
	return out, nil
}

// Lab reads one lab; a lab that is not (or no longer) deployed gives an error.
func (r *Reader) Lab(ctx context.Context, name string) (*Lab, error) { return r.lab(ctx, name) }

func (r *Reader) lab(ctx context.Context, name string) (*Lab, error) {
	info, err := r.Source.Inspect(ctx, name)
	if err != nil {
		return nil, err
	}
	p := info.Plan
	l := &Lab{Lab: name, Status: info.Status, Runtime: p.Runtime}
	if l.Runtime == "" {
		l.Runtime = spec.DefaultRuntime
	}
	if info.State != nil {
		l.Deployed = info.State.Deployed
	}
	byName := map[string]*Node{}
	for _, ni := range info.Nodes {
		pn := p.Node(ni.Name)
		n := Node{Name: ni.Name, Role: ni.Role, Kind: ni.Kind, Interfaces: ni.Interfaces, Rules: ni.Rules, Err: ni.Error,
			Emulated: strings.Contains(ni.Machine, accel.TCGMark)} // the vm runtime's DescribeMachine marks a TCG guest
		if n.Err == "" && slices.ContainsFunc(ni.Interfaces, func(i deploy.InterfaceInfo) bool { return i.SeenBy == deploy.SeenHostSide }) {
			// A VM whose guest could not be read: its host side's counters are other devices'
			// than the guest's its series carry, so the node is not up and exports none.
			n.Err = ni.Down
		}
		if pn != nil {
			n.Chain = pn.Chain
		}
		if node, err := r.Source.Node(p, ni.Name); err != nil {
			n.CPUErr = err.Error()
		} else if n.CPU, err = node.CPU(); err != nil {
			n.CPUErr = err.Error()
		}
		l.Nodes = append(l.Nodes, n)
	}
	for i := range l.Nodes {
		byName[l.Nodes[i].Name] = &l.Nodes[i]
	}
	l.Hops = interfaceHops(p, byName)
	if r.Hops != nil {
		counts, err := r.Hops.HopCounts(ctx, name)
		if err != nil {
			l.Err = fmt.Sprintf("read hop counters: %v", err)
		}
		for _, c := range counts {
			l.Hops = append(l.Hops, Hop{Chain: c.Chain, Index: c.Hop, Node: c.Node, Source: "steer",
				Packets: c.Packets, Bytes: c.Bytes})
		}
	}
	return l, nil
}

// interfaceHops turns every chain's hops into counters of their nodes' ingress interfaces: the
// source's egress, every function instance's ingress, the destination's interface on the chain.
func interfaceHops(p *plan.Plan, nodes map[string]*Node) []Hop {
	var out []Hop
	for _, c := range p.Chains {
		segs := map[string]bool{}
		for _, s := range c.Segments {
			segs[s] = true
		}
		add := func(idx int, group, node string, tx bool, pick func(*plan.Interface) bool) {
			n, pn := nodes[node], p.Node(node)
			if n == nil || pn == nil {
				return
			}
			for _, pi := range pn.Interfaces {
				if !pick(pi) {
					continue
				}
				for _, ii := range n.Interfaces {
					if ii.Name == pi.Name {
						h := Hop{Chain: c.Name, Index: idx, Group: group, Node: node, Interface: ii.Name,
							Source: "interface", Packets: ii.Stats.RxPackets, Bytes: ii.Stats.RxBytes,
							Drops: ii.Stats.RxDropped + ii.Stats.TxDropped}
						if tx {
							h.Packets, h.Bytes = ii.Stats.TxPackets, ii.Stats.TxBytes
						}
						out = append(out, h)
					}
				}
				return
			}
		}
		onChain := func(pi *plan.Interface) bool { return segs[pi.Segment] }
		if len(c.Path) < 2 {
			continue
		}
		add(0, c.From, c.Path[0], true, onChain)
		for i, h := range c.Hops {
			for _, inst := range h.Instances {
				add(i+1, h.Group, inst, false, func(pi *plan.Interface) bool { return pi.Side == "ingress" })
			}
		}
		add(len(c.Hops)+1, c.To, c.Path[len(c.Path)-1], false, onChain)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Chain != out[j].Chain {
			return out[i].Chain < out[j].Chain
		}
		return out[i].Index < out[j].Index
	})
	return out
}
