package cpu

import (
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/results/metric"
)

// MemoryNode is a node that can say how much memory its processes use now, in bytes: an
// optional capability of probe.Node. The sampler reads it beside the CPU counters of every
// snapshot and reports, per node, the reading at the span's end (cpu/memory) and the highest
// reading inside the span (cpu/memory_peak).
type MemoryNode interface {
	Memory() (uint64, error)
}

// memReading is one node's memory in one snapshot; ok is false when the node has no
// MemoryNode capability or the read failed.
type memReading struct {
	bytes uint64
	ok    bool
}

// readMemory reads the memory of every node that has the capability.
func (s *Sampler) readMemory() []memReading {
	out := make([]memReading, len(s.nodes))
	for i, n := range s.nodes {
		if m, ok := n.(MemoryNode); ok {
			if v, err := m.Memory(); err == nil {
				out[i] = memReading{v, true}
			}
		}
	}
	return out
}

// memorySamples are the memory samples of the span from a to b: per node with a reading at
// b, that reading and the highest of the snapshots from a to b.
func (s *Sampler) memorySamples(a, b snapshot, hostOf map[string]string) []results.Sample {
	var out []results.Sample
	all := append([]snapshot{s.first}, s.snaps...)
	for i, name := range s.names {
		if i >= len(b.mem) || !b.mem[i].ok {
			continue
		}
		peak := b.mem[i].bytes
		for _, sn := range all {
			if sn.t.Before(a.t) || sn.t.After(b.t) || i >= len(sn.mem) || !sn.mem[i].ok {
				continue
			}
			peak = max(peak, sn.mem[i].bytes)
		}
		for _, x := range []struct {
			d metric.Def
			v uint64
		}{{metric.CPUMemory, b.mem[i].bytes}, {metric.CPUMemoryPeak, peak}} {
			l := map[string]string{"node": name}
			if h := hostOf[name]; h != "" {
				l["host"] = h
			}
			smp := x.d.Sample(float64(x.v), l)
			smp.Time = b.t
			out = append(out, smp)
		}
	}
	return out
}
