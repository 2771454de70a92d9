package cpu_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/cpu"
	"github.com/sfclab/sfclab/results/metric"
)

// memNode is a fakeNode whose memory reads are given in order (the last repeats).
type memNode struct {
	fakeNode
	reads []uint64
}

func (m *memNode) Memory() (uint64, error) {
	v := m.reads[0]
	if len(m.reads) > 1 {
		m.reads = m.reads[1:]
	}
	return v, nil
}

// TestMemorySamples: beside each node's CPU the sampler reports its memory at the span's end
// and the highest reading in the span, for nodes that can say it; others get none.
func TestMemorySamples(t *testing.T) {
	mem := &memNode{reads: []uint64{100 << 20, 300 << 20, 250 << 20, 200 << 20}}
	plain := &fakeNode{}
	env := probe.Env{Node: func(name string) (probe.Node, error) {
		switch name {
		case "proxy":
			return mem, nil
		case "client":
			return plain, nil
		}
		return nil, errors.New("no such node")
	}}
	s, err := cpu.Start(env, []string{"proxy", "client"})
	if err != nil {
		t.Fatal(err)
	}
	s.Track(20 * time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	samples, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, x := range samples {
		if x.Metric != metric.CPUMemory.Metric && x.Metric != metric.CPUMemoryPeak.Metric {
			continue
		}
		if x.Unit != "bytes" || x.Probe != metric.CPU {
			t.Errorf("memory sample %+v", x)
		}
		got[x.Metric+"/"+x.Labels["node"]] = x.Value
	}
	if len(got) != 2 {
		t.Fatalf("memory samples %v, want the proxy's memory and peak only", got)
	}
	if got["memory/proxy"] != 200<<20 || got["memory_peak/proxy"] != 300<<20 {
		t.Errorf("proxy memory %v, want 200 MiB at the end and a 300 MiB peak", got)
	}
	if err := metric.Check(samples); err != nil {
		t.Errorf("the sampler emits outside the vocabulary: %v", err)
	}
}
