package report

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/stats"
)

var (
	update     = flag.Bool("update", false, "rewrite the golden files in testdata/")
	htmlSample = flag.String("html-sample", "", "also write the sample HTML report to this file")
)

var t0 = time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)

const exp = "study-a"

// studyA is study A's published figures, mapped onto this run's scenarios.
func studyA() *Published {
	return &Published{
		Study:     "A. Docker-based NFV service chaining on a single host (2026)",
		Source:    "tables 3-5 of the paper",
		Reference: "R. Z. Fitroh, I. N. Ichsan, \"Performance Analysis of Docker-based NFV Service Chaining Networks in a Single-Host Environment\", Sistemasi: Jurnal Sistem Informasi 15(2), 2026",
		Claims: []Claim{{Text: "the L4 proxy is the bottleneck", Check: func(r *Report) ClaimResult {
			b, ok := r.BusiestNode("fw-lb")
			if !ok || b.Node != "lb" {
				return ClaimResult{Outcome: DoesNotHold, Evidence: "lb is not the busiest node of fw-lb"}
			}
			return ClaimResult{Outcome: Holds, Evidence: "lb is the busiest node of fw-lb (" + f2(b.Total.Mean) + " cores)"}
		}}},
		Rows: []PublishedRow{
			{Scenario: "baseline", Metric: MetricThroughput, Value: 29.5, Unit: "Gbit/s"},
			{Scenario: "fw", Metric: MetricThroughput, Value: 19.7, Unit: "Gbit/s"},
			{Scenario: "fw-lb", Metric: MetricThroughput, Value: 2.36, Unit: "Gbit/s"},
			{Scenario: "baseline", Metric: MetricPingRTT, Value: 0.089, Unit: "ms"},
			{Scenario: "fw", Metric: MetricPingRTT, Value: 0.177, Unit: "ms"},
			{Scenario: "fw-lb", Metric: MetricPingRTT, Text: "N/A"}, // no unit needed with Text
			{Scenario: "fw", Metric: NodeMetric(MetricCPUTotal, "fw"), Value: 0.01, Unit: "%"},
			{Scenario: "fw-lb", Metric: NodeMetric(MetricCPUTotal, "lb"), Value: 118.42, Unit: "%"},
		},
	}
}

