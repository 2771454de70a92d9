package studies

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/stats"
)

// ReferenceC cites study C. The shared copy gives no venue or year; it used OpenStack Rocky
// (2018) on CloudLab.
const ReferenceC = `D. Borsatti, G. Davoli, W. Cerroni, C. Contoli, F. Callegati, "Performance of Service Function Chaining on the OpenStack Cloud Platform", University of Bologna (venue and year not in the shared copy; it ran OpenStack Rocky, released 2018, via Devstack on CloudLab)`

// OpenStackSFC is the name of study C's reproduction.
const OpenStackSFC = "openstack-sfc"

// Fig6Scale is how much shorter the Fig. 6 flows (30, 60, 90 s) and the tap flows are in a
// --quick run.
const Fig6Scale = 10

// studyC is study C's data plane: Table I, Table II, Fig. 6 and the tap, on four emulated
// hosts, with the same chains in routed steering on the four hosts and both modes on one
// host beside them.
var studyC = &Study{
	Name:       OpenStackSFC,
	Title:      "C. Service Function Chaining on OpenStack (Borsatti et al.) — data plane on four emulated hosts",
	Experiment: "experiments/openstack-sfc.yaml",
	VMFlag:     "its functions become VMs with --vm (every data-plane scenario, transparent and routed, and the deploy-time lab's functions, as the study's VNFs were; under TCG only with --allow-tcg): run `sfclab reproduce openstack-sfc --vm` (--part data-plane or deploy-time for one part)",
	Published: &report.Published{
		Study:     "C. Service Function Chaining on OpenStack (Borsatti, Davoli, Cerroni, Contoli, Callegati)",
		Source:    "Section V, Fig. 7 and Table II of the paper; OpenStack Rocky with networking-sfc (OVS, MPLS over VXLAN, MTU 1418) on four CloudLab compute nodes with 10 GbE, iperf3 TCP",
		Reference: ReferenceC,
		Rows: []report.PublishedRow{
			{Scenario: "c0", Metric: report.MetricThroughput, Text: "above 8 Gbit/s (Fig. 7)"},
			{Scenario: "c1", Metric: report.MetricThroughput, Value: 7.01, Unit: "Gbit/s"},
			{Scenario: "same-d", Metric: report.MetricThroughput, Value: 3.39, Unit: "Gbit/s"},
			{Scenario: "other", Metric: report.MetricThroughput, Value: 1.99, Unit: "Gbit/s"},
		},
		Notes: []string{
			"Table II: one function between S and D, placed with S 7.01, with D 3.39, on another node 1.99 Gbit/s; with S it is chain C1 of Table I, so c1 carries that figure.",
			"Fig. 7 (C0 to C6) is a bar chart without numbers in the text: only C0 \"above 8 Gbit/s\" and that throughput falls with each function, most with each crossing between nodes.",
			"Fig. 6 (three 3-hop chains sharing v4, UDP 1, 2, 3 Mbit/s for 30, 60, 90 s) is a chart: v4 carries the sum of the three flows, and v1's rate alone in the last 30 s.",
			"The tap: networking-sfc's tap worked only when the tap function ran on the same node as the previous hop of the chain; a copy that had to cross the tunnelling bridge never reached it (missing OpenFlow rules in the version tested).",
			"Placement (Fig. 3 is not in the text; derived from it): S and v1 share a node (C1 adds \"one VNF from the node of S\", Table II's 7.01 is the function with S), D and v6 share another (C2 adds v6), v2 and v4 are on the third and fourth nodes (C3, C4), and v3, v5 sit so that C5 and C6 cross nodes at every hop (\"maximize the number of transitions\"): contr01 S v1 v5, comp02 v2 v3, comp03 v4 v7, comp04 D v6. Where v7 sits is not said; it is put with v4.",
			"Emulated here: the four compute nodes are namespaces on one machine joined by VXLAN over a Linux bridge (no 10 GbE, no OVS, no MPLS; MTU 1450); the functions are one-armed forwarders (direction \"same\") where the study gave its functions a port on the customer and the internal network; chains are not symmetric (networking-sfc's default), so TCP acknowledgements go straight back.",
			"Routed steering on four hosts: the same placement; a segment between two consecutive hops on different hosts crosses in VXLAN, so a packet crosses hosts where the transparent chain's does. Unlike the transparent chains (not symmetric), routed replies (TCP acknowledgements) come back through every function in reverse, crossing the hosts again.",
		},
		Claims: claimsC,
		// The first screen: Table I's chains, Table II's placements and Fig. 6 from this run,
		// the published figures beside them.
		Figures: []report.Figure{
			{Name: "table-1", Metric: report.MetricThroughput, Scenarios: []string{"c0", "c1", "c2", "c3", "c4", "c5", "c6"},
				Title: "Table I: throughput of chains C0 to C6 (transparent steering, 4 emulated hosts)",
				Note:  "Published for Table I's chains (Fig. 7) in numbers: C1 7.01 Gbit/s only; C0 \"above 8 Gbit/s\" and a fall with each function are said in the text."},
			{Name: "table-2", Metric: report.MetricThroughput, Scenarios: []string{"c1", "same-d", "other"},
				Title: "Table II: one function placed with S, with D, on another node"},
			{Name: "fig-6", Metric: report.FigureFlows, Scenarios: []string{"fig6"},
				Note: "Fig. 6 (published as a chart without numbers): v4 carries the sum of the three flows (1 + 2 + 3 Mbit/s), and v1's rate alone in the last 30 s."},
		},
		Modes: &report.ModeTable{
			Title: "Steering modes and placement: Table I's chains",
			Intro: "Every chain of Table I four ways in the same run: transparent steering (networking-sfc's model, tc eBPF) and routed steering (every function the next L3 hop, a segment between hosts carried in VXLAN) with the functions on the four emulated hosts as placed by the study, then the same chains on one host: the transparent lab with every node on one emulated host, and the routed lab with no emulated host. " +
				"Table II's with-D and other-node placements exist only on four hosts; on one host they are C1. One table per placement, each with the paired per-repetition ratio of transparent over routed steering in its last column.",
			Columns: []string{"transparent, 4 hosts", "routed, 4 hosts", "transparent, 1 host", "routed, 1 host"},
			Rows:    modeRows(),
			Ratios:  []report.RatioColumn{{Of: 0, To: 1}, {Of: 2, To: 3}},
			// Four modes with their CIs, two ratios and the TCG marks of --vm make one table
			// twice as wide as a page: one table per placement.
			Panels: []report.ModePanel{
				{Title: "On the four emulated hosts, functions placed as in the study:", Columns: []int{0, 1}, Labels: []string{"transparent", "routed"}},
				{Title: "On one host:", Columns: []int{2, 3}, Labels: []string{"transparent", "routed"}},
			},
		},
	},
	Quick: func(e *experiment.Experiment) {
		e.Repetitions = 2
		e.Warmup.Duration = time.Second
		if p := e.Probes.Iperf3; p != nil {
			p.Duration.Duration = 2 * time.Second
		}
		for _, s := range e.Scenarios {
			if s.Probes == nil || s.Probes.Flows == nil {
				continue
			}
			for i := range s.Probes.Flows.Flows {
				d := &s.Probes.Flows.Flows[i].Duration
				d.Duration = max(time.Second, d.Duration/Fig6Scale)
			}
		}
		e.Reduced = fmt.Sprintf("quick smoke run (--quick): 2 repetitions, iperf3 2 s instead of 10 s, Fig. 6's flows %d times shorter (3, 6, 9 s instead of 30, 60, 90 s) and the tap's flows 1 s", Fig6Scale)
	},
}

