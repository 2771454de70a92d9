package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/sfclab/sfclab/stats"
)

// CPURow is the CPU use of one node in one scenario, in cores, over trials.
type CPURow struct {
	// Scenario is the scenario of the row.
	Scenario string
	// Node is the node (label node of the samples).
	Node string
	// User summarises the per-trial user CPU time.
	User stats.Summary
	// System summarises the per-trial system CPU time.
	System stats.Summary
	// Total summarises the per-trial user+system time, over the trials
	// that have both.
	Total stats.Summary
	// TotalByTrial is each trial's user+system time, by trial number (for paired tests).
	TotalByTrial map[int]float64
	// Docker summarises the per-trial CPU % `docker stats` computed for the
	// node (100 % = one core busy); N == 0 without cpu/docker_cpu_percent
	// samples.
	Docker stats.Summary
}

// SoftirqRow is the host softirq time of one scenario, in cores, over
// trials.
type SoftirqRow struct {
	// Scenario is the scenario of the row.
	Scenario string
	// Softirq summarises the per-trial host softirq time.
	Softirq stats.Summary
}

func (r *Report) buildCPU(c *collected) {
	r.CPUWindow = stats.Summarize(c.cpuWindow)
	for _, s := range r.Scenarios {
		for _, node := range c.nodes[s] {
			m := c.cpu[s][node]
			row := CPURow{Scenario: s, Node: node}
			_, user := m[MetricCPUUser].means()
			_, sys := m[MetricCPUSystem].means()
			row.User = stats.Summarize(user)
			row.System = stats.Summarize(sys)
			var total []float64
			row.TotalByTrial = map[int]float64{}
			for _, t := range sortedKeys(m[MetricCPUUser]) {
				if vs := m[MetricCPUSystem][t]; len(vs) > 0 {
					total = append(total, mean(m[MetricCPUUser][t])+mean(vs))
					row.TotalByTrial[t] = total[len(total)-1]
				}
			}
			row.Total = stats.Summarize(total)
			_, docker := m[MetricDockerCPU].means()
			row.Docker = stats.Summarize(docker)
			r.CPU = append(r.CPU, row)
		}
		if pt := c.softirq[s]; len(pt) > 0 {
			_, v := pt.means()
			r.Softirq = append(r.Softirq, SoftirqRow{Scenario: s, Softirq: stats.Summarize(v)})
		}
	}
	for _, s := range r.Scenarios {
		if f := r.cpuFinding(s); f != "" {
			r.CPUFindings = append(r.CPUFindings, f)
		}
	}
}

// idleCores is the CPU use below which a node counts as idle in its own
// cgroup (it prints as 0.00 cores).
const idleCores = 0.005

// cpuFinding says in one sentence where the cycles of scenario s went.
func (r *Report) cpuFinding(s string) string {
	var nodes []CPURow
	for _, row := range r.CPU {
		if row.Scenario == s && row.Total.N > 0 {
			nodes = append(nodes, row)
		}
	}
	soft := math.NaN()
	for _, row := range r.Softirq {
		if row.Scenario == s && row.Softirq.N > 0 {
			soft = row.Softirq.Mean
		}
	}
	if len(nodes) == 0 && math.IsNaN(soft) {
		return ""
	}
	thr := ""
	for _, row := range r.Throughput {
		if row.Scenario == s && row.Summary.N > 0 {
			thr = fmt.Sprintf(" at %s Gbit/s", f2(row.Summary.Mean))
		}
	}
	// Busiest first; ties keep the order of appearance.
	slices.SortStableFunc(nodes, func(a, b CPURow) int { return cmp.Compare(b.Total.Mean, a.Total.Mean) })
	var parts []string
	softNamed := false
	for i, n := range nodes {
		desc := fmt.Sprintf("%s %s cores (%s user, %s system)", n.Node, f2(n.Total.Mean), f2(n.User.Mean), f2(n.System.Mean))
		switch {
		case i == 0 && n.Total.Mean >= idleCores:
			desc += thr + ", the busiest node"
			if math.IsNaN(soft) || soft <= n.Total.Mean {
				desc += " and the bottleneck candidate"
			}
		case n.Total.Mean < idleCores && !math.IsNaN(soft) && soft >= idleCores:
			desc = fmt.Sprintf("%s %s cores in its own cgroup — its forwarding runs in host softirq (%s cores)",
				n.Node, f2(n.Total.Mean), f2(soft))
			softNamed = true
		case n.Total.Mean < idleCores:
			desc = fmt.Sprintf("%s %s cores in its own cgroup", n.Node, f2(n.Total.Mean))
		}
		parts = append(parts, desc)
	}
	if !math.IsNaN(soft) {
		switch {
		case len(nodes) == 0:
			parts = append(parts, fmt.Sprintf("host softirq %s cores%s (no per-node figures)", f2(soft), thr))
		case soft > nodes[0].Total.Mean:
			parts = append(parts, fmt.Sprintf("host softirq %s cores, more than any node's cgroup (the two can count the same ticks, see above): kernel packet processing is the bottleneck candidate", f2(soft)))
		case !softNamed:
			parts = append(parts, fmt.Sprintf("host softirq %s cores", f2(soft)))
		}
	}
	return r.ScenarioLabel(s) + ": " + strings.Join(parts, "; ") + "."
}
