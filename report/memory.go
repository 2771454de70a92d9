package report

import (
	"strconv"

	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/results/metric"
	"github.com/sfclab/sfclab/stats"
)

// MemoryRow is the memory of one node in one scenario, over trials, in MiB.
type MemoryRow struct {
	Scenario, Node string
	// End summarises the node's memory at the end of each trial's CPU window (cpu/memory).
	End stats.Summary
	// Peak is the highest reading of any trial (cpu/memory_peak).
	Peak float64
}

// memoryUnit is the report's memory section: the cpu sampler's cpu/memory and
// cpu/memory_peak per node.
type memoryUnit struct {
	rows []MemoryRow
}

func (*memoryUnit) reads(x results.Sample) bool {
	return x.Probe == metric.CPU && (x.Metric == metric.CPUMemory.Metric || x.Metric == metric.CPUMemoryPeak.Metric)
}

func (*memoryUnit) after() string { return "cpu" }

const mib = 1 << 20

func (u *memoryUnit) build(r *Report, samples []results.Sample) {
	type key struct{ scenario, node string }
	end := map[key]perTrial{}
	peak := map[key]float64{}
	var order []key
	for _, x := range samples {
		k := key{x.Scenario, x.Labels["node"]}
		if _, ok := end[k]; !ok {
			end[k] = perTrial{}
			order = append(order, k)
		}
		if x.Metric == metric.CPUMemory.Metric {
			end[k].add(x.Trial, x.Value/mib)
		} else {
			peak[k] = max(peak[k], x.Value/mib)
		}
	}
	for _, s := range r.Scenarios {
		for _, k := range order {
			if k.scenario != s {
				continue
			}
			_, means := end[k].means()
			u.rows = append(u.rows, MemoryRow{Scenario: s, Node: k.node, End: stats.Summarize(means), Peak: peak[k]})
		}
	}
}

func (u *memoryUnit) sections(r *Report) []section {
	if len(u.rows) == 0 {
		return nil
	}
	t := &table{id: "memory-table", header: []string{"scenario", "node", "trials", "memory MiB", "95 % CI MiB", "peak MiB"},
		right: []bool{false, false, true, true, true, true}}
	for _, row := range u.rows {
		t.rows = append(t.rows, []string{r.ScenarioLabel(row.Scenario), row.Node, strconv.Itoa(row.End.N), f2(row.End.Mean),
			ciRange(row.End.CI95Low, row.End.CI95High, 2), f2(row.Peak)})
	}
	return []section{{id: "memory", title: "Memory", level: 2, blocks: []block{{table: t}, {para: "memory: a node's memory at the end of the CPU window, " +
		"mean over trials with its Student t 95 % CI: its cgroup's memory less inactive file cache where the node's group has a memory controller " +
		"(as docker stats counts it), else the resident memory of its processes; peak: the highest reading of any trial (the sampler reads at the window's start and end, and every 100 ms while it tracks an iperf3 transfer)."}}}}
}

// Memory returns the memory rows (one per scenario and node with memory samples).
func (r *Report) Memory() []MemoryRow {
	for _, u := range r.units {
		if m, ok := u.(*memoryUnit); ok {
			return m.rows
		}
	}
	return nil
}
