package report

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/stats"
)

func TestPairedRatio(t *testing.T) {
	// Trial 2 of the scenario failed; trial 4 has no baseline: two pairs, 2× and 8×.
	q := pairedRatio("s", "b", []int{1, 3, 4}, []float64{2, 16, 5}, []int{1, 2, 3}, []float64{1, 7, 2})
	if q.Pairs != 2 || math.Abs(q.Value-4) > 1e-12 || !(q.Low < 4 && q.High > 4 && q.Low > 0) {
		t.Errorf("pairedRatio = %+v; want 2 pairs, geometric mean 4, a positive CI around it", q)
	}
	if !strings.Contains(q.Text(), "4.00× b (geometric mean of 2 paired repetitions, 95 % CI") {
		t.Errorf("Text = %q", q.Text())
	}
	// No common repetition: the ratio of the means, said so, no CI, no test.
	q = pairedRatio("s", "b", []int{1}, []float64{3}, []int{2}, []float64{1.5})
	if q.Pairs != 0 || q.Value != 2 || !math.IsNaN(q.P) || q.PErr == "" || q.Excludes(1) || !strings.Contains(q.Text(), "no CI") {
		t.Errorf("unpaired = %+v %q", q, q.Text())
	}
	// A CI wholly above 1 excludes no change upwards, not downwards.
	q = pairedRatio("s", "b", []int{1, 2, 3}, []float64{2, 2.1, 1.9}, []int{1, 2, 3}, []float64{1, 1, 1})
	if !q.Excludes(1) || q.Excludes(-1) {
		t.Errorf("Excludes on %+v", q)
	}
}

func TestTrendItems(t *testing.T) {
	r := &Report{Scenarios: []string{"c0", "c2", "c6"}}
	for i, s := range r.Scenarios {
		nodes := []string{"2", "4", "8"}[i]
		r.Deploy = append(r.Deploy, DeployRow{Scenario: s, Nodes: nodes})
		base := []float64{30, 20, 8}[i]
		r.Throughput = append(r.Throughput, ThroughputRow{Scenario: s, Trials: []int{1, 2, 3}, Gbits: []float64{base, base + 1, base - 1}})
	}
	items := r.trendItems()
	if len(items) != 1 || !strings.Contains(items[0], "Trend of throughput with the lab's number of nodes (chain length), all scenarios: Kendall tau-b -0.87 over 9 trials (one value per trial), p = 0.003") {
		t.Errorf("trend items %q", items)
	}
	// Two distinct chain lengths are no trend to test.
	r.Deploy[2].Nodes = "4"
	if items := r.trendItems(); len(items) != 0 {
		t.Errorf("trend over two values: %q", items)
	}
}

// TestTrendItemsKeepSeriesApart checks the chain-length trend is tested within one runtime and
// one balancer implementation, never over trials pooled across them: pooled, the slow netns
// chain and the fast docker one (or a slow and a fast balancer) make a trend neither has.
func TestTrendItemsKeepSeriesApart(t *testing.T) {
	add := func(r *Report, s, rt, nodes string, g ...float64) {
		r.Scenarios = append(r.Scenarios, s)
		r.Runtimes[s] = rt
		r.Deploy = append(r.Deploy, DeployRow{Scenario: s, Nodes: nodes})
		r.Throughput = append(r.Throughput, ThroughputRow{Scenario: s, Trials: []int{1, 2, 3}, Gbits: g})
	}
	// Runtimes: within each, throughput does not move with chain length; pooled it falls.
	r := &Report{Baseline: "baseline", Runtimes: map[string]string{}}
	add(r, "baseline", "docker", "2", 10, 11, 12)
	add(r, "fw", "docker", "3", 11, 12, 10)
	add(r, "fw-lb", "docker", "4", 12, 10, 11)
	add(r, "netns-baseline", "netns", "2", 5, 6, 7)
	add(r, "netns-fw", "netns", "3", 6, 7, 5)
	add(r, "netns-fw-lb", "netns", "6", 1, 2, 3)
	items := r.trendItems()
	if len(items) != 2 || !strings.Contains(items[0], "scenarios compared with baseline (docker): Kendall tau-b 0.00 over 9 trials (one value per trial), p = 1.000") ||
		!strings.Contains(items[1], "scenarios compared with netns-baseline (netns): Kendall tau-b -0.60 over 9 trials") {
		t.Errorf("per-runtime trend items %q", items)
	}
	// Balancers: fw-lb (haproxy) and fw-nft (nft) each beside the baseline and fw.
	r = &Report{Baseline: "baseline", Runtimes: map[string]string{}}
	add(r, "baseline", "docker", "2", 10, 11, 12)
	add(r, "fw", "docker", "3", 9, 10, 11)
	add(r, "fw-lb", "docker", "4", 1, 2, 3)
	add(r, "fw-nft", "docker", "4", 20, 21, 22)
	r.Run.Env = map[string]string{EnvBalancers: "fw-lb=lb:haproxy;fw-nft=lb:nft"}
	items = r.trendItems()
	if len(items) != 2 || !strings.Contains(items[0], "balancer haproxy: Kendall tau-b") || !strings.Contains(items[1], "balancer nft: Kendall tau-b 0.43 over 9 trials") {
		t.Errorf("per-balancer trend items %q", items)
	}
}

