package telemetry

import (
	"slices"
	"sort"
	"time"

	"github.com/sfclab/sfclab/runtime/vm/accel"
)

// NodeRate is one node's traffic and CPU over an interval, as `sfclab top` shows it.
type NodeRate struct {
	Node  string
	Role  string
	Kind  string
	Chain string
	// RxBps and TxBps are bits per second summed over the node's interfaces.
	RxBps, TxBps float64
	// RxPps and TxPps are packets per second.
	RxPps, TxPps float64
	// Drops is receive and transmit drops per second.
	Drops float64
	// CPU is the node's CPU use in cores (1 = one core busy); -1 when unknown.
	CPU float64
	// Down says why the node could not be read, if so.
	Down string
	// Bottleneck is why this node is the lab's bottleneck candidate ("drops", "cpu"), or "".
	Bottleneck string
	// Emulated says the node is a VM under TCG: its CPU is the emulator's and is shown with
	// CPUMark.
	Emulated bool
}

// CPUMark labels the CPU of a VM node under TCG wherever top and the metrics show it: the
// vm runtime's accel.TCGMark (report.EmulatedMark is the same text).
const CPUMark = accel.TCGMark

// LabRate is one lab's nodes over an interval, busiest (highest receive rate) first.
type LabRate struct {
	Lab    string
	Status string
	Nodes  []NodeRate
}

// The bottleneck rule (docs/telemetry.md, "The bottleneck candidate"), per lab and interval.
//
// Statistics, per node: drops per second (receive and transmit drops of its interfaces over
// the interval), packets per second (received, and sent) and CPU in cores (its cgroup's CPU
// time used in the interval divided by the interval).
//
// Rule: a reading in which no node of the lab received or sent MinBusyPps packets per second
// is idle and names no node. Otherwise the node dropping the most packets per second (more than
// 0) is the candidate ("drops"); else the function with the highest CPU among the functions that
// received at least MinBusyPps packets per second and used at least MinBottleneckCPU cores
// ("cpu"). So an idle node's CPU (a TCG guest's emulator idles at 0.08-0.10 cores) never names
// it, however high.
const (
	// MinBusyPps is the packet rate (packets per second, received or sent by one node) below
	// which a reading is idle. Source: an idle lab's own traffic, its nodes' neighbour
	// discovery and the guests' agents (which use virtio-serial, not the lab's links), is at
	// most a few packets per second per node (docs/telemetry.md gives the development
	// reading); 100 pkt/s is well above that and far below any probe's load (a ping probe
	// sends 10 pkt/s per flow and names no bottleneck by itself; iperf3 sends thousands).
	MinBusyPps = 100
	// MinBottleneckCPU is the CPU use (cores) below which no node is called a bottleneck on CPU:
	// 5 % of a core limits no forwarding path; it keeps a busy lab whose functions barely work
	// (the kernel forwards in softirq, charged to no node) from naming one.
	MinBottleneckCPU = 0.05
)

// Rates turns two snapshots taken dt apart into rates per node. A lab or node only in cur
// (just deployed) has zero rates; a counter that went down (a recreated interface) counts as 0.
// Each lab's bottleneck candidate is marked by the rule above (MinBusyPps).
func Rates(prev, cur []Lab, dt time.Duration) []LabRate {
	secs := dt.Seconds()
	if secs <= 0 {
		secs = 1
	}
	before := map[string]*Node{}
	for li := range prev {
		for ni := range prev[li].Nodes {
			before[prev[li].Lab+"\x00"+prev[li].Nodes[ni].Name] = &prev[li].Nodes[ni]
		}
	}
	out := make([]LabRate, 0, len(cur))
	for _, l := range cur {
		lr := LabRate{Lab: l.Lab, Status: l.Status}
		for _, n := range l.Nodes {
			r := NodeRate{Node: n.Name, Role: n.Role, Kind: n.Kind, Chain: n.Chain, CPU: -1, Down: n.Err, Emulated: n.Emulated}
			p := before[l.Lab+"\x00"+n.Name]
			if p != nil {
				r.RxBps, r.TxBps, r.RxPps, r.TxPps, r.Drops = ifaceRates(p, &n, secs)
				if n.CPUErr == "" && p.CPUErr == "" {
					r.CPU = delta(uint64(p.CPU.Total()), uint64(n.CPU.Total())) / 1e9 / secs
				}
			}
			lr.Nodes = append(lr.Nodes, r)
		}
		sort.SliceStable(lr.Nodes, func(i, j int) bool { return lr.Nodes[i].RxBps > lr.Nodes[j].RxBps })
		markBottleneck(lr.Nodes)
		out = append(out, lr)
	}
	return out
}

func ifaceRates(p, n *Node, secs float64) (rxBps, txBps, rxPps, txPps, drops float64) {
	old := map[string]int{}
	for i, ii := range p.Interfaces {
		old[ii.Name] = i
	}
	for _, ii := range n.Interfaces {
		i, ok := old[ii.Name]
		if !ok || p.Interfaces[i].SeenBy != ii.SeenBy { // a VM's guest counted one, its host side the other
			continue
		}
		a, b := p.Interfaces[i].Stats, ii.Stats
		rxBps += delta(a.RxBytes, b.RxBytes) * 8 / secs
		txBps += delta(a.TxBytes, b.TxBytes) * 8 / secs
		rxPps += delta(a.RxPackets, b.RxPackets) / secs
		txPps += delta(a.TxPackets, b.TxPackets) / secs
		drops += (delta(a.RxDropped, b.RxDropped) + delta(a.TxDropped, b.TxDropped)) / secs
	}
	return
}

func delta(a, b uint64) float64 {
	if b < a {
		return 0
	}
	return float64(b - a)
}

// markBottleneck applies the bottleneck rule (MinBusyPps) to one lab's nodes.
func markBottleneck(nodes []NodeRate) {
	busy := func(n NodeRate) bool { return n.RxPps >= MinBusyPps || n.TxPps >= MinBusyPps }
	if !slices.ContainsFunc(nodes, busy) {
		return // an idle reading names no node
	}
	best, reason := -1, ""
	for i, n := range nodes {
		if n.Drops > 0 && (best < 0 || n.Drops > nodes[best].Drops) {
			best, reason = i, "drops"
		}
	}
	if best < 0 {
		for i, n := range nodes {
			if n.Role == "function" && n.RxPps >= MinBusyPps && n.CPU >= MinBottleneckCPU && (best < 0 || n.CPU > nodes[best].CPU) {
				best, reason = i, "cpu"
			}
		}
	}
	if best >= 0 {
		nodes[best].Bottleneck = reason
	}
}