// routed4 names the scenario of a case's routed lab on the four emulated hosts (c3 ->
// c3-routed-4hosts): NAME-VARIANT, so the verdict compares it with c0-routed-4hosts.
func routed4(c string) string { return c + "-routed-4hosts" }

// modeRows are the modes table's cases; the scenarios follow its Columns: transparent and
// routed on four hosts, transparent and routed on one host.
func modeRows() []report.ModeRow {
	var rows []report.ModeRow
	for i := 0; i <= 6; i++ {
		c := fmt.Sprintf("c%d", i)
		rows = append(rows, report.ModeRow{Case: fmt.Sprintf("C%d", i), Scenarios: []string{c, routed4(c), c + "-1host", c + "-routed"}})
	}
	return append(rows,
		report.ModeRow{Case: "Table II, with D", Scenarios: []string{"same-d", routed4("same-d"), "", ""}},
		report.ModeRow{Case: "Table II, other node", Scenarios: []string{"other", routed4("other"), "", ""}})
}

// claimsC are study C's own conclusions about its data plane (section V).
var claimsC = []report.Claim{
	{Text: "throughput falls with each function added to the chain (C0 to C6)", Rule: chainTrendRule, Check: chainFalls},
	{Text: "a function with S costs least, with D more, on another node most (Table II: 7.01 > 3.39 > 1.99 Gbit/s)", Rule: "paired per-repetition throughput ratios with S over with D and with D over another node: holds when both 95 % t CIs of the ratios lie above 1, does not hold when either lies below 1; with S over another node alone above 1 holds in direction.", Check: func(r *report.Report) report.ClaimResult {
		s, d, o := meanThroughput(r, "c1"), meanThroughput(r, "same-d"), meanThroughput(r, "other")
		ev := fmt.Sprintf("mean with S (c1) %s, with D %s, other node %s Gbit/s", fix2(s), fix2(d), fix2(o))
		sd, ok1 := r.ModeRatio("c1", "same-d")
		do, ok2 := r.ModeRatio("same-d", "other")
		so, ok3 := r.ModeRatio("c1", "other")
		if !ok1 || !ok2 || !ok3 {
			return report.ClaimResult{Outcome: report.NotShown, Evidence: ev}
		}
		ev += "; with S over with D " + sd.Text() + "; with D over other node " + do.Text()
		switch {
		case sd.Excludes(1) && do.Excludes(1):
			return report.ClaimResult{Outcome: report.Holds, Evidence: ev}
		case sd.Excludes(-1) || do.Excludes(-1):
			return report.ClaimResult{Outcome: report.DoesNotHold, Evidence: ev}
		case so.Excludes(1):
			return report.ClaimResult{Outcome: report.HoldsDirection, Evidence: ev + "; with S is faster than on another node (" + so.Text() + "), the step through D is not shown"}
		}
		return report.ClaimResult{Outcome: report.NotShown, Evidence: ev + "; the CIs include no change"}
	}},
	{Text: "crossing between physical nodes is what costs most (the penalty of C2 to C6)", Rule: "the paired per-repetition throughput ratio of C6 on four emulated hosts over C6 on one host: holds when its 95 % t CI lies below 1, does not hold when above.", Check: func(r *report.Report) report.ClaimResult {
		q, ok := r.ModeRatio("c6", "c6-1host")
		if !ok {
			return report.ClaimResult{Outcome: report.NotShown, Evidence: "no throughput of c6 and c6-1host in this run"}
		}
		ev := "C6 on four hosts over C6 on one host: " + q.Text()
		if q1, ok := r.ModeRatio("c1-1host", "c0-1host"); ok {
			ev += "; one function on one host costs " + q1.Text()
		}
		if qr, ok := r.ModeRatio(routed4("c6"), "c6-routed"); ok {
			ev += "; routed steering, C6 on four hosts over C6 on one host: " + qr.Text()
		}
		switch {
		case q.Excludes(-1):
			return report.ClaimResult{Outcome: report.Holds, Evidence: ev}
		case q.Excludes(1):
			return report.ClaimResult{Outcome: report.DoesNotHold, Evidence: ev}
		}
		return report.ClaimResult{Outcome: report.NotShown, Evidence: ev + "; the CI includes no change"}
	}},
	{Text: "v4, crossed by all three chains, carries their combined traffic (Fig. 6)", Rule: fig6Rule, Check: func(r *report.Report) report.ClaimResult {
		var worst float64
		var parts []string
		n := 0
		for _, w := range r.FlowWindows {
			if w.Scenario != "fig6" {
				continue
			}
			v4, ok := w.Bits["v4"]
			if !ok {
				continue
			}
			sum := w.Bits["v1"] + w.Bits["v2"] + w.Bits["v3"]
			if sum <= 0 || math.IsNaN(sum) || math.IsNaN(v4) {
				continue
			}
			n++
			worst = math.Max(worst, math.Abs(v4-sum)/sum)
			parts = append(parts, fmt.Sprintf("%s-%s s: v4 %s, v1+v2+v3 %s Mbit/s", fix0(w.From), fix0(w.To), fix2(v4/1e6), fix2(sum/1e6)))
		}
		if n == 0 {
			return report.ClaimResult{Outcome: report.NotShown, Evidence: "no Fig. 6 time series in this run"}
		}
		ev := strings.Join(parts, "; ")
		if worst <= fig6Tolerance {
			return report.ClaimResult{Outcome: report.Holds, Evidence: fmt.Sprintf("%s; off by at most %.0f %% (fixed cut-off %.0f %%, see the rule)", ev, worst*100, fig6Tolerance*100)}
		}
		return report.ClaimResult{Outcome: report.DoesNotHold, Evidence: fmt.Sprintf("%s; off by up to %.0f %% (fixed cut-off %.0f %%, see the rule)", ev, worst*100, fig6Tolerance*100)}
	}},
	{Text: "the tap works only when the tap function is on the same node as the previous hop", Rule: tapRule, Check: func(r *report.Report) report.ClaimResult {
		var local, remote *report.TapRow
		for i := range r.Taps {
			t := &r.Taps[i]
			if t.Host == t.PrevHost && local == nil {
				local = t
			}
			if t.Host != t.PrevHost && remote == nil {
				remote = t
			}
		}
		if local == nil || remote == nil {
			return report.ClaimResult{Outcome: report.NotShown, Evidence: "this run lacks a tap on the previous hop's host or one on another host"}
		}
		ev := fmt.Sprintf("on the previous hop's host the tap got %s of what that hop sent, on another host %s", fix3(local.Ratio), fix3(remote.Ratio))
		ev += fmt.Sprintf(" (fixed cut-off: a tap works when it gets more than %.1f of what the hop sent, see the rule)", tapWorks)
		if remote.Ratio > tapWorks {
			return report.ClaimResult{Outcome: report.DoesNotHold, Evidence: ev + ": sfclab's tap sends the copy through the steering tunnel, so this was networking-sfc's limitation (missing rules in its tunnelling bridge), not the model's"}
		}
		if local.Ratio > tapWorks {
			return report.ClaimResult{Outcome: report.Holds, Evidence: ev}
		}
		return report.ClaimResult{Outcome: report.NotShown, Evidence: ev}
	}},
}

