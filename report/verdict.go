package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/sfclab/sfclab/stats"
)

// Claim is one of a published study's own conclusions, checked against
// this run by Check.
type Claim struct {
	// Text is the conclusion in the study's words, e.g. "the L4 proxy is
	// the bottleneck".
	Text string
	// Check says whether the conclusion holds in this run's figures, with
	// the figure or test behind it.
	Check func(r *Report) ClaimResult
	// Rule is the decision rule Check applies, in words: the statistic, the threshold and
	// where the threshold comes from. The report prints it beside the outcome.
	Rule string
}

// Claim outcomes.
const (
	// Holds: this run's figures show the conclusion.
	Holds = "holds"
	// HoldsDirection: the effect goes the published way but its size is
	// clearly different.
	HoldsDirection = "holds in direction, not in size"
	// NotShown: this run cannot tell (the CI includes no effect, or the
	// figure is missing).
	NotShown = "not shown by this run"
	// DoesNotHold: this run's figures contradict the conclusion.
	DoesNotHold = "does not hold"
)

// ClaimResult is the outcome of a Claim in this run.
type ClaimResult struct {
	// Outcome is Holds, HoldsDirection, NotShown or DoesNotHold.
	Outcome string
	// Evidence is the figure or test behind Outcome.
	Evidence string
}

// Ratio is a scenario's figure over its baseline's for one metric,
// computed on the repetitions both ran: the trials of one repetition run
// the scenarios one after another, so the pairs share the machine's state.
type Ratio struct {
	// Scenario and Baseline are the two scenarios compared.
	Scenario, Baseline string
	// Pairs is the number of repetitions with a figure for both.
	Pairs int
	// Summary summarises the natural logarithms of the per-repetition
	// ratios; with no pairs Summary.N is 0 and Value is the ratio of the
	// means.
	Summary stats.Summary
	// Value is the headline ratio: the geometric mean of the per-repetition
	// ratios, exp(Summary.Mean).
	Value float64
	// Low and High are the 95 % CI of Value: exp of the Student t CI of the
	// log ratios (NaN with fewer than 2 pairs). Ratios are compared on the
	// log scale so the CI is never negative and 2× and 0.5× weigh the same.
	Low, High float64
	// P is the two-sided Wilcoxon signed-rank p-value of the pairs (NaN
	// when it cannot be run; PErr then says why).
	P    float64
	PErr string
	// Logs are the per-repetition log ratios Summary summarises, in repetition order.
	Logs []float64
	// Left names the repetitions left out of the pairs and why, e.g. "repetition 2 (1-vnf
	// trial 2 failed: iperf3 measured 0 bit/s)".
	Left []string
}

// minWilcoxonPairs is the smallest number of pairs for which the exact
// two-sided Wilcoxon signed-rank test can give p < 0.05 (n = 6: p = 2/64).
const minWilcoxonPairs = 6

func pairedRatio(s, base string, trialsS []int, xs []float64, trialsB []int, bs []float64) Ratio {
	r := Ratio{Scenario: s, Baseline: base, Value: math.NaN(), Low: math.NaN(), High: math.NaN(), P: math.NaN()}
	var ratios, px, pb []float64
	for i, t := range trialsS {
		j := slices.Index(trialsB, t)
		switch {
		case j < 0:
			r.Left = append(r.Left, fmt.Sprintf("repetition %d (no figure of %s)", t, base))
			continue
		case xs[i] <= 0:
			r.Left = append(r.Left, fmt.Sprintf("repetition %d (%s measured %s)", t, s, strconv.FormatFloat(xs[i], 'g', 3, 64)))
			continue
		case bs[j] <= 0:
			r.Left = append(r.Left, fmt.Sprintf("repetition %d (%s measured %s)", t, base, strconv.FormatFloat(bs[j], 'g', 3, 64)))
			continue
		}
		ratios = append(ratios, math.Log(xs[i]/bs[j]))
		px, pb = append(px, xs[i]), append(pb, bs[j])
	}
	for _, t := range trialsB {
		if !slices.Contains(trialsS, t) {
			r.Left = append(r.Left, fmt.Sprintf("repetition %d (no figure of %s)", t, s))
		}
	}
	r.Logs = ratios
	r.Pairs = len(ratios)
	if r.Pairs == 0 {
		if m := mean(bs); len(xs) > 0 && m != 0 {
			r.Value = mean(xs) / m
		}
		r.PErr = "no repetition has both"
		return r
	}
	r.Summary = stats.Summarize(ratios)
	r.Value, r.Low, r.High = math.Exp(r.Summary.Mean), math.Exp(r.Summary.CI95Low), math.Exp(r.Summary.CI95High)
	res, err := stats.WilcoxonSignedRank(px, pb)
	if err != nil {
		r.PErr = err.Error()
	} else {
		r.P = res.PValue
	}
	return r
}

