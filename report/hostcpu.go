package report

import (
	"slices"
	"strconv"
	"strings"

	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/stats"
)

// HostCPURow is one emulated host in one scenario, as study D's mpstat gave it: its cores'
// shares of user, system and softirq time (%, mean over trials; Busy is their sum per trial,
// summarized min/mean/max/std as the study's Table 2), and its nodes' cgroups (cores).
type HostCPURow struct {
	Scenario, Host, Cores  string
	Usr, Sys, Soft         float64
	Busy                   stats.Summary
	NodesUser, NodesSystem float64
	// BusyByTrial is each trial's busy share (usr+sys+soft, %), by trial number.
	BusyByTrial map[int]float64
}

// isHostCPU reports the cpu probe's per-host samples (read by buildHostCPU).
func isHostCPU(x results.Sample) bool {
	return x.Probe == "cpu" && strings.HasPrefix(x.Metric, "host_")
}

// buildHostCPU reads the cpu probe's per-host samples (probe/cpu.Sampler.AddHosts).
func (r *Report) buildHostCPU(samples []results.Sample) {
	type key struct{ scenario, host string }
	type acc struct {
		cores string
		m     map[string]map[int]float64 // metric -> trial -> value
	}
	data := map[key]*acc{}
	var keys []key
	for _, x := range samples {
		if !isHostCPU(x) {
			continue
		}
		k := key{x.Scenario, x.Labels["host"]}
		a := data[k]
		if a == nil {
			a = &acc{cores: x.Labels["cores"], m: map[string]map[int]float64{}}
			data[k] = a
			keys = append(keys, k)
		}
		if a.m[x.Metric] == nil {
			a.m[x.Metric] = map[int]float64{}
		}
		a.m[x.Metric][x.Trial] += x.Value
	}
	order := map[string]int{}
	for i, s := range r.Scenarios {
		order[s] = i
	}
	slices.SortStableFunc(keys, func(a, b key) int {
		if order[a.scenario] != order[b.scenario] {
			return order[a.scenario] - order[b.scenario]
		}
		return strings.Compare(a.host, b.host)
	})
	meanOf := func(m map[int]float64) float64 {
		var xs []float64
		for _, v := range m {
			xs = append(xs, v)
		}
		return mean(xs)
	}
	for _, k := range keys {
		a := data[k]
		var busy []float64
		byTrial := map[int]float64{}
		for t, u := range a.m["host_usr"] {
			busy = append(busy, u+a.m["host_sys"][t]+a.m["host_soft"][t])
			byTrial[t] = busy[len(busy)-1]
		}
		slices.Sort(busy)
		r.HostCPU = append(r.HostCPU, HostCPURow{Scenario: k.scenario, Host: k.host, Cores: a.cores,
			Usr: meanOf(a.m["host_usr"]), Sys: meanOf(a.m["host_sys"]), Soft: meanOf(a.m["host_soft"]), Busy: stats.Summarize(busy),
			NodesUser: meanOf(a.m["host_nodes_user"]), NodesSystem: meanOf(a.m["host_nodes_system"]), BusyByTrial: byTrial})
	}
}

// hostCPUBlocks renders the per-host CPU table.
func (r *Report) hostCPUBlocks() []block {
	if len(r.HostCPU) == 0 {
		return nil
	}
	t := &table{id: "host-cpu", header: []string{"scenario", "host", "cores", "%usr", "%sys", "%soft", "busy % min", "mean", "max", "std", "trials", "nodes user (cores)", "nodes system (cores)"},
		right: []bool{false, false, false, true, true, true, true, true, true, true, true, true, true}}
	f := func(v float64, d int) string { return strconv.FormatFloat(v, 'f', d, 64) }
	for _, x := range r.HostCPU {
		t.rows = append(t.rows, []string{x.Scenario, x.Host, x.Cores, f(x.Usr, 2), f(x.Sys, 2), f(x.Soft, 2),
			f(x.Busy.Min, 2), f(x.Busy.Mean, 2), f(x.Busy.Max, 2), f(x.Busy.Stdev, 2), strconv.Itoa(x.Busy.N), f(x.NodesUser, 3), f(x.NodesSystem, 3)})
	}
	return []block{{para: "CPU per emulated host, as study D's mpstat gave it: the shares of the host's cores' time in user, system and softirq " +
		"(/proc/stat per core over each trial; busy = their sum, summarized over trials as the study's Table 2), and the CPU of the nodes placed on it " +
		"(their cgroups; the rtt probe runs in sfclab's own process on the sender host's cores, so it is in that host's core figures, not its nodes'). " +
		"A host without cores of its own is marked shared: its figures are the whole machine's."}, {table: t}}
}
