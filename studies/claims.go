package studies

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/stats"
)

// claimsA are study A's own conclusions (its abstract and section 4).
var claimsA = []report.Claim{
	{Text: "adding the L3 firewall reduces throughput by about 33 %", Rule: aboutDropRule(0.332), Check: func(r *report.Report) report.ClaimResult {
		return throughputDrop(r, "1-vnf", 0.332)
	}},
	{Text: "adding the L4 load balancer reduces throughput by about 92 %", Rule: aboutDropRule(0.92), Check: func(r *report.Report) report.ClaimResult {
		return throughputDrop(r, "2-vnf", 0.92)
	}},
	{Text: "the L3 firewall nearly doubles latency", Rule: nearlyDoublesRule, Check: nearlyDoubles},
	{Text: "the kernel-space firewall adds almost no CPU of its own", Rule: firewallCPURule, Check: firewallCPU},
	{Text: "the user-space L4 load balancer is the bottleneck (the main source of CPU saturation)", Rule: "the load balancer is the node with the most CPU (user+system of its own cgroup) in 2-vnf, told apart from every other node by a paired t-test per trial: the 95 % CI of the per-trial difference lies above 0 (one-sided level 2.5 %); the study's own basis is the same comparison, HAProxy's 118.42 % against the firewall's 0.01 % in docker stats.", Check: func(r *report.Report) report.ClaimResult {
		l, ok := r.Bottleneck("2-vnf")
		if !ok {
			return report.ClaimResult{Outcome: report.NotShown, Evidence: "no CPU figures of 2-vnf" + notRunText(r, "2-vnf")}
		}
		ev := "in 2-vnf " + l.Text()
		if q, ok := r.ThroughputRatio("2-vnf"); ok {
			ev += "; 2-vnf throughput " + q.Text()
		}
		switch {
		case l.Busiest.Node == "lb" && l.Leads():
			return report.ClaimResult{Outcome: report.Holds, Evidence: ev}
		case l.Busiest.Node != "lb" && l.Leads():
			return report.ClaimResult{Outcome: report.DoesNotHold, Evidence: ev + "; the load balancer is not the busiest node"}
		}
		return report.ClaimResult{Outcome: report.NotShown, Evidence: ev + "; the busiest node is not told apart from the next by the paired test"}
	}},
}

// aboutPoints is how far "about X %" reaches for study A's throughput drops: ±10 percentage
// points of D_th. The paper gives means of 3 runs without a spread, so no margin can be
// derived from it; this is sfclab's reading of "about", wide enough for the paper's own
// rounding (33.2 % written "about 33 %") and narrow enough that a drop of a clearly other
// size (22 % against 33 %) does not count as the same.
const aboutPoints = 0.10

func aboutDropRule(published float64) string {
	lo, hi := math.Max(0, published-aboutPoints), math.Min(1, published+aboutPoints)
	return fmt.Sprintf("equivalence by two one-sided t-tests (TOST, level 0.05) on the per-repetition log ratios of throughput to the baseline's: the ratio lies inside [%.2f, %.2f], i.e. D_th within ±%.0f percentage points of the published %.1f %% (sfclab's reading of \"about\": the paper gives no spread); the same as the 90 %% CI of the ratio lying inside that band. A ratio whose 95 %% CI excludes 1 downwards but lies wholly outside the band holds in direction, not in size.",
		1-hi, 1-lo, aboutPoints*100, published*100)
}

// throughputDrop checks a published throughput drop (a fraction: 0.332 for D_th 33.2 %) by
// TOST against the band ±aboutPoints around it.
func throughputDrop(r *report.Report, s string, published float64) report.ClaimResult {
	q, ok := r.ThroughputRatio(s)
	if !ok {
		return report.ClaimResult{Outcome: report.NotShown, Evidence: "no throughput of " + s + " and the baseline in this run" + notRunText(r, s)}
	}
	lo, hi := 1-math.Min(1, published+aboutPoints), 1-math.Max(0, published-aboutPoints)
	ev := "throughput " + q.Text() + fmt.Sprintf("; published %.2f× (D_th %.1f %%)", 1-published, published*100)
	return equivalentOrNot(q, lo, hi, ev, -1)
}