// BaselineFor is the scenario s is compared with in the verdict: the report's baseline, or,
// when s ran on another runtime than the baseline and the run has a scenario named
// RUNTIME-BASELINE on s's runtime (netns-baseline), that one, so a ratio never mixes runtimes;
// or, when s is NAME-VARIANT and the run has BASELINE-VARIANT (c3-routed and c0-routed), that
// one, so a ratio never mixes steering modes or placements.
func (r *Report) BaselineFor(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] != '-' {
			continue
		}
		if own := r.Baseline + s[i:]; own != s && slices.Contains(r.Scenarios, own) {
			return own
		}
	}
	rt, brt := r.Runtimes[s], r.Runtimes[r.Baseline]
	if rt == "" || brt == "" || rt == brt {
		return r.Baseline
	}
	if own := rt + "-" + r.Baseline; own != s && slices.Contains(r.Scenarios, own) && r.Runtimes[own] == rt {
		return own
	}
	// A lab on runtime vm is a netns lab whose functions are VMs: its endpoints are namespaces,
	// so netns-BASELINE is its own runtime's baseline where there is no vm-BASELINE.
	if own := "netns-" + r.Baseline; rt == "vm" && slices.Contains(r.Scenarios, own) && r.Runtimes[own] == "netns" {
		return own
	}
	return r.Baseline
}

// TCGBaselineFor is what scenario s is compared with when it ran VMs under TCG and its own
// baseline (BaselineFor) did not (Incomparable): the first scenario of the run, in run order,
// that also ran VMs under TCG on s's runtime and has s's BaselineFor (vm-1-vnf for vm-2-vnf:
// what the second function adds, both on an emulated CPU). "" when there is none, when s is that
// first scenario, or when s's own baseline may be compared with it. A ratio over it is an
// emulated CPU's figure, read only between the two, and always carries EmulatedMark.
func (r *Report) TCGBaselineFor(s string) string {
	b := r.BaselineFor(s)
	if !r.Emulated(s) || !r.Incomparable(s, b) {
		return ""
	}
	for _, t := range r.Scenarios {
		if t == s {
			return ""
		}
		if r.Emulated(t) && r.Runtimes[t] == r.Runtimes[s] && r.BaselineFor(t) == b {
			return t
		}
	}
	return ""
}

// ThroughputRatio is scenario s's per-trial throughput over its baseline's (BaselineFor).
func (r *Report) ThroughputRatio(s string) (Ratio, bool) {
	return r.throughputRatio(s, r.BaselineFor(s))
}

// TCGThroughputRatio is scenario s's per-trial throughput over TCGBaselineFor(s)'s.
func (r *Report) TCGThroughputRatio(s string) (Ratio, bool) {
	b := r.TCGBaselineFor(s)
	if b == "" {
		return Ratio{}, false
	}
	return r.throughputRatio(s, b)
}

func (r *Report) throughputRatio(s, b string) (Ratio, bool) {
	var row, base *ThroughputRow
	for i := range r.Throughput {
		switch r.Throughput[i].Scenario {
		case s:
			row = &r.Throughput[i]
		case b:
			base = &r.Throughput[i]
		}
	}
	if row == nil || base == nil || len(row.Gbits) == 0 || len(base.Gbits) == 0 || s == b || r.Incomparable(s, b) {
		return Ratio{}, false
	}
	q := pairedRatio(s, b, row.Trials, row.Gbits, base.Trials, base.Gbits)
	r.explainLeft(&q)
	return q, true
}

// explainLeft names the failed trial behind each repetition q leaves out, with its status and
// error: a failed trial's samples never reach the pairs.
func (r *Report) explainLeft(q *Ratio) {
	for _, f := range r.Failed {
		if f.Scenario != q.Scenario && f.Scenario != q.Baseline {
			continue
		}
		why := fmt.Sprintf("repetition %d (%s trial %d %s%s)", f.Trial, f.Scenario, f.Trial, f.Status, failReason(f))
		at := fmt.Sprintf("repetition %d (", f.Trial)
		i := slices.IndexFunc(q.Left, func(l string) bool { return strings.HasPrefix(l, at) })
		if i >= 0 {
			q.Left[i] = why
		} else {
			q.Left = append(q.Left, why)
		}
	}
}

// failReason is ": ERROR" for a failed trial's error, its first line, or "".
func failReason(f FailedTrial) string {
	e, _, _ := strings.Cut(strings.TrimSpace(f.Error), "\n")
	if e == "" {
		return ""
	}
	return ": " + e
}

