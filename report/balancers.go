package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// EnvBalancers is the run environment key naming each scenario's load balancer:
// "SCENARIO=NODE:IMPL" joined by ";", IMPL one of the Balancer* names. The bench runner writes
// it from the scenarios' plans.
const EnvBalancers = "balancers"

// Load balancer implementations as the report names them.
const (
	BalancerHAProxy       = "haproxy"
	BalancerHAProxySplice = "haproxy-splice"
	BalancerSfclab        = "sfclab"
	BalancerNft           = "nft"
)

// terminating reports whether an implementation terminates TCP (a proxy with two sockets per
// connection), so its bytes pass a copy path.
func terminating(impl string) bool { return impl != BalancerNft }

// BalancerRow is the throughput and CPU cost of one scenario's load balancer.
type BalancerRow struct {
	Scenario, Node, Impl string
	// Gbits is the scenario's mean throughput.
	Gbits float64
	// Cores is the balancer node's mean CPU (user+system); NaN without CPU samples.
	Cores float64
	// PerGbit is Cores / Gbits: the cost of the balancer's copy path per Gbit/s moved.
	PerGbit float64
}

// ParseBalancers reads EnvBalancers: scenario -> node and implementation.
func ParseBalancers(v string) map[string][2]string {
	out := map[string][2]string{}
	for _, item := range strings.Split(v, ";") {
		s, rest, ok := strings.Cut(item, "=")
		node, impl, ok2 := strings.Cut(rest, ":")
		if ok && ok2 && s != "" {
			out[s] = [2]string{node, impl}
		}
	}
	return out
}

// Balancers returns one row per scenario that has a load balancer, in display order, from the
// throughput and CPU tables.
func (r *Report) Balancers() []BalancerRow {
	lbs := ParseBalancers(r.Run.Env[EnvBalancers])
	var rows []BalancerRow
	for _, s := range r.Scenarios {
		b, ok := lbs[s]
		if !ok {
			continue
		}
		row := BalancerRow{Scenario: s, Node: b[0], Impl: b[1], Gbits: math.NaN(), Cores: math.NaN(), PerGbit: math.NaN()}
		for _, t := range r.Throughput {
			if t.Scenario == s && t.Summary.N > 0 {
				row.Gbits = t.Summary.Mean
			}
		}
		for _, c := range r.CPU {
			if c.Scenario == s && c.Node == b[0] && c.Total.N > 0 {
				row.Cores = c.Total.Mean
			}
		}
		// A kernel balancer's work is in softirq, not its node: no copy path to price.
		if row.Gbits > 0 && terminating(row.Impl) {
			row.PerGbit = row.Cores / row.Gbits
		}
		rows = append(rows, row)
	}
	return rows
}

// balancerSection compares the scenarios' load balancers: which terminating one moved the
// most, and what each costs per Gbit/s; ok is false when the run has none.
func (r *Report) balancerSection() (section, bool) {
	rows := r.Balancers()
	if len(rows) == 0 {
		return section{}, false
	}
	sec := section{id: "balancers", title: "Load balancers", level: 2}
	t := &table{id: "balancers-table", header: []string{"scenario", "balancer", "terminates TCP", "mean Gbit/s", "balancer cores", "cores per Gbit/s"},
		right: []bool{false, false, false, true, true, true}}
	for _, row := range rows {
		term := "no"
		if terminating(row.Impl) {
			term = "yes"
		}
		t.rows = append(t.rows, []string{r.ScenarioLabel(row.Scenario), row.Impl, term, f2(row.Gbits), f2(row.Cores), f3(row.PerGbit)})
	}
	sec.blocks = append(sec.blocks, block{table: t})
	// The fastest is picked among the scenarios on a real CPU when there are any; a balancer in a
	// VM under TCG is set only against others under TCG (an emulated CPU's speed says nothing
	// about a real one's).
	var term, emulated []BalancerRow
	for _, row := range rows {
		if terminating(row.Impl) && !math.IsNaN(row.Gbits) {
			term = append(term, row)
			if r.Emulated(row.Scenario) {
				emulated = append(emulated, row)
			}
		}
	}
	if len(emulated) < len(term) {
		term = slices.DeleteFunc(term, func(row BalancerRow) bool { return r.Emulated(row.Scenario) })
	}
	if len(term) > 0 {
		best := slices.MaxFunc(term, func(a, b BalancerRow) int { return cmp.Compare(a.Gbits, b.Gbits) })
		text := fmt.Sprintf("Fastest terminating balancer: %s (%s, %s Gbit/s).", best.Impl, r.ScenarioLabel(best.Scenario), f2(best.Gbits))
		for _, row := range term {
			if row.Scenario != best.Scenario && row.Gbits > 0 {
				text += fmt.Sprintf(" %s moved %s of %s's throughput (%s).", best.Impl, fixed(best.Gbits/row.Gbits, 2)+"x", row.Impl, row.Scenario)
			}
		}
		if len(emulated) > 0 && len(emulated) < len(rows) && !r.Emulated(best.Scenario) {
			var names []string
			for _, row := range emulated {
				names = append(names, row.Scenario)
			}
			text += fmt.Sprintf(" %s ran in VMs under TCG (%s): not compared with the others.", strings.Join(names, ", "), EmulatedMark)
		}
		sec.blocks = append(sec.blocks, block{para: text, strong: true})
	}
	sec.blocks = append(sec.blocks, block{para: "balancer cores: the balancer node's own CPU (user + system, 1.0 = one core) " +
		"during the throughput probe, mean over trials; cores per Gbit/s: that divided by the scenario's mean throughput, " +
		"the cost of its copy path. A kernel balancer (nft) forwards in softirq, outside its node's cgroup."})
	return sec, true
}
