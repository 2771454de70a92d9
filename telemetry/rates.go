package telemetry

import (
	"sort"
	"time"
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
}

// LabRate is one lab's nodes over an interval, busiest (highest receive rate) first.
type LabRate struct {
	Lab    string
	Status string
	Nodes  []NodeRate
}

// MinBottleneckCPU is the CPU use (cores) below which no node is called a bottleneck on CPU
// alone: an idle lab has none.
const MinBottleneckCPU = 0.05

// Rates turns two snapshots taken dt apart into rates per node. A lab or node only in cur
// (just deployed) has zero rates; a counter that went down (a recreated interface) counts as 0.
// The bottleneck candidate of each lab is the node dropping the most packets, or else the
// function using the most CPU (at least MinBottleneckCPU).
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
			r := NodeRate{Node: n.Name, Role: n.Role, Kind: n.Kind, Chain: n.Chain, CPU: -1, Down: n.Err}
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

func markBottleneck(nodes []NodeRate) {
	best, reason := -1, ""
	for i, n := range nodes {
		if n.Drops > 0 && (best < 0 || reason != "drops" || n.Drops > nodes[best].Drops) {
			best, reason = i, "drops"
		}
	}
	if best < 0 {
		for i, n := range nodes {
			if n.Role == "function" && n.CPU >= MinBottleneckCPU && (best < 0 || n.CPU > nodes[best].CPU) {
				best, reason = i, "cpu"
			}
		}
	}
	if best >= 0 {
		nodes[best].Bottleneck = reason
	}
}