// equivalentOrNot decides a claim of an effect of a published size in direction dir (-1 a
// fall, +1 a rise) on a paired ratio: Holds when TOST shows the ratio inside (lo, hi);
// DoesNotHold when the 95 % CI excludes no change in the other direction; HoldsDirection when
// it excludes no change in direction dir and lies wholly outside the band; NotShown otherwise.
func equivalentOrNot(q report.Ratio, lo, hi float64, ev string, dir int) report.ClaimResult {
	band := fmt.Sprintf("[%s, %s]", fix2(lo), fix2(hi))
	e, err := q.Equivalent(lo, hi)
	if err != nil {
		return report.ClaimResult{Outcome: report.NotShown, Evidence: ev + "; no equivalence test: " + err.Error()}
	}
	tost := fmt.Sprintf("TOST against %s: %s", band, pText(e.P))
	switch {
	case e.P < 0.05:
		return report.ClaimResult{Outcome: report.Holds, Evidence: ev + "; " + tost}
	case q.Excludes(-dir):
		return report.ClaimResult{Outcome: report.DoesNotHold, Evidence: ev + "; the CI excludes no change in the other direction"}
	case q.Excludes(dir) && (q.High < lo || q.Low > hi):
		return report.ClaimResult{Outcome: report.HoldsDirection, Evidence: ev + "; the 95 % CI lies wholly outside " + band + "; " + tost}
	case q.Excludes(dir):
		return report.ClaimResult{Outcome: report.NotShown, Evidence: ev + "; the change goes the published way, but its size is not shown to be the published one (" + tost + ")"}
	}
	return report.ClaimResult{Outcome: report.NotShown, Evidence: ev + "; the CI includes no change"}
}

// nearlyDoublesBand is what "nearly doubles" is taken to mean: a ping RTT ratio between 1.5
// and 2.5 (the published +98.9 %, give or take half a doubling); sfclab's reading, the paper
// gives no spread.
var nearlyDoublesBand = [2]float64{1.5, 2.5}

var nearlyDoublesRule = fmt.Sprintf("equivalence by TOST (level 0.05) on the per-repetition log ratios of the mean ping RTT to the baseline's: the ratio lies inside [%.1f, %.1f] (the published 1.99×, give or take half a doubling; sfclab's reading of \"nearly doubles\", the paper gives no spread). A rise whose 95 %% CI lies wholly outside the band holds in direction, not in size.",
	nearlyDoublesBand[0], nearlyDoublesBand[1])

func nearlyDoubles(r *report.Report) report.ClaimResult {
	q, ok := r.LatencyRatio(report.MetricPingRTT, "1-vnf")
	if !ok {
		return report.ClaimResult{Outcome: report.NotShown, Evidence: "no ping RTT of 1-vnf and the baseline in this run" + notRunText(r, "1-vnf")}
	}
	return equivalentOrNot(q, nearlyDoublesBand[0], nearlyDoublesBand[1], "ping RTT "+q.Text()+"; published 1.99×", 1)
}

// almostNoCPU is what "almost no CPU" is taken to mean: the firewall's forwarding costs the
// host less than 0.05 cores at 1-vnf's throughput. sfclab's reading: the study contrasts the
// firewall's ~0.01 % with HAProxy's 118 % of a core; 0.05 cores is under a twentieth of
// HAProxy's published figure.
const almostNoCPU = 0.05

var firewallCPURule = fmt.Sprintf("the firewall's CPU is what the whole host spends beyond the baseline to move 1-vnf's traffic: per repetition, (host busy cores per Gbit/s in 1-vnf − the same in the baseline) × 1-vnf's Gbit/s, host busy = user+system+softirq of every core from /proc/stat; it holds when the 95 %% t CI of that extra lies below %.2f cores, does not hold when it lies above (sfclab's reading of \"almost no\": under a twentieth of HAProxy's published 118 %%). The firewall's own cgroup runs no process (its forwarding is softirq, charged to whatever task the interrupt lands on), so its figure cannot decide the claim.", almostNoCPU)

