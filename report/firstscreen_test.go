package report

import (
	"bytes"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/results/metric"
)

// firstScreenCases are one synthetic run of study A, B and D each, with a
// claim of the study.
func firstScreenCases(t *testing.T) map[string]*Report {
	t.Helper()
	claim := Claim{Text: "a published conclusion", Check: func(*Report) ClaimResult {
		return ClaimResult{Outcome: NotShown, Evidence: "ratio 1.02 (95 % CI [0.95, 1.10]); rule: the CI must exclude 1"}
	}}
	a := sampleInput()
	a.Run.Env["docker"] = "Docker Engine 99.0.1"
	a.Run.Env["cgroup"] = "v2"
	b := sampleInputHTTP()
	b.Published.Claims = append(b.Published.Claims, claim)
	d := rttInput(false)
	d.Published = &Published{Study: "D. test", Claims: []Claim{claim}}
	out := map[string]*Report{}
	for name, in := range map[string]Input{"A": a, "B": b, "D": d} {
		r, err := Build(in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = r
	}
	return out
}

// TestFirstScreen: a study's report opens with its conclusions, one table
// row each with outcome and evidence, then its own figure beside the
// published values; the paired ratios follow the verdict as a table, not as
// bullets.
func TestFirstScreen(t *testing.T) {
	for name, r := range firstScreenCases(t) {
		t.Run(name, func(t *testing.T) {
			md := renderMarkdown(t, r)
			m := md.String()
			first := regexp.MustCompile(`(?m)^## .*$`).FindString(m)
			if first != "## The study's conclusions in this run" {
				t.Fatalf("the first section is %q, want the study's conclusions", first)
			}
			verdict := strings.Index(m, "## Verdict")
			for _, c := range r.Comparison.Claims {
				res := c.Check(r)
				line := "| " + c.Text + " | " + res.Outcome + " | " + res.Evidence + " |"
				if i := strings.Index(m, line); i < 0 || i > verdict {
					t.Errorf("no conclusions row %q before the verdict", line)
				}
			}
			if regexp.MustCompile(`(?m)^- .*× .*\(geometric mean of`).MatchString(m) {
				t.Error("the paired ratios are still bullets")
			}
			if len(r.Throughput) > 0 || len(r.Latency) > 0 {
				if i := strings.Index(m, "### Paired ratios per scenario"); i < verdict {
					t.Error("no ratio table after the verdict")
				}
			}

			var page bytes.Buffer
			if err := r.HTML(&page); err != nil {
				t.Fatal(err)
			}
			h := page.String()
			sec := regexp.MustCompile(`(?s)<section id="([^"]+)">.*?</section>`).FindStringSubmatch(h)
			if sec == nil || sec[1] != "conclusions" {
				t.Fatalf("the first HTML section is not the conclusions")
			}
			if !strings.Contains(sec[0], `<table id="conclusions-table">`) {
				t.Error("no conclusions table on the first screen")
			}
			if !strings.Contains(sec[0], `<figure id="chart-study-`) {
				t.Error("no study figure on the first screen")
			}
			if name != "D" && !strings.Contains(sec[0], ">"+publishedLabel) {
				t.Error("the study figure has no series labelled published")
			}
		})
	}
}

// TestStudyFigures: the figures carry this run's values and the published
// ones, each from where the report holds it.
func TestStudyFigures(t *testing.T) {
	rs := firstScreenCases(t)

	a := rs["A"].figures()
	if len(a) != 2 || a[0].Metric != MetricThroughput || a[1].Metric != MetricPingRTT {
		t.Fatalf("study A figures: %+v, want throughput and ping RTT", a)
	}
	thr := a[0]
	if strings.Join(thr.cats, ",") != "baseline,fw,fw-lb" {
		t.Errorf("throughput categories %v", thr.cats)
	}
	want := map[string]float64{"baseline": 29.5, "fw": 19.7, "fw-lb": 2.36}
	var pub, meas *figSeries
	for i := range thr.series {
		if thr.series[i].published {
			pub = &thr.series[i]
		} else {
			meas = &thr.series[i]
		}
	}
	if pub == nil || meas == nil || pub.name != publishedLabel {
		t.Fatalf("series %+v: want one measured and one labelled %q", thr.series, publishedLabel)
	}
	for _, p := range pub.pts {
		if v := want[thr.cats[p.cat]]; p.y != v {
			t.Errorf("published %s = %v, want %v", thr.cats[p.cat], p.y, v)
		}
	}
	for _, p := range meas.pts {
		s, _ := rs["A"].scenarioSummary(MetricThroughput, thr.cats[p.cat])
		if p.y != s.Mean || p.lo != s.CI95Low || p.hi != s.CI95High {
			t.Errorf("measured %s = %v [%v, %v], want %v [%v, %v]", thr.cats[p.cat], p.y, p.lo, p.hi, s.Mean, s.CI95Low, s.CI95High)
		}
	}

	b := rs["B"].figures()
	if len(b) != 1 || b[0].Metric != FigureHTTPChange {
		t.Fatalf("study B figures: %+v, want the HTTP grid", b)
	}
	checked := 0
	for _, se := range b[0].series {
		for _, p := range se.pts {
			scen := strings.TrimSuffix(se.name, " "+publishedLabel)
			for _, row := range rs["B"].Comparison.HTTP {
				if row.Scenario != scen || b[0].cats[p.cat] != row.Object+"\nc"+itoa(row.Concurrency) {
					continue
				}
				v := row.MeasuredChange
				if se.published {
					v = row.PublishedChange
				}
				if p.y != v {
					t.Errorf("%s %s: %v, want %v", se.name, b[0].cats[p.cat], p.y, v)
				}
				checked++
			}
		}
	}
	if checked == 0 {
		t.Error("no point of the HTTP grid checked")
	}

	d := rs["D"].figures()
	if len(d) != 1 || d[0].Metric != FigureRTT || strings.Join(d[0].cats, ",") != "0,8,32" {
		t.Fatalf("study D figures: %+v, want RTT per background count 0, 8, 32", d)
	}
	if !strings.Contains(d[0].Title, "1000 pps") {
		t.Errorf("the RTT figure's title %q does not say it shows the lowest rate, 1000 pps", d[0].Title)
	}
	checked = 0
	for _, se := range d[0].series {
		for _, p := range se.pts {
			for _, row := range rs["D"].RTT {
				if se.name == baseOf(row.Scenario) && row.Rate == "1000" && d[0].cats[p.cat] == itoa(max(row.Background, 0)) {
					if p.y != row.Path.Median {
						t.Errorf("%s at %s: %v, want the path median %v", se.name, d[0].cats[p.cat], p.y, row.Path.Median)
					}
					checked++
				}
			}
		}
	}
	if checked != 6 {
		t.Errorf("%d RTT points checked, want 6 (2 drivers x 3 counts)", checked)
	}
}

// TestStudyFigureTCGMark: a scenario whose VMs ran under TCG is drawn in a series of its own
// whose legend carries the mark, and the caption names it with the mark; the others stay in
// the plain series. Before, a TCG guest's point stood unmarked beside the published figure.
func TestStudyFigureTCGMark(t *testing.T) {
	in := sampleInput()
	in.Run.Env[EnvVMAccel] = "tcg: PVM host"
	for trial := 1; trial <= 3; trial++ {
		for _, sc := range in.Scenarios {
			rt := "netns"
			if sc == "fw" {
				rt = "vm"
			}
			in.Samples = append(in.Samples, results.Sample{Experiment: exp, Scenario: sc, Trial: trial, Probe: "deploy", Metric: "deploy_time",
				Unit: "s", Value: 1, Time: t0, Labels: map[string]string{"runtime": rt}})
		}
	}
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	f := r.figures()[0]
	if f.Metric != MetricThroughput {
		t.Fatalf("first figure %s, want throughput", f.Metric)
	}
	if !strings.HasSuffix(f.Title, "(fw: VMs under TCG, "+EmulatedMark+")") {
		t.Errorf("caption %q does not name fw with the mark", f.Title)
	}
	by := map[string][]string{}
	for _, se := range f.series {
		for _, p := range se.pts {
			by[se.name] = append(by[se.name], f.cats[p.cat])
		}
	}
	if got := strings.Join(by["this run, "+EmulatedMark+" (mean, 95 % CI)"], ","); got != "fw" {
		t.Errorf("marked series holds %q, want fw (series %v)", got, by)
	}
	if got := strings.Join(by["this run (mean, 95 % CI)"], ","); got != "baseline,fw-lb" {
		t.Errorf("plain series holds %q, want baseline,fw-lb", got)
	}
	var md bytes.Buffer
	if err := r.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(md.String(), "not run here: fw") {
		t.Error("the marked scenario is said not to have run")
	}
	// Published vs measured: fw's figures beside the published ones carry the mark, and no
	// D_th or K_lat against the baseline on a real CPU.
	for _, want := range []string{"| fw (" + EmulatedMark + ") | throughput | 19.70 Gbit/s | 21.55 Gbit/s | D_th 33.2 % | " + notComparable + " |",
		"| fw (" + EmulatedMark + ") | ping_rtt | 0.177 ms | 0.082 ms | K_lat +98.9 % | " + notComparable + " |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the published table lacks %q", want)
		}
	}
	// The throughput chart draws fw's bar apart, and its title says so.
	if title := r.chartTitleOf("throughput"); !strings.HasSuffix(title, "(orange bars: VMs under TCG, "+EmulatedMark+")") {
		t.Errorf("throughput chart title %q is not marked", title)
	}
	if _, err := r.throughputPlot(); err != nil {
		t.Fatal(err)
	}
	in.Run.Env[EnvVMAccel] = "kvm: checks passed"
	if r, err = Build(in); err != nil {
		t.Fatal(err)
	}
	if title := r.chartTitleOf("throughput"); strings.Contains(title, "TCG") {
		t.Errorf("throughput chart title %q is marked under KVM", title)
	}
}