// Equivalent tests, by two one-sided t-tests on the log ratios (stats.TOST), whether the
// ratio lies strictly between low and high (low may be 0, an open side). At level 0.05 it
// holds when P < 0.05, the same as the 90 % CI of the ratio lying inside (low, high).
func (q Ratio) Equivalent(low, high float64) (stats.Equivalence, error) {
	return stats.TOST(q.Logs, math.Log(low), math.Log(high))
}

// NodeLead is the busiest node of a scenario against each other node, paired per trial.
type NodeLead struct {
	// Busiest is the node with the highest mean CPU (user+system of its own cgroup).
	Busiest CPURow
	// Next is the other node the lead is least sure over: the smallest lower 95 % CI bound
	// of the paired difference.
	Next CPURow
	// Diff summarises Busiest minus Next per trial, in cores, over the trials both have.
	Diff stats.Summary
}

// Leads reports whether the busiest node used more CPU than every other node by a paired
// t-test per trial: the 95 % CI of each paired difference lies wholly above 0 (one-sided
// level 2.5 %). With one node it is false.
func (l NodeLead) Leads() bool {
	return l.Next.Node != "" && l.Diff.N >= 2 && l.Diff.CI95Low > 0
}

// Text is "lb (1.18 cores) over server (0.20) by 0.98 cores, paired 95 % CI [0.90, 1.06] over 3 trials".
func (l NodeLead) Text() string {
	s := fmt.Sprintf("%s (%s cores)", l.Busiest.Node, f2(l.Busiest.Total.Mean))
	if l.Next.Node == "" {
		return s + ", the only node with CPU figures"
	}
	s += fmt.Sprintf(" over %s (%s) by %s cores", l.Next.Node, f2(l.Next.Total.Mean), f2(l.Diff.Mean))
	if l.Diff.N >= 2 {
		return s + fmt.Sprintf(", paired 95 %% CI %s over %d trials", ciRange(l.Diff.CI95Low, l.Diff.CI95High, 2), l.Diff.N)
	}
	return s + fmt.Sprintf(" (%d paired trials: no CI)", l.Diff.N)
}

// Bottleneck compares the busiest node of scenario s with every other node of it, paired by
// trial (see NodeLead).
func (r *Report) Bottleneck(s string) (NodeLead, bool) {
	b, ok := r.BusiestNode(s)
	if !ok {
		return NodeLead{}, false
	}
	l := NodeLead{Busiest: b}
	first := true
	for _, row := range r.CPU {
		if row.Scenario != s || row.Node == b.Node || row.Total.N == 0 {
			continue
		}
		var d []float64
		for t, v := range b.TotalByTrial {
			if w, ok := row.TotalByTrial[t]; ok {
				d = append(d, v-w)
			}
		}
		sum := stats.Summarize(d)
		low := sum.CI95Low
		if math.IsNaN(low) {
			low = math.Inf(-1)
		}
		cur := l.Diff.CI95Low
		if math.IsNaN(cur) || l.Diff.N < 2 {
			cur = math.Inf(-1)
		}
		if first || low < cur {
			l.Next, l.Diff, first = row, sum, false
		}
	}
	return l, true
}

// LatencyRatio is scenario s's per-trial mean of metric (MetricPingRTT,
// MetricTCPRTT, MetricTCPConnect) over its baseline's (BaselineFor).
func (r *Report) LatencyRatio(metric, s string) (Ratio, bool) {
	return r.latencyRatio(metric, s, r.BaselineFor(s))
}

// TCGLatencyRatio is scenario s's per-trial mean of a latency metric over TCGBaselineFor(s)'s.
func (r *Report) TCGLatencyRatio(metric, s string) (Ratio, bool) {
	b := r.TCGBaselineFor(s)
	if b == "" {
		return Ratio{}, false
	}
	return r.latencyRatio(metric, s, b)
}

func (r *Report) latencyRatio(metric, s, b string) (Ratio, bool) {
	by := r.latTrials[metric]
	if by == nil || s == b || len(by[s]) == 0 || len(by[b]) == 0 || r.Incomparable(s, b) {
		return Ratio{}, false
	}
	ts, xs := by[s].means()
	tb, bs := by[b].means()
	q := pairedRatio(s, b, ts, xs, tb, bs)
	r.explainLeft(&q)
	return q, true
}

// CPUOf returns the CPU row of node in scenario s.
func (r *Report) CPUOf(s, node string) (CPURow, bool) {
	for _, row := range r.CPU {
		if row.Scenario == s && row.Node == node && row.Total.N > 0 {
			return row, true
		}
	}
	return CPURow{}, false
}