// sampleInput is a synthetic run of study A: three scenarios of three
// trials, fw trial 2 failed (its samples must be left out), fw-lb without
// ping replies and with one trial that has only the iperf3 sender figure.
func sampleInput() Input {
	in := Input{
		Run: results.Run{Experiment: exp, Study: "A", Started: t0, Ended: t0.Add(14*time.Minute + 3*time.Second), Complete: true,
			Env: map[string]string{
				"kernel": "6.8.0-45-generic", "cpu": "Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz", "cores": "2",
				"iperf3": "3.16", "haproxy": "2.8.5", "iptables": "1.8.10 (nf_tables)", "sfclab": "v0.1.0-test",
			}},
		Scenarios: []string{"baseline", "fw", "fw-lb"},
		Published: studyA(),
	}
	type cpu struct{ user, sys float64 }
	thr := map[string][]float64{"baseline": {27.9, 28.4, 28.6}, "fw": {21.2, 17.0, 21.9}, "fw-lb": {2.51, 2.58, 2.62}}
	ping := map[string]float64{"baseline": 0.052, "fw": 0.071}
	rtt := map[string]float64{"baseline": 0.050, "fw": 0.095, "fw-lb": 0.300}
	conn := map[string]float64{"baseline": 0.070, "fw": 0.120, "fw-lb": 0.250}
	nodes := map[string][]string{"baseline": {"client", "server"}, "fw": {"client", "fw", "server"}, "fw-lb": {"client", "fw", "lb", "server"}}
	cpus := map[string]map[string]cpu{
		"baseline": {"client": {0.10, 0.85}, "server": {0.05, 0.95}},
		"fw":       {"client": {0.08, 0.70}, "fw": {0.0002, 0.0003}, "server": {0.04, 0.80}},
		"fw-lb":    {"client": {0.02, 0.15}, "fw": {0.0001, 0.0002}, "lb": {0.23, 0.91}, "server": {0.01, 0.18}},
	}
	softirq := map[string]float64{"baseline": 0.30, "fw": 0.43, "fw-lb": 0.12}

	n := 0
	add := func(sc string, trial int, probe, metric string, v float64, unit string, labels map[string]string) {
		n++
		in.Samples = append(in.Samples, results.Sample{Experiment: exp, Scenario: sc, Trial: trial, Probe: probe, Metric: metric,
			Value: v, Unit: unit, Time: t0.Add(time.Duration(n) * time.Second), Labels: labels})
	}
	for si, sc := range in.Scenarios {
		for trial := 1; trial <= 3; trial++ {
			start := t0.Add(time.Duration(si*3+trial-1) * time.Minute)
			tr := results.Trial{Experiment: exp, Scenario: sc, Trial: trial, Status: results.TrialOK, Started: start, Ended: start.Add(41 * time.Second)}
			if sc == "fw" && trial == 2 {
				tr.Status = results.TrialFailed
				tr.Error = "iperf3: error - unable to receive results: Connection reset by peer"
				tr.Ended = start.Add(12500 * time.Millisecond)
			}
			in.Trials = append(in.Trials, tr)

			if ref, ok := ping[sc]; ok {
				for seq := 1; seq <= 10; seq++ {
					v := ref + 0.001*float64(trial) + 0.002*float64((seq*7+trial*3)%10)
					add(sc, trial, "ping", "rtt", v, "ms", map[string]string{"seq": fmt.Sprint(seq)})
				}
			} else {
				add(sc, trial, "ping", "loss", 100, "%", map[string]string{"icmp_path": "none"})
			}
			for k := 1; k <= 20; k++ {
				add(sc, trial, "tcprtt", "rtt", rtt[sc]*(1+0.01*float64((k*13+trial)%17))+0.002*float64(trial), "ms", nil)
			}
			for k := 1; k <= 5; k++ {
				add(sc, trial, "tcprtt", "connect", conn[sc]*(1+0.02*float64((k*3+trial)%5)), "ms", nil)
			}
			g := thr[sc][trial-1] * 1e9
			fl := map[string]string{"protocol": "tcp", "streams": "1"}
			if !(sc == "fw-lb" && trial == 3) {
				add(sc, trial, "iperf3", "throughput", g, "bit/s", with(fl, "side", "receiver"))
			}
			add(sc, trial, "iperf3", "throughput", g+0.004e9, "bit/s", with(fl, "side", "sender"))
			d := 0.01 * float64(trial-2)
			for _, node := range nodes[sc] {
				c := cpus[sc][node]
				if c.user > 0.01 {
					c.user += d / 2
					c.sys += d / 2
				}
				add(sc, trial, "cpu", "cpu_user", c.user, "cores", map[string]string{"node": node})
				add(sc, trial, "cpu", "cpu_system", c.sys, "cores", map[string]string{"node": node})
			}
			add(sc, trial, "cpu", "softirq", softirq[sc]+d, "cores", map[string]string{"node": "host"})
			// The span the figures cover: inside a 10 s transfer read every 100 ms.
			add(sc, trial, "cpu", "window", 9.8+0.05*float64(trial), "s", map[string]string{"bound": "inside"})
		}
	}
	// A known metric the report does not show is counted, not dropped silently.
	add("baseline", 1, "iperf3", "retransmits", 0, "count", map[string]string{"side": "sender"})
	return in
}

func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for a, b := range m {
		out[a] = b
	}
	return out
}

// renderMarkdown renders r's Markdown report.
func renderMarkdown(t *testing.T, r *Report) *bytes.Buffer {
	t.Helper()
	var md bytes.Buffer
	if err := r.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	return &md
}