// fig6Tolerance is how far v4's rate may be from the sum of v1, v2 and v3 in every window of
// Fig. 6 for v4 to carry their combined traffic. A fixed cut-off, not a test: Fig. 6 is a
// chart without numbers, so the study gives no tolerance; 10 % is sfclab's, above the spread
// of one-second rate meters over a window's full intervals and far below the smallest flow's
// share of the sum (1 of 6 Mbit/s, 17 %), so a flow missing from v4 always fails it.
const fig6Tolerance = 0.10

var fig6Rule = fmt.Sprintf("in every window between flow starts and ends, the gap between v4's mean egress rate and the sum of v1's, v2's and v3's, over that sum, is at most %.0f %%: a fixed cut-off (Fig. 6 is a chart without numbers, so the study gives none); %.0f %% is below the smallest flow's share of the sum (1 of 6 Mbit/s), so a flow missing from v4 fails it.", fig6Tolerance*100, fig6Tolerance*100)

// tapWorks is the share of the previous hop's bytes above which a tap counts as working. A
// fixed cut-off, not a test: the study reports the tap as working or getting nothing at all
// ("never reached it"), so any threshold well between 0 and 1 separates its two outcomes;
// 0.9 allows for packets in flight when the counters are read.
const tapWorks = 0.9

var tapRule = fmt.Sprintf("the tap's received bytes over what the previous hop sent (mean over trials): it works above %.1f, a fixed cut-off (the study reports only works / gets nothing, so any cut-off well between 0 and 1 separates them; %.1f allows for packets in flight when the counters are read). Holds when the tap on the previous hop's host works and the one on another host does not.", tapWorks, tapWorks)