// BusiestNode returns the node of scenario s with the most CPU time (user
// plus system, its own cgroup).
func (r *Report) BusiestNode(s string) (CPURow, bool) {
	var best CPURow
	found := false
	for _, row := range r.CPU {
		if row.Scenario == s && row.Total.N > 0 && (!found || row.Total.Mean > best.Total.Mean) {
			best, found = row, true
		}
	}
	return best, found
}

// Text describes the ratio against what: "0.76× baseline (paired
// over 3 repetitions, 95 % CI [0.70, 0.82], Wilcoxon signed-rank p =
// 0.250)".
func (q Ratio) Text() string {
	if math.IsNaN(q.Value) {
		return "n/a"
	}
	s := fixed(q.Value, 2) + "× " + q.Baseline
	if q.Summary.N == 0 {
		return s + " (ratio of the means; no repetition has both, so no CI)"
	}
	s += " (geometric mean of " + plural2(q.Pairs, "paired repetition")
	if !math.IsNaN(q.Low) {
		s += ", 95 % CI " + ciRange(q.Low, q.High, 2)
	}
	if !math.IsNaN(q.P) {
		s += ", Wilcoxon signed-rank " + pIs(q.P)
	}
	if len(q.Left) > 0 {
		s += "; left out: " + strings.Join(q.Left, ", ")
	}
	return s + ")"
}

// Excludes reports whether the ratio's CI lies wholly above (dir > 0) or
// below (dir < 0) 1.
func (q Ratio) Excludes(dir int) bool {
	if q.Summary.N < 2 || math.IsNaN(q.Low) {
		return false
	}
	if dir > 0 {
		return q.Low > 1
	}
	return q.High < 1
}

// namedMax is the most scenarios the verdict's "Compared:" line names one by one; beyond it
// the line counts them per runtime and points to the Trials table.
const namedMax = 8

// countedByRuntime says on which runtimes scenarios ss ran, in order of first appearance, and
// where each is named: "Their runtimes: 3 on netns, 31 on vm (emulated CPU (TCG): not
// comparable); the Trials table names each scenario with its runtime."
func (r *Report) countedByRuntime(ss []string) string {
	var keys []string
	count := map[string]int{}
	emulated := map[string]bool{}
	for _, s := range ss {
		k := r.Runtimes[s]
		if _, ok := count[k]; !ok {
			keys = append(keys, k)
		}
		count[k]++
		emulated[k] = emulated[k] || r.Emulated(s)
	}
	if len(keys) == 1 && keys[0] == "" {
		return "The Trials table names each."
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		switch {
		case k == "":
			parts[i] = fmt.Sprintf("%d on a runtime not recorded", count[k])
		case emulated[k]:
			parts[i] = fmt.Sprintf("%d on %s (%s)", count[k], k, EmulatedMark)
		default:
			parts[i] = fmt.Sprintf("%d on %s", count[k], k)
		}
	}
	return fmt.Sprintf("Their runtimes: %s; the Trials table names each scenario with its runtime.", strings.Join(parts, ", "))
}

// emulatedNames names the scenarios of others that ran VMs under TCG against a baseline
// without (emulated): one by one when they are few; else, when the others without VMs under
// TCG are few, as every scenario but those; else counted.
func (r *Report) emulatedNames(others, emulated []string) string {
	if len(emulated) <= namedMax {
		return strings.Join(emulated, ", ")
	}
	var rest []string
	for _, s := range others {
		if !slices.Contains(emulated, s) {
			if r.Emulated(s) { // TCG against a TCG baseline: "all but" would say it ran none
				rest = nil
				break
			}
			rest = append(rest, s)
		}
	}
	switch {
	case len(rest) == 0 && len(emulated) == len(others):
		return fmt.Sprintf("Every scenario compared (%d)", len(emulated))
	case len(rest) > 0 && len(rest) <= namedMax:
		return fmt.Sprintf("Every scenario compared but %s (%d)", strings.Join(rest, ", "), len(emulated))
	}
	return fmt.Sprintf("%d scenarios (those with vm in the Trials table's runtime column)", len(emulated))
}

func plural2(n int, word string) string {
	return fmt.Sprintf("%d %s", n, plural(n, word, word+"s"))
}