// renderHTML renders r's HTML page; sample, when not "", is a file (a test flag's) to write
// the page to as well, for a look in a browser.
func renderHTML(t *testing.T, r *Report, sample string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := r.HTML(&buf); err != nil {
		t.Fatal(err)
	}
	if sample != "" {
		if err := os.WriteFile(sample, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", sample)
	}
	return buf.String()
}

func buildSample(t *testing.T) *Report {
	t.Helper()
	r, err := Build(sampleInput())
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return r
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./report/ -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./report/ -update rewrites it):\n--- got\n%s", path, got)
	}
}

func TestMarkdownGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := buildSample(t).Markdown(&buf); err != nil {
		t.Fatal(err)
	}
	golden(t, "sample.md", buf.Bytes())
}

func TestSummaryCSVGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := buildSample(t).SummaryCSV(&buf); err != nil {
		t.Fatal(err)
	}
	golden(t, "summary.csv", buf.Bytes())
}

func TestFigures(t *testing.T) {
	r := buildSample(t)
	th := map[string]ThroughputRow{}
	for _, row := range r.Throughput {
		th[row.Scenario] = row
	}
	if got := th["fw"].Gbits; len(got) != 2 || math.Abs(got[0]-21.2) > 1e-9 || math.Abs(got[1]-21.9) > 1e-9 {
		t.Errorf("fw per-trial throughput %v: the failed trial 2 must be left out", got)
	}
	if got := th["fw-lb"].Gbits; len(got) != 3 || math.Abs(got[2]-2.624) > 1e-9 {
		t.Errorf("fw-lb per-trial throughput %v: trial 3 should fall back to the sender (2.624)", got)
	}
	if th["fw-lb"].Side != "receiver+sender" {
		t.Errorf("fw-lb side %q", th["fw-lb"].Side)
	}
	want := stats.Degradation(stats.Summarize([]float64{27.9, 28.4, 28.6}).Mean, stats.Summarize([]float64{21.2, 21.9}).Mean)
	if got := th["fw"].Degradation; math.Abs(got-want) > 1e-9 {
		t.Errorf("fw D_th = %v, want %v", got, want)
	}
	if p := th["fw-lb"].PValue; math.Abs(p-0.1) > 1e-12 {
		t.Errorf("fw-lb Mann-Whitney p = %v, want 0.1 (exact, 3 vs 3, complete separation)", p)
	}
	if !math.IsNaN(th["baseline"].PValue) || !math.IsNaN(th["baseline"].Degradation) {
		t.Errorf("baseline compares with itself: %+v", th["baseline"])
	}

	var ping LatencyRow
	for _, row := range r.Latency {
		if row.Scenario == "fw-lb" && row.Metric == MetricPingRTT {
			ping = row
		}
	}
	if ping.Missing != NoICMPPath {
		t.Errorf("fw-lb ping: Missing %q, want %q", ping.Missing, NoICMPPath)
	}

	if len(r.Failed) != 1 || r.Failed[0].Scenario != "fw" || r.Failed[0].Trial != 2 || r.Failed[0].Excluded == 0 {
		t.Errorf("failed trials %+v: want fw trial 2 with its samples counted as left out", r.Failed)
	}
	findings := strings.Join(r.CPUFindings, "\n")
	for _, s := range []string{
		"fw-lb: lb 1.14 cores (0.23 user, 0.91 system) at 2.57 Gbit/s, the busiest node and the bottleneck candidate",
		"fw 0.00 cores in its own cgroup — its forwarding runs in host softirq (0.12 cores)",
		"fw: server 0.84 cores (0.04 user, 0.80 system) at 21.55 Gbit/s, the busiest node",
		"fw 0.00 cores in its own cgroup — its forwarding runs in host softirq (0.43 cores)",
	} {
		if !strings.Contains(findings, s) {
			t.Errorf("CPU findings lack %q:\n%s", s, findings)
		}
	}
	var notes = strings.Join(r.Notes, "\n")
	if len(r.Other) != 1 || r.Other[0].Labels != "side=sender" || !strings.Contains(notes, "fw-lb trial 3: no receiver sample") {
		t.Errorf("notes:\n%s", notes)
	}
}