// TestFailedTrialsInVerdict checks the verdict counts and names failed trials with their
// errors and that each paired ratio names the repetition it leaves out and why.
func TestFailedTrialsInVerdict(t *testing.T) {
	r := &Report{Baseline: "b", Scenarios: []string{"b", "s"},
		Failed:         []FailedTrial{{Scenario: "s", Trial: 2, Status: "failed", Error: "iperf3 measured 0 bit/s\nmore"}, {Scenario: "b", Trial: 4, Status: "running"}},
		ThroughputPart: ThroughputPart{Throughput: []ThroughputRow{{Scenario: "b", Trials: []int{1, 2, 3}, Gbits: []float64{10, 10, 10}}, {Scenario: "s", Trials: []int{1, 3, 4}, Gbits: []float64{5, 5, 0}}}}}
	if got := r.failedItem(); !strings.HasPrefix(got, "2 trials failed: s trial 2 (failed: iperf3 measured 0 bit/s); b trial 4 (running).") {
		t.Errorf("failedItem = %q", got)
	}
	q, ok := r.ThroughputRatio("s")
	want := "left out: repetition 4 (b trial 4 running), repetition 2 (s trial 2 failed: iperf3 measured 0 bit/s))"
	if !ok || q.Pairs != 2 || !strings.HasSuffix(q.Text(), want) {
		t.Errorf("ratio %q (%d pairs), want 2 pairs ending %q", q.Text(), q.Pairs, want)
	}
	if r := (&Report{}); r.failedItem() != "Failed trials: none." {
		t.Errorf("no failures: %q", r.failedItem())
	}
}

// TestBottleneck checks the busiest node is named the bottleneck only when a paired test per
// trial tells it from every other node, not by the larger mean alone.
func TestBottleneck(t *testing.T) {
	row := func(node string, v ...float64) CPURow {
		m := map[int]float64{}
		for i, x := range v {
			m[i+1] = x
		}
		return CPURow{Scenario: "s", Node: node, Total: stats.Summarize(v), TotalByTrial: m}
	}
	for _, tt := range []struct {
		name  string
		rows  []CPURow
		leads bool
		next  string
	}{
		{"clear", []CPURow{row("lb", 1.1, 1.2, 1.15), row("fw", 0.01, 0.01, 0.02), row("server", 0.5, 0.6, 0.55)}, true, "server"},
		{"larger mean, same in one trial", []CPURow{row("lb", 0.6, 1.2, 0.9), row("server", 0.6, 0.5, 0.8)}, false, "server"},
		{"alone", []CPURow{row("lb", 1, 1, 1)}, false, ""},
	} {
		r := &Report{CPUPart: CPUPart{CPU: tt.rows}}
		l, ok := r.Bottleneck("s")
		if !ok || l.Busiest.Node != "lb" || l.Leads() != tt.leads || l.Next.Node != tt.next {
			t.Errorf("%s: %+v leads %v, want lb leading %v over %q", tt.name, l, l.Leads(), tt.leads, tt.next)
		}
		item := bottleneckItem("s", l)
		if tt.leads != strings.HasPrefix(item, "Bottleneck: lb in s") || !strings.Contains(item, "rule: the paired 95 % t CI") {
			t.Errorf("%s: %q", tt.name, item)
		}
	}
}