// verdictSection opens the report: what was compared, the headline ratios
// with their CIs, the bottleneck, failed trials and, for a study, the
// published headline and the study's own conclusions.
func (r *Report) verdictSection() section {
	sec := section{id: "verdict", title: "Verdict", level: 2}
	var others []string
	for _, s := range r.Scenarios {
		if s != r.Baseline {
			others = append(others, s)
		}
	}
	reps := 0
	for _, c := range r.Trials {
		reps = max(reps, c.OK+c.Failed)
	}
	named := func(ss []string) string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = s
			if rt := r.Runtimes[s]; rt != "" {
				if r.Emulated(s) {
					rt += ", " + EmulatedMark
				}
				out[i] += " (" + rt + ")"
			}
		}
		return strings.Join(out, ", ")
	}
	// Many scenarios (study C has 35) are counted, not named: a wall of names hides the
	// sentence's point, and the Trials table names each with its runtime.
	listed, many := named, len(others) > namedMax
	if many {
		listed = func(ss []string) string { return plural2(len(ss), "scenario") }
	}
	what := fmt.Sprintf("Compared: %s", listed(r.Scenarios))
	if r.Baseline != "" && len(others) > 0 {
		what = fmt.Sprintf("Compared: %s against the baseline scenario %s", listed(others), named([]string{r.Baseline}))
	}
	what += fmt.Sprintf(", %s each; within a repetition the scenarios run one after another, so each is paired with the baseline of the same repetition.", plural2(reps, "repetition"))
	if many {
		what += " " + r.countedByRuntime(others)
	}
	// Which rule of BaselineFor chose b: the variant's (BASELINE-VARIANT for NAME-VARIANT,
	// whatever the runtimes) or the runtime's (b on s's own runtime). Before, a VM scenario
	// compared with its variant's baseline on namespaces (study C's c1-1host with c0-1host)
	// was said to be compared with "the baseline on their own runtime".
	variantOf := func(s, b string) bool {
		suffix, ok := strings.CutPrefix(b, r.Baseline)
		return ok && strings.HasPrefix(suffix, "-") && strings.HasSuffix(s, suffix)
	}
	for _, s := range others {
		if b := r.BaselineFor(s); b != r.Baseline && !variantOf(s, b) && r.Runtimes[s] != r.Runtimes[r.Baseline] && r.Runtimes[b] == r.Runtimes[s] {
			what += fmt.Sprintf(" Scenarios on %s are compared with %s, the baseline on their own runtime.", r.Runtimes[s], b)
			break
		}
	}
	var variants []string
	for _, s := range others {
		if b := r.BaselineFor(s); b != r.Baseline && variantOf(s, b) && !slices.Contains(variants, b) {
			variants = append(variants, b)
		}
	}
	if len(variants) > 0 {
		what += fmt.Sprintf(" A scenario NAME-VARIANT is compared with %s-VARIANT where the run has it (%s).", r.Baseline, strings.Join(variants, ", "))
	}
	// The scenarios across the TCG line from their baseline: those that ran VMs under TCG
	// against a baseline that did not, and (a run whose baseline ran VMs under TCG) those
	// that did not against one that did, which must not be said to have run VMs.
	var emulated, native []string
	for _, s := range others {
		if b := r.BaselineFor(s); r.Incomparable(s, b) {
			if r.Emulated(s) {
				emulated = append(emulated, s)
			} else {
				native = append(native, s)
			}
		}
	}
	if len(emulated) > 0 {
		what += fmt.Sprintf(" %s ran VMs under TCG (%s): no ratio, D_th or K_lat of them against a scenario without VMs is given and no claim about what they cost is decided on them, because an emulated CPU's cost says nothing about a VM's under KVM nor about a container's; compare them only with each other (a claim about where their traffic goes, such as study C's Fig. 6 and tap, is decided as usual).",
			r.emulatedNames(others, emulated), EmulatedMark)
	}
	if len(native) > 0 {
		names := strings.Join(native, ", ")
		if len(native) > namedMax {
			names = plural2(len(native), "scenario")
		}
		what += fmt.Sprintf(" %s ran no VMs under TCG, but the baseline %s would be compared with did (%s): no ratio, D_th or K_lat against that baseline is given, because an emulated CPU's figures say nothing about a real one's.",
			names, plural(len(native), "it", "they"), EmulatedMark)
	}
	if red := r.Run.Env["reduced"]; red != "" {
		what += " Reduced from the study: " + red + "."
	}
	sec.blocks = append(sec.blocks, block{para: what})

	items := r.tcgPairItems()
	worst, worstRatio := "", math.Inf(1)
	for _, s := range others {
		if q, ok := r.ThroughputRatio(s); ok { // listed in the ratio table (ratioSection)
			if q.Value < worstRatio {
				worst, worstRatio = s, q.Value
			}
		}
	}
	items = append(items, r.rttVerdict()...)
	items = append(items, r.ndrVerdict()...)
	items = append(items, r.trendItems()...)
	httpItems, httpWorst := r.httpVerdict()
	items = append(items, httpItems...)
	if worst == "" {
		worst = httpWorst
	}
	if l, ok := r.Bottleneck(worst); ok {
		items = append(items, bottleneckItem(r.ScenarioLabel(worst), l))
	}
	items = append(items, r.failedItem())
	if reps > 0 && reps < minWilcoxonPairs {
		item := fmt.Sprintf("With %s no exact test can reach p < 0.05: the Wilcoxon signed-rank test on pairs needs at least %d repetitions (Mann-Whitney U at least 4 per side); run with --repetitions %d for a test that can.",
			plural2(reps, "repetition"), minWilcoxonPairs, minWilcoxonPairs)
		if len(r.RTTPairs) > 0 {
			item = strings.TrimSuffix(item, ".") + " (tests on trial means; the rtt probe's scenario pairs are paired by background cell and rate, not by repetition, and are not limited so)."
		}
		items = append(items, item)
	}
	items = append(items, r.publishedHeadline()...)
	sec.blocks = append(sec.blocks, block{list: items})

	// The study's own conclusions open the report (conclusionsSection).
	return sec
}