func TestPublishedOnlyInComparison(t *testing.T) {
	r := buildSample(t)
	md := renderMarkdown(t, r)
	text := md.String()
	i := strings.Index(text, "## Published vs measured")
	j := strings.Index(text, "## Failed trials")
	if i < 0 || j < i {
		t.Fatalf("no published section before the failed trials")
	}
	for _, v := range []string{"29.50 Gbit/s", "19.70 Gbit/s", "0.089 ms", "118.42 %"} {
		if !strings.Contains(text[i:j], v) {
			t.Errorf("published value %q missing from the comparison table", v)
		}
		if strings.Contains(text[:i], v) || strings.Contains(text[j:], v) {
			t.Errorf("published value %q appears outside the comparison table", v)
		}
	}
	for _, h := range []string{"| published |", "| measured (this run) |"} {
		if !strings.Contains(text[i:j], h) {
			t.Errorf("comparison table lacks the column %q", h)
		}
	}
	c := r.Comparison.Rows
	if got := c[1].PublishedChange; math.Abs(got-stats.Degradation(29.5, 19.7)) > 1e-9 {
		t.Errorf("published D_th of fw = %v", got)
	}
	if c[5].MeasuredText != NoICMPPath || c[5].PublishedText != "N/A" {
		t.Errorf("fw-lb ping row %+v", c[5])
	}
	if got := c[7].Measured; math.Abs(got-114) > 1e-9 {
		t.Errorf("lb CPU measured in %% = %v, want 114", got)
	}
}

func TestHTMLStructure(t *testing.T) {
	r := buildSample(t)
	page := renderHTML(t, r, *htmlSample)
	if !strings.HasPrefix(page, "<!DOCTYPE html>") {
		t.Error("no doctype")
	}
	if n := strings.Count(page, "<svg"); n != 7 {
		t.Errorf("%d inline SVG charts, want 7 (the study's throughput and ping RTT, throughput, 3 latency, cpu)", n)
	}
	if strings.Contains(page, "<?xml") || strings.Contains(page, "<!-- Generated") {
		t.Error("SVG prolog not stripped")
	}
	stripped := strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, "")
	stripped = strings.ReplaceAll(stripped, `xmlns:xlink="http://www.w3.org/1999/xlink"`, "")
	for _, bad := range []string{"http://", "https://", "url(", "<script", "<link", "src="} {
		if strings.Contains(stripped, bad) {
			i := strings.Index(stripped, bad)
			t.Errorf("page contains %q (external reference?): ...%s...", bad, stripped[max(0, i-80):min(len(stripped), i+80)])
		}
	}
	for _, id := range []string{"run-table", "env-table", "trials-table", "throughput-table", "latency-table",
		"cpu-table", "published-table", "failed-table"} {
		if !strings.Contains(page, `<table id="`+id+`"`) {
			t.Errorf("table %s missing", id)
		}
	}
	for _, s := range []string{"measured (this run)", NoICMPPath, "Connection reset by peer", "<style>"} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	if err := checkBalanced(page); err != nil {
		t.Errorf("HTML not well-formed: %v", err)
	}
}

// voidElements are the HTML elements without an end tag.
var voidElements = map[string]bool{"meta": true, "br": true, "hr": true, "img": true, "link": true, "input": true,
	"area": true, "base": true, "col": true, "embed": true, "source": true, "track": true, "wbr": true}

var tagRE = regexp.MustCompile(`<(/?)([a-zA-Z][a-zA-Z0-9:-]*)([^<>]*?)(/?)>|<`)