func TestBaselineFor(t *testing.T) {
	r := &Report{Baseline: "baseline", Scenarios: []string{"baseline", "fw", "netns-baseline", "netns-fw", "other"},
		Runtimes: map[string]string{"baseline": "docker", "fw": "docker", "netns-baseline": "netns", "netns-fw": "netns", "other": "kvm"}}
	for s, want := range map[string]string{"fw": "baseline", "netns-fw": "netns-baseline", "netns-baseline": "baseline", "other": "baseline"} {
		if got := r.BaselineFor(s); got != want {
			t.Errorf("BaselineFor(%s) = %s, want %s", s, got, want)
		}
	}
	// Variants of one runtime: c3-routed against c0-routed, c3 and c3-x against c0.
	r = &Report{Baseline: "c0", Scenarios: []string{"c0", "c3", "c0-routed", "c3-routed", "c3-x", "c0-1host", "c6-1host"}}
	for s, want := range map[string]string{"c3": "c0", "c3-routed": "c0-routed", "c3-x": "c0", "c6-1host": "c0-1host", "c0-routed": "c0"} {
		if got := r.BaselineFor(s); got != want {
			t.Errorf("BaselineFor(%s) = %s, want %s", s, got, want)
		}
	}
}

// TestClaimRuleShown checks each claim's rule is printed beside its outcome on the first screen.
func TestClaimRuleShown(t *testing.T) {
	r := &Report{PublishedPart: PublishedPart{Comparison: &Comparison{Claims: []Claim{
		{Text: "x falls", Rule: "TOST against [0.5, 0.7].", Check: func(*Report) ClaimResult { return ClaimResult{Outcome: Holds, Evidence: "0.6×"} }},
		{Text: "y", Check: func(*Report) ClaimResult { return ClaimResult{Outcome: NotShown, Evidence: "no data."} }},
	}}}}
	sec, ok := r.conclusionsSection()
	if !ok {
		t.Fatal("no conclusions section")
	}
	var tb *table
	for _, b := range sec.blocks {
		if b.table != nil {
			tb = b.table
		}
	}
	if tb == nil {
		t.Fatal("no conclusions table")
	}
	// Markdown: the rule follows the evidence in the cell.
	var md strings.Builder
	writeMDTable(&md, tb)
	for _, want := range []string{"| x falls | holds | 0.6×. Rule: TOST against [0.5, 0.7]. |", "| y | not shown by this run | no data. |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	// HTML: the rule is folded under "Rule" in the same cell, so the conclusions stay on the
	// first screen.
	ht := toHTMLTable(tb)
	if c := ht.Rows[0][2]; c.Text != "0.6×" || c.DetailLabel != "Rule" || c.Detail != "TOST against [0.5, 0.7]." {
		t.Errorf("HTML cell %+v, want the evidence with the rule folded under Rule", c)
	}
	if c := ht.Rows[1][2]; c.Detail != "" {
		t.Errorf("HTML cell of a claim without a rule has detail %q", c.Detail)
	}
}

// studyCScenarios are study C's 35 data-plane scenarios (studies.OpenStackSFC with --vm): the
// four C0 scenarios have no function and stay on namespaces, the others run VMs.
func studyCScenarios() (names []string, runtimes map[string]string) {
	runtimes = map[string]string{}
	for i := 0; i <= 6; i++ {
		for _, v := range []string{"", "-routed-4hosts", "-1host", "-routed"} {
			names = append(names, fmt.Sprintf("c%d%s", i, v))
		}
	}
	names = append(names, "same-d", "same-d-routed-4hosts", "other", "other-routed-4hosts", "fig6", "tap-local", "tap-remote")
	for _, s := range names {
		runtimes[s] = "vm"
		if strings.HasPrefix(s, "c0") {
			runtimes[s] = "netns"
		}
	}
	return names, runtimes
}

// comparedInput is a run of scenarios on runtimes (deploy samples say which), two
// repetitions, under TCG.
func comparedInput(names []string, runtimes map[string]string) Input {
	in := Input{Run: results.Run{Experiment: "e", Complete: true, Env: map[string]string{EnvVMAccel: "tcg: PVM host"}}, Scenarios: names}
	for _, s := range names {
		for trial := 1; trial <= 2; trial++ {
			in.Trials = append(in.Trials, results.Trial{Scenario: s, Trial: trial, Status: results.TrialOK})
			in.Samples = append(in.Samples, results.Sample{Scenario: s, Trial: trial, Probe: "deploy", Metric: MetricDeployTime, Value: 2, Unit: "s",
				Labels: map[string]string{"nodes": "3", "runtime": runtimes[s]}})
		}
	}
	return in
}

// TestVerdictComparedLine: the verdict's "Compared:" sentence names a few scenarios one by
// one, but counts many (study C's 35) per runtime and points to the Trials table, the
// baseline still named; the TCG sentence names the few scenarios without VMs instead of the
// 31 with.
func TestVerdictComparedLine(t *testing.T) {
	cNames, cRuntimes := studyCScenarios()
	for _, tt := range []struct {
		name     string
		in       Input
		want     []string
		notWant  []string
		maxChars int
	}{
		{"few", comparedInput([]string{"base", "fw", "fw-vm"}, map[string]string{"base": "netns", "fw": "netns", "fw-vm": "vm"}),
			[]string{"Compared: fw (netns), fw-vm (vm, " + EmulatedMark + ") against the baseline scenario base (netns), 2 repetitions each",
				" fw-vm ran VMs under TCG (" + EmulatedMark + ")"},
			[]string{"Trials table"}, 0},
		// A baseline that ran VMs under TCG: the scenario without is not said to have run VMs.
		{"baseline under TCG", comparedInput([]string{"vm-src", "ns-src"}, map[string]string{"vm-src": "vm", "ns-src": "netns"}),
			[]string{"Compared: ns-src (netns) against the baseline scenario vm-src (vm, " + EmulatedMark + "), 2 repetitions each",
				" ns-src ran no VMs under TCG, but the baseline it would be compared with did (" + EmulatedMark + "): no ratio, D_th or K_lat against that baseline is given"},
			[]string{"ns-src ran VMs"}, 0},
		{"many", comparedInput(cNames, cRuntimes),
			[]string{"Compared: 34 scenarios against the baseline scenario c0 (netns), 2 repetitions each; ",
				" Their runtimes: 3 on netns, 31 on vm (" + EmulatedMark + "); the Trials table names each scenario with its runtime.",
				" Every scenario compared but c0-routed-4hosts, c0-1host, c0-routed (31) ran VMs under TCG"},
			[]string{"c3-routed-4hosts", "same-d", "tap-remote", "fig6"}, 1400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Build(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			what := r.verdictSection().blocks[0].para
			for _, w := range tt.want {
				if !strings.Contains(what, w) {
					t.Errorf("the Compared paragraph lacks %q:\n%s", w, what)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(what, w) {
					t.Errorf("the Compared paragraph has %q:\n%s", w, what)
				}
			}
			if tt.maxChars > 0 && len(what) > tt.maxChars {
				t.Errorf("the Compared paragraph is %d bytes, want at most %d:\n%s", len(what), tt.maxChars, what)
			}
		})
	}
}

// TestTCGPairItemsCounted: a few scenarios compared with a TCG baseline of their family get a
// verdict line each; study C's 24 make one line with the baselines and the range of the
// ratios, the Paired ratios table keeping each.
func TestTCGPairItemsCounted(t *testing.T) {
	cNames, cRuntimes := studyCScenarios()
	for _, tt := range []struct {
		name  string
		names []string
		want  []string
	}{
		{"few", []string{"c0", "c1", "c2", "c3"}, []string{
			"c2 against c1, both VMs under TCG (" + EmulatedMark + " with any scenario without VMs; between the two it is what c2 adds on the same emulated CPU): throughput 0.50× c1 ",
			"c3 against c1, both VMs under TCG"}},
		{"many", cNames, []string{
			"24 scenarios that ran VMs under TCG are compared with the first TCG scenario of their family instead (c1, c1-routed-4hosts, c1-1host, c1-routed), both VMs under TCG (" +
				EmulatedMark + " with any scenario without VMs; between the two it is what the scenario adds on the same emulated CPU): throughput 0.17× to 1.00× of it; the Paired ratios table below gives each with its CI and test."}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := comparedInput(tt.names, cRuntimes)
			for _, s := range tt.names {
				if s == "fig6" || strings.HasPrefix(s, "tap-") {
					continue // measured by the flows probe
				}
				g := 12.0 // c1..c6: 12/n Gbit/s; same-d, other: as c1
				if n := s[1] - '0'; s[0] == 'c' && n >= 1 && n <= 6 {
					g /= float64(n)
				}
				for trial := 1; trial <= 2; trial++ {
					in.Samples = append(in.Samples, results.Sample{Scenario: s, Trial: trial, Probe: "iperf3", Metric: "throughput", Unit: "bit/s",
						Value: g * (1 + 0.01*float64(trial)) * 1e9, Labels: map[string]string{"side": "receiver"}})
				}
			}
			r, err := Build(in)
			if err != nil {
				t.Fatal(err)
			}
			items := r.tcgPairItems()
			if len(items) != len(tt.want) {
				t.Fatalf("%d items, want %d:\n%s", len(items), len(tt.want), strings.Join(items, "\n"))
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(items[i], w) {
					t.Errorf("item %d:\n%s\nwant it to begin\n%s", i, items[i], w)
				}
			}
		})
	}
}