// tcgPairItems are the verdict's lines of the scenarios that ran VMs under TCG against their
// TCGBaselineFor (vm-2-vnf against vm-1-vnf): throughput and latency ratios, marked TCG.
//
// More than namedMax such scenarios (study C with --vm has 26) make one line: how many, against
// which TCG baselines, and the range of each ratio; the Paired ratios table below the verdict
// has each with its CI.
func (r *Report) tcgPairItems() []string {
	var out, bases []string
	var n int
	metrics := []string{MetricThroughput, MetricTCPRTT, MetricPingRTT}
	lo, hi := map[string]float64{}, map[string]float64{}
	for _, s := range r.Scenarios {
		b := r.TCGBaselineFor(s)
		if b == "" {
			continue
		}
		var parts []string
		for _, m := range metrics {
			q, ok := r.TCGThroughputRatio(s)
			what := "throughput"
			if m != MetricThroughput {
				q, ok = r.TCGLatencyRatio(m, s)
				what = latencyLabel(m)
			}
			if !ok {
				continue
			}
			parts = append(parts, what+" "+q.Text())
			if _, seen := lo[m]; !seen {
				lo[m], hi[m] = math.Inf(1), math.Inf(-1)
			}
			lo[m], hi[m] = math.Min(lo[m], q.Value), math.Max(hi[m], q.Value)
		}
		if len(parts) == 0 {
			continue
		}
		n++
		if !slices.Contains(bases, b) {
			bases = append(bases, b)
		}
		out = append(out, fmt.Sprintf("%s against %s, both VMs under TCG (%s with any scenario without VMs; between the two it is what %s adds on the same emulated CPU): %s.",
			s, b, EmulatedMark, s, strings.Join(parts, "; ")))
	}
	if n <= namedMax {
		return out
	}
	var ranges []string
	for _, m := range metrics {
		if _, ok := lo[m]; !ok {
			continue
		}
		what := "throughput"
		if m != MetricThroughput {
			what = latencyLabel(m)
		}
		ranges = append(ranges, fmt.Sprintf("%s %s× to %s×", what, fixed(lo[m], 2), fixed(hi[m], 2)))
	}
	return []string{fmt.Sprintf("%d scenarios that ran VMs under TCG are compared with the first TCG scenario of their family instead (%s), both VMs under TCG (%s with any scenario without VMs; between the two it is what the scenario adds on the same emulated CPU): %s of it; the Paired ratios table below gives each with its CI and test.",
		n, strings.Join(bases, ", "), EmulatedMark, strings.Join(ranges, ", "))}
}

// bottleneckItem is the verdict's Bottleneck line for scenario s (as tables label it: marked when it ran
// VMs under TCG, whose QEMU CPU is an emulated CPU's): the busiest node, and
// whether a paired test tells it from every other node.
func bottleneckItem(s string, l NodeLead) string {
	what := "user+system of each node's own cgroup; kernel forwarding shows in host softirq instead"
	if l.Leads() {
		return fmt.Sprintf("Bottleneck: %s in %s, the busiest node: %s (%s; rule: the paired 95 %% t CI of the per-trial difference to every other node lies above 0).",
			l.Busiest.Node, s, l.Text(), what)
	}
	return fmt.Sprintf("Bottleneck: not shown in %s; the busiest node by mean is %s, but it is not told apart from the next: %s (%s; rule: the paired 95 %% t CI of the per-trial difference to every other node must lie above 0).",
		s, l.Busiest.Node, l.Text(), what)
}

