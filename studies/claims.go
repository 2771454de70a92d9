package studies

import (
	"fmt"
	"math"

	"github.com/sfclab/sfclab/report"
)

// claimsA are study A's own conclusions (its abstract and section 4).
var claimsA = []report.Claim{
	{Text: "adding the L3 firewall reduces throughput by about 33 %", Check: func(r *report.Report) report.ClaimResult {
		return throughputDrop(r, "1-vnf", 0.67)
	}},
	{Text: "adding the L4 load balancer reduces throughput by about 92 %", Check: func(r *report.Report) report.ClaimResult {
		return throughputDrop(r, "2-vnf", 0.08)
	}},
	{Text: "the L3 firewall nearly doubles latency", Check: func(r *report.Report) report.ClaimResult {
		q, ok := r.LatencyRatio(report.MetricPingRTT, "1-vnf")
		if !ok {
			return report.ClaimResult{Outcome: report.NotShown, Evidence: "no ping RTT of 1-vnf and the baseline in this run"}
		}
		switch {
		case q.Excludes(1) && q.Low <= 2 && q.High >= 1.6:
			return report.ClaimResult{Outcome: report.Holds, Evidence: "ping RTT " + q.Text()}
		case q.Excludes(1):
			return report.ClaimResult{Outcome: report.HoldsDirection, Evidence: "ping RTT " + q.Text() + "; published 1.99×"}
		case q.Excludes(-1):
			return report.ClaimResult{Outcome: report.DoesNotHold, Evidence: "ping RTT " + q.Text()}
		}
		return report.ClaimResult{Outcome: report.NotShown, Evidence: "ping RTT " + q.Text() + "; the CI includes no change"}
	}},
	{Text: "the kernel-space firewall adds almost no CPU of its own", Check: func(r *report.Report) report.ClaimResult {
		row, ok := r.CPUOf("1-vnf", "fw")
		if !ok {
			return report.ClaimResult{Outcome: report.NotShown, Evidence: "no CPU figure of fw in 1-vnf"}
		}
		ev := fmt.Sprintf("fw's own cgroup used %s cores (95 %% CI upper bound %s) in 1-vnf; its forwarding runs in softirq, which the host softirq row counts and which can land in any node's cgroup on this kernel", fix3(row.Total.Mean), fix3(row.Total.CI95High))
		if row.Total.Mean < 0.05 {
			return report.ClaimResult{Outcome: report.Holds, Evidence: ev}
		}
		return report.ClaimResult{Outcome: report.DoesNotHold, Evidence: ev}
	}},
	{Text: "the user-space L4 load balancer is the bottleneck (the main source of CPU saturation)", Check: func(r *report.Report) report.ClaimResult {
		b, ok := r.BusiestNode("2-vnf")
		if !ok {
			return report.ClaimResult{Outcome: report.NotShown, Evidence: "no CPU figures of 2-vnf"}
		}
		ev := fmt.Sprintf("the busiest node of 2-vnf is %s with %s cores", b.Node, fix3(b.Total.Mean))
		if q, ok := r.ThroughputRatio("2-vnf"); ok {
			ev += "; 2-vnf throughput " + q.Text()
		}
		if b.Node == "lb" {
			return report.ClaimResult{Outcome: report.Holds, Evidence: ev}
		}
		return report.ClaimResult{Outcome: report.DoesNotHold, Evidence: ev}
	}},
}

// throughputDrop checks a published throughput drop to about published×
// the baseline's.
func throughputDrop(r *report.Report, s string, published float64) report.ClaimResult {
	q, ok := r.ThroughputRatio(s)
	if !ok {
		return report.ClaimResult{Outcome: report.NotShown, Evidence: "no throughput of " + s + " and the baseline in this run"}
	}
	ev := "throughput " + q.Text() + fmt.Sprintf("; published %.2f×", published)
	switch {
	case !q.Excludes(-1) && q.Excludes(1):
		return report.ClaimResult{Outcome: report.DoesNotHold, Evidence: ev}
	case !q.Excludes(-1):
		return report.ClaimResult{Outcome: report.NotShown, Evidence: ev + "; the CI includes no change"}
	case q.Low <= published*1.25 && q.High >= published*0.8:
		return report.ClaimResult{Outcome: report.Holds, Evidence: ev}
	}
	return report.ClaimResult{Outcome: report.HoldsDirection, Evidence: ev}
}