// checkBalanced checks that every start tag has its end tag in the right
// order and that no stray "<" occurs in text (the style sheet holds none).
func checkBalanced(page string) error {
	page = strings.TrimPrefix(page, "<!DOCTYPE html>")
	var stack []string
	for _, m := range tagRE.FindAllStringSubmatchIndex(page, -1) {
		if m[4] < 0 {
			return fmt.Errorf("stray '<' at offset %d: %q", m[0], page[m[0]:min(len(page), m[0]+40)])
		}
		closing, name, self := page[m[2]:m[3]] == "/", strings.ToLower(page[m[4]:m[5]]), page[m[8]:m[9]] == "/"
		switch {
		case closing:
			if len(stack) == 0 || stack[len(stack)-1] != name {
				return fmt.Errorf("</%s> at offset %d closes %v", name, m[0], stack)
			}
			stack = stack[:len(stack)-1]
		case self || voidElements[name]:
		default:
			stack = append(stack, name)
		}
	}
	if len(stack) > 0 {
		return fmt.Errorf("unclosed elements %v", stack)
	}
	return nil
}

func TestCheckBalanced(t *testing.T) {
	for _, bad := range []string{"<p><b></p></b>", "<div>", "<p>1 < 2</p>"} {
		if checkBalanced(bad) == nil {
			t.Errorf("checkBalanced(%q) passed", bad)
		}
	}
	if err := checkBalanced(`<p class="x">a<br><svg><path d="M0"/></svg></p>`); err != nil {
		t.Error(err)
	}
}

func TestDeterministic(t *testing.T) {
	render := func() (md, html, csv []byte) {
		r := buildSample(t)
		var a, b, c bytes.Buffer
		if err := r.Markdown(&a); err != nil {
			t.Fatal(err)
		}
		if err := r.HTML(&b); err != nil {
			t.Fatal(err)
		}
		if err := r.SummaryCSV(&c); err != nil {
			t.Fatal(err)
		}
		return a.Bytes(), b.Bytes(), c.Bytes()
	}
	m1, h1, c1 := render()
	for range 3 {
		m2, h2, c2 := render()
		if !bytes.Equal(m1, m2) || !bytes.Equal(h1, h2) || !bytes.Equal(c1, c2) {
			t.Fatal("two renderings of the same input differ")
		}
	}
}

func TestWriteCharts(t *testing.T) {
	r := buildSample(t)
	dir := t.TempDir()
	paths, err := r.WriteCharts(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"study-throughput.svg", "study-ping-rtt.svg", "throughput.svg", "latency-ping-rtt.svg", "latency-tcprtt-rtt.svg", "latency-tcprtt-connect.svg", "cpu.svg"}
	if len(paths) != len(want) {
		t.Fatalf("wrote %v, want %v", paths, want)
	}
	for i, p := range paths {
		if filepath.Base(p) != want[i] {
			t.Errorf("chart %d is %s, want %s", i, p, want[i])
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("<svg")) || !bytes.Contains(b, []byte("</svg>")) {
			t.Errorf("%s is not an SVG document", p)
		}
	}
	md := renderMarkdown(t, r)
	for _, f := range want {
		if !strings.Contains(md.String(), "]("+f+")") {
			t.Errorf("Markdown does not link %s", f)
		}
	}
}

func TestIncompleteAndEmpty(t *testing.T) {
	in := Input{Run: results.Run{Experiment: "x", Started: t0}}
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	var md, html, csv bytes.Buffer
	if err := r.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	if err := r.HTML(&html); err != nil {
		t.Fatal(err)
	}
	if err := r.SummaryCSV(&csv); err != nil {
		t.Fatal(err)
	}
	first := strings.SplitN(md.String(), "\n", 2)[0]
	if !strings.Contains(first, IncompleteMark) {
		t.Errorf("first line %q lacks %q", first, IncompleteMark)
	}
	if !strings.Contains(html.String(), IncompleteMark) {
		t.Error("HTML lacks the incomplete mark")
	}
	if err := checkBalanced(html.String()); err != nil {
		t.Error(err)
	}
	if strings.Count(csv.String(), "\n") != 1 {
		t.Errorf("empty run: CSV should be the header only:\n%s", csv.String())
	}
}