// failedItem counts and names the failed trials with their reasons, and says they are out of
// every paired ratio.
func (r *Report) failedItem() string {
	n := len(r.Failed)
	if n == 0 {
		return "Failed trials: none."
	}
	var fs []string
	for _, f := range r.Failed {
		fs = append(fs, fmt.Sprintf("%s trial %d (%s%s)", f.Scenario, f.Trial, f.Status, failReason(f)))
	}
	return fmt.Sprintf("%s failed: %s. The failed trials' samples are left out, and so are their repetitions from every paired ratio of their scenario (each ratio names the repetitions it leaves out).",
		plural2(n, "trial"), strings.Join(fs, "; "))
}

func latencyLabel(metric string) string {
	for _, m := range latencyMetrics {
		if m.key == metric {
			return m.label
		}
	}
	return metric
}

// httpVerdict summarises the HTTP rows: per scenario, the range of the
// per-request time changes against its baseline over the objects and
// concurrencies measured, and the scenario with the largest change.
func (r *Report) httpVerdict() (out []string, worst string) {
	top := math.Inf(-1)
	for _, s := range r.Scenarios {
		lo, hi, n, base := math.Inf(1), math.Inf(-1), 0, ""
		var apart []string // baselines its measured rows may not be set against
		for _, row := range r.HTTP {
			if row.Scenario == s && !row.IsBaseline && row.TotalTime.N > 0 && r.Incomparable(s, row.Baseline) {
				apart = appendNew(apart, row.Baseline)
			}
			if row.Scenario != s || row.IsBaseline || math.IsNaN(row.Change) {
				continue
			}
			lo, hi, n, base = math.Min(lo, row.Change), math.Max(hi, row.Change), n+1, row.Baseline
		}
		if len(apart) > 0 {
			out = append(out, fmt.Sprintf("%s: HTTP total time not set against %s (%s): an emulated CPU against a real one; its own times are in the HTTP load table.",
				r.ScenarioLabel(s), strings.Join(apart, ", "), notComparable))
		}
		if n > 0 {
			if n == 1 {
				out = append(out, fmt.Sprintf("%s: HTTP total time %s against %s (one object/concurrency cell).", r.ScenarioLabel(s), pct(lo, true), base))
			} else {
				out = append(out, fmt.Sprintf("%s: HTTP total time %s to %s against %s over %d object/concurrency cells.", r.ScenarioLabel(s), pct(lo, true), pct(hi, true), base, n))
			}
			if hi > top {
				top, worst = hi, s
			}
		}
	}
	return out, worst
}

// publishedHeadline puts the published figures' headline beside this run's.
func (r *Report) publishedHeadline() []string {
	c := r.Comparison
	if c == nil {
		return nil
	}
	var out []string
	for _, row := range c.Rows {
		if row.Metric != MetricThroughput || math.IsNaN(row.PublishedChange) || math.IsNaN(row.MeasuredChange) {
			continue
		}
		out = append(out, fmt.Sprintf("Published vs measured, %s: throughput D_th %s published, %s in this run.", row.Scenario, pct(row.PublishedChange, false), pct(row.MeasuredChange, false)))
	}
	pubLo, pubHi, mLo, mHi, n := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1), 0
	isBase := httpBaselines(c.HTTP) // native-cache over native-nocache is the cache's change, not a platform's
	for _, row := range c.HTTP {
		if row.IsBaseline || isBase[row.Scenario] || math.IsNaN(row.PublishedChange) || math.IsNaN(row.MeasuredChange) {
			continue
		}
		pubLo, pubHi = math.Min(pubLo, row.PublishedChange), math.Max(pubHi, row.PublishedChange)
		mLo, mHi = math.Min(mLo, row.MeasuredChange), math.Max(mHi, row.MeasuredChange)
		n++
	}
	if n > 0 {
		out = append(out, fmt.Sprintf("Published vs measured (HTTP, %d cells measured by both): platform cost over native %s to %s published, %s to %s in this run.",
			n, pct(pubLo, true), pct(pubHi, true), pct(mLo, true), pct(mHi, true)))
	}
	return out
}