// claimsB are study B's own conclusions (its slides' conclusion).
var claimsB = []report.Claim{
	{Text: "Docker adds little over native Linux (the published overheads are at most +23 % per cell, most below +10 %)", Check: dockerAddsLittle},
	{Text: "KVM costs much more than Docker", Check: func(*report.Report) report.ClaimResult {
		return report.ClaimResult{Outcome: report.NotShown, Evidence: "sfclab has no VM runtime, so KVM is not measured"}
	}},
}

// littleOverhead is what "little" is taken to mean for study B's Docker claim: at most 1.25×
// native's time per cell, just above the largest published overhead (+23 %).
const littleOverhead = 1.25

// dockerAddsLittle checks study B's Docker claim cell by cell, on each Docker cell's paired
// ratio to its native baseline over the repetitions: it does not hold when some cell's 95 % CI
// lies wholly above littleOverhead, holds when every cell's CI lies at or below it, and is not
// shown otherwise (a point estimate alone decides nothing).
func dockerAddsLittle(r *report.Report) report.ClaimResult {
	type cell struct {
		name string
		q    report.Ratio
	}
	var over, open []cell
	n := 0
	var worst *cell
	for _, row := range r.HTTP {
		if row.IsBaseline || r.Runtimes[row.Scenario] != "docker" || r.Runtimes[row.Baseline] == "docker" {
			continue
		}
		q, ok := r.HTTPRatio(row)
		if !ok || math.IsNaN(q.Value) {
			continue
		}
		n++
		c := cell{fmt.Sprintf("%s, %s objects at concurrency %d", row.Scenario, row.Object, row.Concurrency), q}
		if worst == nil || q.Value > worst.q.Value {
			worst = &c
		}
		switch {
		case q.Pairs >= 2 && !math.IsNaN(q.Low) && q.Low > littleOverhead:
			over = append(over, c)
		case q.Pairs < 2 || math.IsNaN(q.High) || q.High > littleOverhead:
			open = append(open, c)
		}
	}
	if n == 0 {
		return report.ClaimResult{Outcome: report.NotShown, Evidence: "no Docker cell with a native baseline in this run"}
	}
	lim := fmt.Sprintf("%.2f", littleOverhead)
	if len(over) > 0 {
		top := over[0]
		for _, c := range over[1:] {
			if c.q.Low > top.q.Low {
				top = c
			}
		}
		return report.ClaimResult{Outcome: report.DoesNotHold, Evidence: fmt.Sprintf(
			"%d of %d Docker cells took more than %s× native's time with the 95 %% CI of the paired ratio wholly above %s× (each CI is one-sided wrong 2.5 %% of the time, so chance alone would put about %.1f of %d cells there); the clearest: %s, %s; see the notes on where Docker's per-request time goes",
			len(over), n, lim, lim, 0.025*float64(n), n, top.name, top.q.Text())}
	}
	if len(open) == 0 {
		return report.ClaimResult{Outcome: report.Holds, Evidence: fmt.Sprintf(
			"every one of %d Docker cells took at most %s× native's time (each 95 %% CI of the paired ratio at or below %s×); the largest: %s, %s",
			n, lim, lim, worst.name, worst.q.Text())}
	}
	return report.ClaimResult{Outcome: report.NotShown, Evidence: fmt.Sprintf(
		"no Docker cell's 95 %% CI lies wholly above %s× native's time, but %d of %d reach beyond it, so this run cannot tell; the largest estimate: %s, %s; more repetitions narrow the CIs",
		lim, len(open), n, worst.name, worst.q.Text())}
}

func fix3(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", v)
}