func TestPValueNotAvailable(t *testing.T) {
	in := sampleInput()
	// Scenario "lonely" has a single trial without any throughput sample.
	in.Trials = append(in.Trials, results.Trial{Experiment: exp, Scenario: "lonely", Trial: 1, Status: results.TrialOK})
	in.Samples = append(in.Samples, results.Sample{Experiment: exp, Scenario: "lonely", Trial: 1, Probe: "tcprtt", Metric: "rtt", Value: 1, Unit: "ms"})
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	last := r.Throughput[len(r.Throughput)-1]
	if last.Scenario != "lonely" || last.Summary.N != 0 || !math.IsNaN(last.PValue) || last.PValueErr == "" {
		t.Errorf("row without data: %+v", last)
	}
	md := renderMarkdown(t, r)
	if !strings.Contains(md.String(), "| lonely | — | — | 0 | no data |") {
		t.Errorf("no-data row not shown:\n%s", md.String())
	}
	if !strings.Contains(md.String(), "| lonely | ping RTT (ICMP echo) | 0 | 0 | no samples") {
		t.Error("lonely has tcprtt samples but no ping and no word that its chain has no ICMP path: should be no samples, not " + NoICMPPath)
	}
	// A single trial against three: the exact test runs (no error) but
	// cannot be small; with an empty side it returns an error shown as n/a.
	if _, err := stats.MannWhitneyU(nil, []float64{1}); err == nil {
		t.Fatal("expected an error from MannWhitneyU with an empty sample")
	}
}

func TestBuildErrors(t *testing.T) {
	in := sampleInput()
	in.Baseline = "nope"
	if _, err := Build(in); err == nil || !strings.Contains(err.Error(), "baseline") {
		t.Errorf("unknown baseline: %v", err)
	}
	in = sampleInput()
	in.Published.Rows = append(in.Published.Rows, PublishedRow{Scenario: "fw", Metric: "memory", Value: 1, Unit: "MB"})
	if _, err := Build(in); err == nil || !strings.Contains(err.Error(), "unknown metric") {
		t.Errorf("unknown published metric: %v", err)
	}
	in = sampleInput()
	in.Published.Rows = append(in.Published.Rows, PublishedRow{Scenario: "fw", Metric: MetricPingRTT, Value: 1, Unit: "Gbit/s"})
	if _, err := Build(in); err == nil || !strings.Contains(err.Error(), "unit") {
		t.Errorf("wrong published unit: %v", err)
	}
}

func TestScenarioOrderAndBaseline(t *testing.T) {
	in := sampleInput()
	in.Scenarios = []string{"fw-lb", "baseline"} // fw is appended
	in.Baseline = "baseline"
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Scenarios, ","); got != "fw-lb,baseline,fw" {
		t.Errorf("scenarios %s", got)
	}
	in.Scenarios, in.Baseline = nil, ""
	r, err = Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if r.Baseline != "baseline" || strings.Join(r.Scenarios, ",") != "baseline,fw,fw-lb" {
		t.Errorf("default order %v, baseline %s", r.Scenarios, r.Baseline)
	}
}

func TestInlineSVG(t *testing.T) {
	doc := []byte("<?xml version=\"1.0\"?>\n<!-- Generated by SVGo and Plotinum VG -->\n<svg width=\"504pt\" height=\"288pt\" viewBox=\"0 0 504 288\"\n\txmlns=\"http://www.w3.org/2000/svg\"\n\txmlns:xlink=\"http://www.w3.org/1999/xlink\">\n</svg>\n")
	got := string(inlineSVG(doc, `a "b" <c>`))
	want := "<svg class=\"chart\" role=\"img\" aria-label=\"a &quot;b&quot; &lt;c&gt;\" viewBox=\"0 0 504 288\"\n\txmlns=\"http://www.w3.org/2000/svg\">\n</svg>\n"
	if got != want {
		t.Errorf("inlineSVG:\n got %q\nwant %q", got, want)
	}
}