// trendItems tests for trends the scenarios are built for, with Kendall's tau-b on one value
// per trial (its throughput, its mean TCP RTT): against the lab's number of nodes (chain
// length) and against the background load's count, each where at least three scenarios
// differ in it. Trials are never pooled across runtimes, steering variants or balancer
// implementations: a series holds the scenarios compared with one baseline (BaselineFor, which
// keeps runtimes and NAME-VARIANT families apart) and one balancer implementation, scenarios
// without a balancer joining every implementation's series.
func (r *Report) trendItems() []string {
	nodes := map[string]float64{}
	for _, d := range r.Deploy {
		if n, err := strconv.Atoi(d.Nodes); err == nil {
			nodes[d.Scenario] = float64(n)
		}
	}
	load := map[string]float64{}
	for _, l := range r.Load {
		if len(l.Counts) == 1 {
			load[l.Scenario] = l.Counts[0]
		}
	}
	for _, s := range r.Scenarios {
		if _, ok := load[s]; !ok && len(load) > 0 {
			load[s] = 0 // a scenario of the run without background load ran with none
		}
	}
	series := r.trendSeries()
	var out []string
	for _, by := range []struct {
		what string
		x    map[string]float64
	}{{"the lab's number of nodes (chain length)", nodes}, {"the background load's count", load}} {
		for _, se := range series {
			distinct := map[float64]bool{}
			for _, s := range se.scenarios {
				if v, ok := by.x[s]; ok {
					distinct[v] = true
				}
			}
			if len(distinct) < 3 {
				continue
			}
			var xs, ys []float64
			for _, row := range r.Throughput {
				if x, ok := by.x[row.Scenario]; ok && slices.Contains(se.scenarios, row.Scenario) {
					for _, g := range row.Gbits {
						xs, ys = append(xs, x), append(ys, g)
					}
				}
			}
			if item := tauItem("throughput", by.what, se.name, xs, ys); item != "" {
				out = append(out, item)
			}
			xs, ys = nil, nil
			for _, s := range se.scenarios {
				x, ok := by.x[s]
				if !ok || r.latTrials[MetricTCPRTT] == nil {
					continue
				}
				_, means := r.latTrials[MetricTCPRTT][s].means()
				for _, m := range means {
					xs, ys = append(xs, x), append(ys, m)
				}
			}
			if item := tauItem("TCP request/response RTT", by.what, se.name, xs, ys); item != "" {
				out = append(out, item)
			}
		}
	}
	return out
}

// trendSeries is one family of scenarios a trend may be tested within.
type trendSeries struct {
	name      string
	scenarios []string
}

// trendSeries splits the scenarios by the baseline they are compared with (a baseline joins
// its own family) and, where the run names balancers (EnvBalancers), by implementation.
func (r *Report) trendSeries() []trendSeries {
	family := func(s string) string {
		if s == r.Baseline {
			return s
		}
		for _, t := range r.Scenarios {
			if t != s && r.BaselineFor(t) == s {
				return s
			}
		}
		return r.BaselineFor(s)
	}
	lbs := ParseBalancers(r.Run.Env[EnvBalancers])
	var fams []string
	members := map[string][]string{}
	const tcgFamily = "\x00tcg" // a family's TCG scenarios form a series of their own (Incomparable)
	for _, s := range r.Scenarios {
		f := family(s)
		if r.Incomparable(s, f) {
			f += tcgFamily
		}
		if members[f] == nil {
			fams = append(fams, f)
		}
		members[f] = append(members[f], s)
	}
	var out []trendSeries
	for _, f := range fams {
		var impls []string
		for _, s := range members[f] {
			if impl := lbs[s][1]; impl != "" && !slices.Contains(impls, impl) {
				impls = append(impls, impl)
			}
		}
		name := "scenarios compared with " + f
		if f == "" {
			name = "all scenarios"
		}
		if rt := r.Runtimes[f]; rt != "" {
			name += " (" + rt + ")"
		}
		if base, ok := strings.CutSuffix(f, tcgFamily); ok {
			name = "the scenarios beside " + base + " that ran VMs under TCG (" + EmulatedMark + ")"
		}
		if len(impls) == 0 {
			out = append(out, trendSeries{name, members[f]})
			continue
		}
		for _, impl := range impls {
			var ss []string
			for _, s := range members[f] {
				if x := lbs[s][1]; x == "" || x == impl {
					ss = append(ss, s)
				}
			}
			out = append(out, trendSeries{name + ", balancer " + impl, ss})
		}
	}
	return out
}

func tauItem(metric, what, series string, xs, ys []float64) string {
	if len(xs) < 3 {
		return ""
	}
	res, err := stats.KendallTauB(xs, ys)
	if err != nil {
		return fmt.Sprintf("Trend of %s with %s, %s: no Kendall tau-b (%v).", metric, what, series, err)
	}
	return fmt.Sprintf("Trend of %s with %s, %s: Kendall tau-b %s over %d trials (one value per trial), %s.", metric, what, series, fixed(res.Statistic, 2), len(xs), pIs(res.PValue))
}

// pIs writes a p-value for running text: "p = 0.250", "p < 0.001".
func pIs(p float64) string {
	if v := pvalue(p); strings.HasPrefix(v, "<") {
		return "p " + v
	}
	return "p = " + pvalue(p)
}
