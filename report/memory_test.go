package report

import (
	"math"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/results/metric"
)

// TestMemorySection: the memory unit reads the sampler's memory samples (failed trials left
// out) into one row per scenario and node, shown after the CPU section, and nothing of them
// lands in the notes.
func TestMemorySection(t *testing.T) {
	in := sampleInput()
	add := func(sc string, trial int, d metric.Def, mibs float64) {
		x := d.Sample(mibs*mib, map[string]string{"node": "lb"})
		x.Scenario, x.Trial, x.Experiment = sc, trial, exp
		in.Samples = append(in.Samples, x)
	}
	for trial, v := range []float64{40, 44, 42} {
		add("fw-lb", trial+1, metric.CPUMemory, v)
		add("fw-lb", trial+1, metric.CPUMemoryPeak, v+10)
	}
	add("fw", 2, metric.CPUMemory, 999) // fw trial 2 failed
	add("fw", 2, metric.CPUMemoryPeak, 999)
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	rows := r.Memory()
	if len(rows) != 1 || rows[0].Scenario != "fw-lb" || rows[0].Node != "lb" || rows[0].End.N != 3 ||
		math.Abs(rows[0].End.Mean-42) > 1e-9 || rows[0].Peak != 54 {
		t.Fatalf("memory rows %+v, want fw-lb/lb: 3 trials, mean 42 MiB, peak 54 MiB", rows)
	}
	md := renderMarkdown(t, r)
	m := md.String()
	cpu, mem := strings.Index(m, "\n## CPU\n"), strings.Index(m, "\n## Memory\n")
	if cpu < 0 || mem < cpu || !strings.Contains(m, "| fw-lb | lb | 3 | 42.00 |") {
		t.Errorf("no memory section after the CPU section:\n%s", m)
	}
	if strings.Contains(strings.Join(r.Notes, "\n"), "memory") {
		t.Errorf("memory samples noted as unread: %q", r.Notes)
	}
}