func TestSeveralFailedTrials(t *testing.T) {
	in := sampleInput()
	for i := range in.Trials {
		if in.Trials[i].Scenario == "fw-lb" && in.Trials[i].Trial != 2 || in.Trials[i].Scenario == "baseline" && in.Trials[i].Trial == 3 {
			in.Trials[i].Status = "running"
		}
	}
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Failed) != 4 {
		t.Fatalf("%d failed trials, want 4: %+v", len(r.Failed), r.Failed)
	}
	for _, f := range r.Failed {
		if f.Excluded == 0 {
			t.Errorf("%s trial %d: no samples counted as left out", f.Scenario, f.Trial)
		}
	}
	for _, c := range r.Trials {
		if c.Scenario == "fw-lb" && (c.OK != 1 || c.Failed != 2) {
			t.Errorf("fw-lb trial counts %+v", c)
		}
	}
}

// TestSectionsOnlyWhenSampled checks that the throughput, latency and CPU sections appear only
// for a run with samples of them: a run that measured none (study D's, round trips only) has
// no section saying "no samples", and one whose samples came from failed trials only keeps the
// section with that reason.
func TestSectionsOnlyWhenSampled(t *testing.T) {
	deploy := results.Sample{Scenario: "a", Trial: 1, Probe: "deploy", Metric: "deploy_time", Value: 2, Unit: "s"}
	thr := results.Sample{Scenario: "a", Trial: 1, Probe: "iperf3", Metric: "throughput", Value: 1e9, Unit: "bit/s", Labels: map[string]string{"side": "receiver"}}
	ping := results.Sample{Scenario: "a", Trial: 1, Probe: "ping", Metric: "rtt", Value: 0.05, Unit: "ms"}
	cpu := results.Sample{Scenario: "a", Trial: 1, Probe: "cpu", Metric: "cpu_user", Value: 0.1, Unit: "cores", Labels: map[string]string{"node": "client"}}
	cases := []struct {
		name    string
		samples []results.Sample
		failed  bool
		want    []string // sections present
		absent  []string // sections left out
		reason  bool     // the "failed trials" reason is said
	}{
		{"none measured", []results.Sample{deploy}, false, nil, []string{"Throughput", "Latency", "CPU"}, false},
		{"throughput only", []results.Sample{deploy, thr}, false, []string{"Throughput"}, []string{"Latency", "CPU"}, false},
		{"latency and cpu", []results.Sample{ping, cpu}, false, []string{"Latency", "CPU"}, []string{"Throughput"}, false},
		{"failed trial only", []results.Sample{thr, ping, cpu}, true, []string{"Throughput", "Latency", "CPU"}, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status := results.TrialOK
			if c.failed {
				status = results.TrialFailed
			}
			in := Input{Run: results.Run{Experiment: exp, Started: t0, Ended: t0.Add(time.Minute), Complete: true},
				Trials: []results.Trial{{Experiment: exp, Scenario: "a", Trial: 1, Status: status, Started: t0, Ended: t0.Add(time.Minute)}}}
			for _, x := range c.samples {
				x.Experiment, x.Time = exp, t0
				in.Samples = append(in.Samples, x)
			}
			r, err := Build(in)
			if err != nil {
				t.Fatal(err)
			}
			var md strings.Builder
			if err := r.Markdown(&md); err != nil {
				t.Fatal(err)
			}
			for _, s := range c.want {
				if !strings.Contains(md.String(), "\n## "+s+"\n") {
					t.Errorf("section %s missing:\n%s", s, md.String())
				}
			}
			for _, s := range c.absent {
				if strings.Contains(md.String(), "\n## "+s+"\n") {
					t.Errorf("section %s present in a run without its samples:\n%s", s, md.String())
				}
			}
			if got := strings.Count(md.String(), failedOnly); c.reason && got != len(c.want) || !c.reason && got != 0 {
				t.Errorf("%d sections say their samples came from failed trials only, want %d", got, map[bool]int{true: len(c.want)}[c.reason])
			}
		})
	}
}