// firewallCPU measures the firewall's CPU where it is spent: host-wide, 1-vnf against its
// baseline, paired per repetition and per Gbit/s moved.
func firewallCPU(r *report.Report) report.ClaimResult {
	own := ""
	if row, ok := r.CPUOf("1-vnf", "fw"); ok {
		own = fmt.Sprintf("; fw's own cgroup: %s cores, which cannot show it", fix3(row.Total.Mean))
	}
	b := r.BaselineFor("1-vnf")
	busyS, okS := hostBusyCores(r, "1-vnf")
	busyB, okB := hostBusyCores(r, b)
	if !okS || !okB {
		return report.ClaimResult{Outcome: report.NotShown, Evidence: "not measurable here: this run has no host-wide CPU figures of 1-vnf and " + b + " (the cpu probe's per-core /proc/stat sampling)" + own + notRunText(r, "1-vnf")}
	}
	gS, gB := trialGbits(r, "1-vnf"), trialGbits(r, b)
	var extra []float64
	for t, c := range busyS {
		cb, ok1 := busyB[t]
		g, ok2 := gS[t]
		gb, ok3 := gB[t]
		if ok1 && ok2 && ok3 && g > 0 && gb > 0 {
			extra = append(extra, (c/g-cb/gb)*g)
		}
	}
	sum := stats.Summarize(extra)
	if sum.N < 2 {
		return report.ClaimResult{Outcome: report.NotShown, Evidence: fmt.Sprintf("not measurable here: %d repetitions have host-wide CPU and throughput of both 1-vnf and %s, the paired CI needs 2%s", sum.N, b, own)}
	}
	ev := fmt.Sprintf("the host spent %s cores more on 1-vnf's traffic than the baseline's CPU per Gbit/s would (paired over %d repetitions, 95 %% CI [%s, %s])%s",
		fix3(sum.Mean), sum.N, fix3(sum.CI95Low), fix3(sum.CI95High), own)
	switch {
	case sum.CI95High < almostNoCPU:
		return report.ClaimResult{Outcome: report.Holds, Evidence: ev}
	case sum.CI95Low > almostNoCPU:
		return report.ClaimResult{Outcome: report.DoesNotHold, Evidence: ev}
	}
	return report.ClaimResult{Outcome: report.NotShown, Evidence: ev + fmt.Sprintf("; the CI reaches both sides of %.2f cores", almostNoCPU)}
}

// hostBusyCores is scenario s's host-wide busy cores per trial: the whole machine's row when
// the probe reported one (a host marked shared), else the sum over its emulated hosts.
func hostBusyCores(r *report.Report, s string) (map[int]float64, bool) {
	var rows []report.HostCPURow
	for _, h := range r.HostCPU {
		if h.Scenario == s && len(h.BusyByTrial) > 0 {
			if strings.HasSuffix(h.Cores, "(shared)") {
				rows = []report.HostCPURow{h}
				break
			}
			rows = append(rows, h)
		}
	}
	if len(rows) == 0 {
		return nil, false
	}
	out := map[int]float64{}
	for _, h := range rows {
		n := countCores(strings.TrimSpace(strings.TrimSuffix(h.Cores, "(shared)")))
		if n == 0 {
			return nil, false
		}
		for t, pct := range h.BusyByTrial {
			out[t] += pct / 100 * float64(n)
		}
	}
	return out, true
}

// countCores counts the cores of a cpuset list ("0-1,4").
func countCores(list string) int {
	n := 0
	for _, part := range strings.Split(list, ",") {
		a, b, rng := strings.Cut(strings.TrimSpace(part), "-")
		x, err := strconv.Atoi(a)
		if err != nil {
			return 0
		}
		y := x
		if rng {
			if y, err = strconv.Atoi(b); err != nil || y < x {
				return 0
			}
		}
		n += y - x + 1
	}
	return n
}

// trialGbits is scenario s's throughput by trial.
func trialGbits(r *report.Report, s string) map[int]float64 {
	out := map[int]float64{}
	for _, row := range r.Throughput {
		if row.Scenario == s {
			for i, t := range row.Trials {
				out[t] = row.Gbits[i]
			}
		}
	}
	return out
}

func pText(p float64) string {
	if p < 0.001 {
		return "p < 0.001"
	}
	return fmt.Sprintf("p = %.3f", p)
}

// claimsB are study B's own conclusions (its slides' conclusion).
var claimsB = []report.Claim{
	{Text: fmt.Sprintf("Docker adds little over native Linux (the published overheads reach %s in the study's own table: %s)", pctOver(littleMargin.point), littleMargin.cell),
		Rule: littleRule, Check: dockerAddsLittle},
	{Text: "KVM costs much more than Docker", Rule: kvmRule, Check: kvmCostsMore},
}

// margin is what "little" is taken to mean for study B's Docker claim, derived from the
// study's own table (publishedB): the cell with the largest published Docker/native time
// ratio, and that ratio at the top of the cell's published 95 % CIs ((docker + CI) / (native
// − CI)), so that the study's own worst cell, measured again, is within it.
type margin struct {
	cell         string
	point, upper float64
}