// chainTrendRule is how "falls with each function" is decided.
const chainTrendRule = "Page's trend test (exact, one-sided) of the ordered alternative C0 > C1 > ... > C6 on the per-trial throughput, each repetition a block (its seven chains ranked within it): holds at p < 0.05; does not hold when the rising order is significant (p < 0.05); not shown otherwise. With the repetitions of a run no single step can be tested on its own, so the steps whose mean rose are named but decide nothing."

// chainFalls tests study C's C0..C6 trend by Page's L over the repetitions that measured
// every chain.
func chainFalls(r *report.Report) report.ClaimResult {
	var means []string
	byTrial := map[int][]float64{}
	missing := false
	for i := 0; i <= 6; i++ {
		c := fmt.Sprintf("c%d", i)
		means = append(means, fix2(meanThroughput(r, c)))
		found := false
		for _, row := range r.Throughput {
			if row.Scenario != c {
				continue
			}
			found = true
			for j, t := range row.Trials {
				if len(byTrial[t]) == i {
					byTrial[t] = append(byTrial[t], row.Gbits[j])
				}
			}
		}
		missing = missing || !found
	}
	ev := "mean Gbit/s C0..C6 (4 hosts): " + strings.Join(means, ", ")
	var down, up [][]float64
	var trials []int
	for t, v := range byTrial {
		if len(v) == 7 {
			trials = append(trials, t)
		}
	}
	sort.Ints(trials)
	for _, t := range trials {
		neg := make([]float64, 7)
		for i, v := range byTrial[t] {
			neg[i] = -v
		}
		down, up = append(down, neg), append(up, byTrial[t])
	}
	if missing || len(down) == 0 {
		return report.ClaimResult{Outcome: report.NotShown, Evidence: ev + "; not every chain was measured in one repetition"}
	}
	var rose []string
	for i := 1; i <= 6; i++ {
		a, b := meanThroughput(r, fmt.Sprintf("c%d", i-1)), meanThroughput(r, fmt.Sprintf("c%d", i))
		if b >= a {
			rose = append(rose, fmt.Sprintf("C%d to C%d", i-1, i))
		}
	}
	fall, err1 := stats.PageTrend(down)
	rise, err2 := stats.PageTrend(up)
	if err := errors.Join(err1, err2); err != nil {
		return report.ClaimResult{Outcome: report.NotShown, Evidence: ev + "; no Page's trend test: " + err.Error()}
	}
	ev += fmt.Sprintf("; Page's trend test over %d repetitions: L = %.0f for a fall, one-sided %s", len(down), fall.Statistic, pText(fall.PValue))
	if len(rose) > 0 {
		ev += "; the mean rose from " + strings.Join(rose, ", ") + " (a single step is not tested)"
	} else {
		ev += "; every step's mean fell (a single step is not tested)"
	}
	switch {
	case fall.PValue < 0.05:
		return report.ClaimResult{Outcome: report.Holds, Evidence: ev}
	case rise.PValue < 0.05:
		return report.ClaimResult{Outcome: report.DoesNotHold, Evidence: ev + fmt.Sprintf("; the rising order is significant, %s", pText(rise.PValue))}
	}
	return report.ClaimResult{Outcome: report.NotShown, Evidence: ev}
}

func meanThroughput(r *report.Report, s string) float64 {
	for _, row := range r.Throughput {
		if row.Scenario == s && len(row.Gbits) > 0 {
			return row.Summary.Mean
		}
	}
	return math.NaN()
}

func fix2(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", v)
}

func fix0(v float64) string { return fmt.Sprintf("%.0f", v) }