// TestNotRunScenarios checks that a study scenario this run left out (its reason in the run's
// environment, as `reproduce --runtime vm` records it) reads "not run" with the reason in the
// published-vs-measured table and in the study charts' captions and notes, and that a scenario
// merely without samples still reads "not measured".
func TestNotRunScenarios(t *testing.T) {
	const why = "not run: --runtime vm runs only the VM scenarios and the scenarios they are compared with"
	cases := []struct {
		name     string
		reason   string
		wantCell string
	}{
		{"left out with a reason", why, NotRunText},
		{"no samples, no reason", "", "not measured"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := sampleInput()
			in.Scenarios = []string{"baseline", "fw"}
			in.Trials = slices.DeleteFunc(in.Trials, func(x results.Trial) bool { return x.Scenario == "fw-lb" })
			in.Samples = slices.DeleteFunc(in.Samples, func(x results.Sample) bool { return x.Scenario == "fw-lb" })
			if c.reason != "" {
				in.Run.Env[EnvNotRun+"fw-lb"] = c.reason
			}
			r, err := Build(in)
			if err != nil {
				t.Fatal(err)
			}
			rows := 0
			for _, row := range r.Comparison.Rows {
				if row.Scenario != "fw-lb" {
					continue
				}
				rows++
				if row.MeasuredText != c.wantCell {
					t.Errorf("%s: measured %q, want %q", row.Metric, row.MeasuredText, c.wantCell)
				}
			}
			if rows == 0 {
				t.Fatal("no published row of fw-lb")
			}
			var md strings.Builder
			if err := r.Markdown(&md); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(md.String(), "- fw-lb: "+why); got != (c.reason != "") {
				t.Errorf("reason under the table: %v, want %v", got, c.reason != "")
			}
			var thr *studyFigure
			for _, f := range r.figures() {
				if f.Metric == MetricThroughput {
					thr = &f
				}
			}
			if thr == nil {
				t.Fatal("no throughput figure")
			}
			named := strings.Contains(thr.Title, "not run here: fw-lb;")
			explained := strings.Contains(thr.Note, "fw-lb: "+why+".")
			if named != (c.reason != "") || explained != (c.reason != "") {
				t.Errorf("caption %q / note %q: want fw-lb named not run and why: %v", thr.Title, thr.Note, c.reason != "")
			}
			if strings.Contains(thr.Title, "baseline") || strings.Contains(thr.Note, "baseline:") {
				t.Errorf("a scenario that ran is named not run: %q / %q", thr.Title, thr.Note)
			}
		})
	}
}

// TestKeptRuntimeListed checks that the Run section names the scenarios that kept the runtime
// they name against --runtime (EnvKeptRuntime), and says nothing of the kind when none did.
func TestKeptRuntimeListed(t *testing.T) {
	const head = "Scenarios that kept the runtime they name (--runtime applies only to scenarios that name none):"
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"two kept", map[string]string{EnvKeptRuntime + "fw": "netns", EnvKeptRuntime + "baseline": "docker"}, []string{head, "- baseline: docker", "- fw: netns"}},
		{"none kept", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := sampleInput()
			for k, v := range tc.env {
				in.Run.Env[k] = v
			}
			r, err := Build(in)
			if err != nil {
				t.Fatal(err)
			}
			var md strings.Builder
			if err := r.Markdown(&md); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(md.String(), w) {
					t.Errorf("report lacks %q", w)
				}
			}
			if tc.want == nil && strings.Contains(md.String(), head) {
				t.Error("a run where no scenario kept its runtime lists some")
			}
		})
	}
}