var littleMargin = dockerMargin(publishedB())

var littleRule = fmt.Sprintf("each Docker cell's paired ratio of total time to native's (same cache setting, object size and concurrency; geometric mean over the repetitions, 95 %% t CI of the log ratios) is compared with a margin of %s×: the largest Docker/native ratio in the study's own table, %s×, in its cell %s, taken at the top of that cell's published 95 %% CIs. Holds when every cell's CI lies at or below the margin (a one-sided non-inferiority test per cell at level 2.5 %%), does not hold when some cell's CI lies wholly above it, not shown otherwise.",
	fix3(littleMargin.upper), fix3(littleMargin.point), littleMargin.cell)

// dockerMargin finds the margin in a published table of study B.
func dockerMargin(rows []report.PublishedHTTP) margin {
	type key struct {
		cache, object string
		conc          int
	}
	native := map[key]report.PublishedHTTP{}
	for _, row := range rows {
		if platform, cache, ok := strings.Cut(row.Scenario, "-"); ok && platform == "native" {
			native[key{cache, row.Object, row.Concurrency}] = row
		}
	}
	m := margin{}
	for _, row := range rows {
		if !strings.HasPrefix(row.Scenario, "docker-") {
			continue
		}
		cache := row.Scenario[strings.LastIndex(row.Scenario, "-")+1:]
		n, ok := native[key{cache, row.Object, row.Concurrency}]
		if !ok || n.Seconds <= 0 {
			continue
		}
		if q := row.Seconds / n.Seconds; q > m.point {
			platform := strings.TrimSuffix(strings.TrimPrefix(row.Scenario, "docker-"), "-"+cache)
			cacheText := map[string]string{"nocache": "cache off", "cache": "cache on"}[cache]
			m = margin{cell: fmt.Sprintf("Docker %s, %s objects at concurrency %d, %s: %s against native's %s s", cmp.Or(map[string]string{"nat": "NAT"}[platform], platform), row.Object, row.Concurrency, cacheText, strconv.FormatFloat(row.Seconds, 'f', -1, 64), strconv.FormatFloat(n.Seconds, 'f', -1, 64)),
				point: q, upper: (row.Seconds + row.CI) / (n.Seconds - n.CI)}
		}
	}
	return m
}

// pctOver writes a time ratio as an overhead: 1.343 -> "+34 %".
func pctOver(q float64) string { return fmt.Sprintf("+%.0f %%", (q-1)*100) }

// dockerAddsLittle checks study B's Docker claim cell by cell, on each Docker cell's paired
// ratio to its native baseline over the repetitions: it does not hold when some cell's 95 % CI
// lies wholly above littleMargin.upper, holds when every cell's CI lies at or below it, and is not
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
		case q.Pairs >= 2 && !math.IsNaN(q.Low) && q.Low > littleMargin.upper:
			over = append(over, c)
		case q.Pairs < 2 || math.IsNaN(q.High) || q.High > littleMargin.upper:
			open = append(open, c)
		}
	}
	if n == 0 {
		return report.ClaimResult{Outcome: report.NotShown, Evidence: "no Docker cell with a native baseline in this run" + dockerNotRunText(r)}
	}
	lim := fix3(littleMargin.upper)
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

// dockerNotRunText is notRunText of the study's Docker scenarios the run left out (their
// names sorted, grouped when they share the reason: `reproduce http-proxy --runtime vm` leaves
// out all four for one reason); "" when it left none out.
func dockerNotRunText(r *report.Report) string {
	var names []string
	for k := range r.Run.Env {
		if s, ok := strings.CutPrefix(k, report.EnvNotRun); ok && strings.HasPrefix(s, "docker-") {
			names = append(names, s)
		}
	}
	slices.Sort(names)
	var out []string
	for i := 0; i < len(names); {
		why, j := r.NotRun(names[i]), i+1
		for j < len(names) && r.NotRun(names[j]) == why {
			j++
		}
		out = append(out, strings.Join(names[i:j], ", ")+" "+why)
		i = j
	}
	if len(out) == 0 {
		return ""
	}
	return "; " + strings.Join(out, "; ")
}

// notRunText is "; S <why>" when the run left the study's scenario s out and said why
// (report.EnvNotRun), so a claim not shown for want of s says what to do; "" otherwise.
func notRunText(r *report.Report, s string) string {
	if n := r.NotRun(s); n != "" {
		return "; " + s + " " + n
	}
	return ""
}