// TestHostFactsFromEnvironment: what the first screen says about the host
// is what the run recorded, nothing else.
func TestHostFactsFromEnvironment(t *testing.T) {
	r := firstScreenCases(t)["A"]
	got := r.hostFacts()
	if !strings.Contains(got, "Docker Engine: Docker Engine 99.0.1") || !strings.Contains(got, "cgroup: v2") {
		t.Errorf("host facts %q do not carry the recorded environment", got)
	}
	if strings.Contains(got, "SR-IOV") {
		t.Errorf("host facts %q state SR-IOV, which the run did not record", got)
	}
	r.Run.Env = nil
	if got := r.hostFacts(); got != "" {
		t.Errorf("host facts without an environment: %q", got)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestUnknownMetricIsError: a sample whose probe/metric the vocabulary lacks (a probe
// renamed its metric, or a new probe came without its vocabulary) fails the report, naming
// it; a known metric the report does not show is a note.
func TestUnknownMetricIsError(t *testing.T) {
	for _, x := range []struct{ probe, metric string }{{"ethtool", "rx_dropped"}, {"iperf3", "througput"}, {"ping", "round_trip"}} {
		in := sampleInput()
		s := in.Samples[0]
		s.Probe, s.Metric = x.probe, x.metric
		in.Samples = append(in.Samples, s, s)
		_, err := Build(in)
		var unknown *metric.UnknownError
		if !errors.As(err, &unknown) || unknown.Probe != x.probe || unknown.Metric != x.metric || unknown.Count != 2 {
			t.Errorf("%s/%s: Build error %v, want an UnknownError for its 2 samples", x.probe, x.metric, err)
		}
	}
	r, err := Build(sampleInput())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Other) == 0 || r.Other[0].Probe != "iperf3" || r.Other[0].Metric != "retransmits" || r.Other[0].Unit != "count" {
		t.Errorf("a known metric no section reads is not under Other measurements: %+v", r.Other)
	}
}

func TestWrapTitle(t *testing.T) {
	for _, c := range []struct {
		in   string
		w    int
		want string
	}{
		{"short", 60, "short"},
		{"Throughput per scenario, this run beside the published figures", 40, "Throughput per scenario, this run beside\nthe published figures"},
		{"averyveryverylongword next", 5, "averyveryverylongword\nnext"},
	} {
		if got := wrapTitle(c.in, c.w); got != c.want {
			t.Errorf("wrapTitle(%q, %d) = %q, want %q", c.in, c.w, got, c.want)
		}
	}
}

// TestOutcomeClass: the first screen colours each outcome by what it says.
func TestOutcomeClass(t *testing.T) {
	for outcome, want := range map[string]string{Holds: "holds", HoldsDirection: "partly", DoesNotHold: "fails", NotShown: "unknown", "not measurable here": "unknown"} {
		if got := outcomeClass(outcome); got != want {
			t.Errorf("outcomeClass(%q) = %q, want %q", outcome, got, want)
		}
	}
}

func TestTrimSharedSuffix(t *testing.T) {
	for _, c := range [][3]string{
		{"docker-nat-cache", "native-cache", "docker-nat"},
		{"docker-routed-nocache", "native-nocache", "docker-routed"},
		{"docker-nat", "native", "docker-nat"},
		{"-cache", "native-cache", "-cache"},
		{"kvm-x", "native-cache", "kvm-x"},
	} {
		if got := trimSharedSuffix(c[0], c[1]); got != c[2] {
			t.Errorf("trimSharedSuffix(%q, %q) = %q, want %q", c[0], c[1], got, c[2])
		}
	}
}
