package report

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/stats"
)

var htmlSampleHTTP = flag.String("html-sample-http", "", "also write the sample HTTP (study B) HTML report to this file")

const expB = "study-b"

// kvmText is the text of the text-only KVM row of the sample.
const kvmText = "not measured: no hardware virtualisation"

// studyBSample is a part of study B's published table, mapped onto the
// sample's scenarios, with KVM rows this run cannot measure.
func studyBSample() *Published {
	type cell struct{ s, ci float64 }
	rows := []struct {
		conc   int
		object string
		v      [4]cell // native, docker-routed, docker-nat, kvm
	}{
		{1, "1k", [4]cell{{6.98, 0.02}, {7.48, 0.02}, {7.48, 0.02}, {9.24, 0.27}}},
		{1, "1M", [4]cell{{97.41, 0.03}, {98.96, 0.16}, {99.06, 0.17}, {370.74, 11.81}}},
		{100, "1k", [4]cell{{2.05, 0.01}, {2.38, 0.01}, {2.49, 0.01}, {3.33, 0.02}}},
		{100, "1M", [4]cell{{87.98, 1.52}, {87.85, 1.63}, {87.93, 1.65}, {172.68, 1.05}}},
	}
	p := &Published{
		Study:        "B. Virtualized HTTP proxy in KVM and Docker (Eiras, Couto, Rubinstein)",
		Source:       "the study's slides, seconds for 10,000 requests, no cache",
		HTTPRequests: 10000,
		Reference:    "R. S. Eiras, R. S. Couto, M. G. Rubinstein, \"Performance Evaluation of a Virtualized HTTP Proxy in KVM and Docker\", 7th International Conference on the Network of the Future (NOF), 2016",
		Notes: []string{
			"KVM is not measured: this host has no hardware virtualisation.",
			"The study ran 10 repetitions; this sample runs 3.",
		},
	}
	for _, r := range rows {
		for i, sc := range []string{"native", "docker-routed", "docker-nat", "kvm"} {
			p.HTTP = append(p.HTTP, PublishedHTTP{Scenario: sc, Object: r.object, Concurrency: r.conc, Seconds: r.v[i].s, CI: r.v[i].ci})
		}
	}
	p.HTTP = append(p.HTTP,
		// An object this run did not request.
		PublishedHTTP{Scenario: "native", Object: "10M", Concurrency: 1, Seconds: 903.63, CI: 0.29},
		// A text-only row: no figure, only why.
		PublishedHTTP{Scenario: "kvm", Object: "10M", Concurrency: 1, Text: kvmText},
	)
	return p
}

// httpTimes are the sample's mean total times in s, by concurrency,
// object and scenario.
var httpTimes = map[int]map[string]map[string]float64{
	1:   {"1k": {"native": 6.41, "docker-routed": 6.93, "docker-nat": 6.97}, "1M": {"native": 91.2, "docker-routed": 92.6, "docker-nat": 93.1}},
	100: {"1k": {"native": 1.87, "docker-routed": 2.21, "docker-nat": 2.36}, "1M": {"native": 84.1, "docker-routed": 84.4, "docker-nat": 85.0}},
}

var sampleSizes = map[string]float64{"1k": 1024, "1M": 1 << 20}

// sampleInputHTTP is a synthetic run of study B: three scenarios, two
// objects (listed 1M first: the report orders them by size) at
// concurrency 1 and 100, three trials, 10,000 requests per run, a few
// request times per run, ab beside the probe at concurrency 1, deploy
// times, background load, and docker stats CPU for the docker scenarios.
func sampleInputHTTP() Input {
	in := Input{
		Run: results.Run{Experiment: expB, Study: "B", Started: t0, Ended: t0.Add(47*time.Minute + 12*time.Second), Complete: true,
			Env: map[string]string{"kernel": "6.8.0-45-generic", "cores": "4", "sfclab": "v0.1.0-test", "squid": "6.6", "ab": "2.3"}},
		Scenarios: []string{"native", "docker-routed", "docker-nat"},
		Published: studyBSample(),
	}
	n := 0
	add := func(sc string, trial int, probe, metric string, v float64, unit string, labels map[string]string) {
		n++
		in.Samples = append(in.Samples, results.Sample{Experiment: expB, Scenario: sc, Trial: trial, Probe: probe, Metric: metric,
			Value: v, Unit: unit, Time: t0.Add(time.Duration(n) * time.Second), Labels: labels})
	}
	deploy := map[string]float64{"native": 0.43, "docker-routed": 1.92, "docker-nat": 2.04}
	for si, sc := range in.Scenarios {
		for trial := 1; trial <= 3; trial++ {
			start := t0.Add(time.Duration(si*3+trial-1) * 5 * time.Minute)
			in.Trials = append(in.Trials, results.Trial{Experiment: expB, Scenario: sc, Trial: trial, Status: results.TrialOK,
				Started: start, Ended: start.Add(4 * time.Minute)})
			add(sc, trial, "deploy", "deploy_time", deploy[sc]+0.03*float64((trial*5)%3-1), "s", map[string]string{"nodes": "3", "runtime": map[bool]string{true: "netns", false: "docker"}[sc == "native"]})
			add(sc, trial, "load", "count", 12, "count", map[string]string{"kind": "cpu", "node": "proxy"})
			for _, conc := range []int{1, 100} {
				for _, obj := range []string{"1M", "1k"} {
					labels := map[string]string{"object": obj, "concurrency": fmt.Sprint(conc), "keepalive": "false", "via": "proxy"}
					total := httpTimes[conc][obj][sc] * (1 + 0.003*float64(trial-2) + 0.001*float64((trial*7+si)%3))
					reqs, errs, non2xx := 10000.0, 0.0, 0.0
					if sc == "docker-nat" && conc == 100 && obj == "1k" && trial == 2 {
						errs = 2
					}
					if sc == "docker-routed" && conc == 100 && obj == "1M" && trial == 3 {
						non2xx = 1
					}
					per := total / reqs * 1000 * float64(conc)
					for k := range 4 {
						add(sc, trial, "http", "request_time", per*(0.9+0.07*float64((k*3+trial)%5)), "ms", labels)
					}
					add(sc, trial, "http", "total_time", total, "s", labels)
					add(sc, trial, "http", "rps", reqs/total, "requests/s", labels)
					add(sc, trial, "http", "errors", errs, "count", labels)
					add(sc, trial, "http", "non2xx", non2xx, "count", labels)
					add(sc, trial, "http", "bytes", (reqs-errs)*sampleSizes[obj], "count", labels)
					add(sc, trial, "http", "requests", reqs, "count", labels)
					if conc == 1 && obj == "1k" { // the probe's phases (medians; the means are not read)
						for i, ph := range HTTPPhases {
							v := httpPhases[sc][i] * (1 + 0.01*float64(trial-2))
							l := maps.Clone(labels)
							l["phase"] = ph
							add(sc, trial, "http", "phase_median", v, "ms", l)
							add(sc, trial, "http", "phase_mean", v*1.1, "ms", l)
						}
					}
					if conc == 1 {
						add(sc, trial, "http-ab", "total_time", total*1.021, "s", labels)
						add(sc, trial, "http-ab", "rps", reqs/(total*1.021), "requests/s", labels)
					}
				}
			}
			d := 0.01 * float64(trial-2)
			for _, node := range []string{"client", "proxy", "origin"} {
				u := map[string]float64{"client": 0.21, "proxy": 1.35, "origin": 0.18}[node] + d
				add(sc, trial, "cpu", "cpu_user", u, "cores", map[string]string{"node": node})
				add(sc, trial, "cpu", "cpu_system", u/2, "cores", map[string]string{"node": node})
				if sc != "native" && node != "client" {
					add(sc, trial, "cpu", "docker_cpu_percent", 150*u+1, "%", map[string]string{"node": node})
				}
			}
		}
	}
	return in
}

// httpPhases are the sample's phase medians (connect, wait, body, close; ms) of 1k at
// concurrency 1.
var httpPhases = map[string][4]float64{
	"native":        {0.05, 0.30, 0.01, 0.08},
	"docker-routed": {0.09, 0.52, 0.01, 0.12},
	"docker-nat":    {0.10, 0.55, 0.01, 0.13},
}

func buildHTTPSample(t *testing.T) *Report {
	t.Helper()
	r, err := Build(sampleInputHTTP())
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return r
}

func TestHTTPMarkdownGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := buildHTTPSample(t).Markdown(&buf); err != nil {
		t.Fatal(err)
	}
	golden(t, "sample-http.md", buf.Bytes())
}

func TestHTTPSummaryCSVGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := buildHTTPSample(t).SummaryCSV(&buf); err != nil {
		t.Fatal(err)
	}
	golden(t, "summary-http.csv", buf.Bytes())
}

func findHTTP(r *Report, sc, obj string, conc int) HTTPRow {
	for _, row := range r.HTTP {
		if row.Scenario == sc && row.Object == obj && row.Concurrency == conc {
			return row
		}
	}
	return HTTPRow{}
}

func TestHTTPFigures(t *testing.T) {
	r := buildHTTPSample(t)
	if len(r.HTTP) != 12 {
		t.Fatalf("%d HTTP rows, want 12 (3 scenarios x 2 objects x 2 concurrencies)", len(r.HTTP))
	}
	var order []string
	for _, row := range r.HTTP[:6] {
		order = append(order, fmt.Sprintf("%s/%s/c%d", row.Object, row.Scenario, row.Concurrency))
	}
	if got := strings.Join(order, " "); got != "1k/native/c1 1k/docker-routed/c1 1k/docker-nat/c1 1M/native/c1 1M/docker-routed/c1 1M/docker-nat/c1" {
		t.Errorf("row order %s: want concurrency, then object by size, then scenario", got)
	}
	nat := findHTTP(r, "docker-nat", "1k", 100)
	var per []float64
	for trial := 1; trial <= 3; trial++ {
		per = append(per, 2.36*(1+0.003*float64(trial-2)+0.001*float64((trial*7+2)%3)))
	}
	want := stats.Summarize(per)
	if nat.TotalTime.N != 3 || math.Abs(nat.TotalTime.Mean-want.Mean) > 1e-12 || math.Abs(nat.TotalTime.CI95Half-want.CI95Half) > 1e-12 {
		t.Errorf("docker-nat 1k c100 total time %+v, want %+v", nat.TotalTime, want)
	}
	if nat.ErrorCount != 2 || nat.RequestTime.N != 12 || nat.AB.N != 0 || nat.Via != "proxy" || nat.KeepAlive != "false" {
		t.Errorf("docker-nat 1k c100: %+v", nat)
	}
	base := findHTTP(r, "native", "1k", 100)
	if got := nat.Change; math.Abs(got-stats.Increase(base.TotalTime.Mean, nat.TotalTime.Mean)) > 1e-9 || nat.Baseline != "native" {
		t.Errorf("docker-nat change %v against %s", got, nat.Baseline)
	}
	if !base.IsBaseline || !math.IsNaN(base.Change) {
		t.Errorf("native is the baseline: %+v", base)
	}
	if ab := findHTTP(r, "native", "1M", 1).AB; ab.N != 3 || math.Abs(ab.Mean/findHTTP(r, "native", "1M", 1).TotalTime.Mean-1.021) > 1e-9 {
		t.Errorf("ab total time %+v", ab)
	}
	if len(r.Deploy) != 3 || r.Deploy[0].Nodes != "3" || math.Abs(r.Deploy[0].Summary.Mean-430) > 1e-9 {
		t.Errorf("deploy rows %+v", r.Deploy)
	}
	if d := r.Deploy[2]; math.Abs(d.Diff-(2040-430)) > 1e-9 {
		t.Errorf("docker-nat deploy diff %v ms", d.Diff)
	}
	if got := r.loadText(); got != "Background load: 12 cpu processes on proxy." {
		t.Errorf("load text %q", got)
	}
	for _, row := range r.CPU {
		if want := row.Scenario != "native" && row.Node != "client"; (row.Docker.N == 3) != want {
			t.Errorf("%s %s docker stats %+v", row.Scenario, row.Node, row.Docker)
		}
	}
	routed, native := findHTTP(r, "docker-routed", "1k", 1), findHTTP(r, "native", "1k", 1)
	for i, ph := range HTTPPhases {
		if q := routed.Phases[ph]; q.N != 3 || math.Abs(q.Mean-httpPhases["docker-routed"][i]) > 1e-9 {
			t.Errorf("docker-routed 1k c1 phase %s %+v, want the mean of 3 trials %v", ph, q, httpPhases["docker-routed"][i])
		}
	}
	if findHTTP(r, "native", "1M", 1).Phases != nil || native.Phases == nil {
		t.Errorf("phases where none were measured, or missing: %v, %v", findHTTP(r, "native", "1M", 1).Phases, native.Phases)
	}
	pt := r.httpPhaseTable()
	if pt == nil || len(pt.rows) != 3 || pt.rows[1][0] != "docker-routed" || pt.rows[1][4] != "0.520" || pt.rows[1][7] != "+68.2 %" || pt.rows[0][7] != "baseline" {
		t.Errorf("phase table %+v", pt)
	}
	for _, n := range r.Notes {
		if strings.Contains(n, "http") || strings.Contains(n, "deploy") || strings.Contains(n, "load") {
			t.Errorf("note about a sample the report reads: %s", n)
		}
	}
}

func TestHTTPPublished(t *testing.T) {
	r := buildHTTPSample(t)
	md := renderMarkdown(t, r)
	text := md.String()
	i := strings.Index(text, "## Published vs measured")
	j := strings.Index(text, "## Failed trials")
	if i < 0 || j < i || !strings.Contains(text[i:j], "### Published vs measured (HTTP)") {
		t.Fatalf("no published HTTP section before the failed trials")
	}
	for _, v := range []string{"6.98 ± 0.02 s", "370.74 ± 11.81 s", "903.63 ± 0.29 s"} {
		if !strings.Contains(text[i:j], v) {
			t.Errorf("published value %q missing from the comparison table", v)
		}
		if num := strings.Fields(v)[0]; strings.Contains(text[:i], num) || strings.Contains(text[j:], num) {
			t.Errorf("published value %q appears outside the comparison section", num)
		}
	}
	for _, s := range []string{"| published |", "| measured (this run) |", "| kvm | 10M | 1 | — | " + kvmText + " |",
		"| native | 10M | 1 | 903.63 ± 0.29 s | " + NotMeasuredHTTP + " |", "- KVM is not measured"} {
		if !strings.Contains(text[i:j], s) {
			t.Errorf("published section lacks %q", s)
		}
	}
	rows := r.Comparison.HTTP
	if len(rows) != 18 {
		t.Fatalf("%d published HTTP rows, want 18", len(rows))
	}
	nat := rows[2] // docker-nat 1k c1
	m := findHTTP(r, "docker-nat", "1k", 1)
	if nat.Scenario != "docker-nat" || math.Abs(nat.Ratio-m.TotalTime.Mean/7.48) > 1e-12 ||
		math.Abs(nat.PublishedChange-stats.Increase(6.98, 7.48)) > 1e-9 || math.Abs(nat.MeasuredChange-m.Change) > 1e-12 {
		t.Errorf("docker-nat 1k c1 comparison %+v", nat)
	}
	kvm := rows[3]
	if kvm.MeasuredText != NotMeasuredHTTP || !math.IsNaN(kvm.Measured) || math.Abs(kvm.PublishedChange-stats.Increase(6.98, 9.24)) > 1e-9 {
		t.Errorf("kvm 1k c1 comparison %+v", kvm)
	}
	if last := rows[17]; last.MeasuredText != kvmText || !math.IsNaN(last.Published) || !math.IsNaN(last.PublishedChange) {
		t.Errorf("text-only kvm row %+v", last)
	}
}

func TestHTTPHTML(t *testing.T) {
	r := buildHTTPSample(t)
	page := renderHTML(t, r, *htmlSampleHTTP)
	if n := strings.Count(page, "<svg"); n != 4 {
		t.Errorf("%d inline SVG charts, want 4 (the study's grid, http-c1, http-c100, cpu)", n)
	}
	for _, id := range []string{"chart-http-c1", "chart-http-c100", "chart-cpu"} {
		if !strings.Contains(page, `<figure id="`+id+`">`) {
			t.Errorf("figure %s missing", id)
		}
	}
	stripped := strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, "")
	stripped = strings.ReplaceAll(stripped, `xmlns:xlink="http://www.w3.org/1999/xlink"`, "")
	for _, bad := range []string{"http://", "https://", "url(", "<script", "<link", "src="} {
		if strings.Contains(stripped, bad) {
			k := strings.Index(stripped, bad)
			t.Errorf("page contains %q (external reference?): ...%s...", bad, stripped[max(0, k-80):min(len(stripped), k+80)])
		}
	}
	for _, id := range []string{"run-table", "http-table", "cpu-table", "deploy-table", "published-http-table"} {
		if !strings.Contains(page, `<table id="`+id+`"`) {
			t.Errorf("table %s missing", id)
		}
	}
	if strings.Contains(page, `<table id="published-table"`) {
		t.Error("a published table without published rows")
	}
	for _, s := range []string{"docker stats %", "Background load: 12 cpu processes on proxy.", kvmText, "ab total time s"} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	if err := checkBalanced(page); err != nil {
		t.Errorf("HTML not well-formed: %v", err)
	}
}

func TestHTTPWriteCharts(t *testing.T) {
	r := buildHTTPSample(t)
	paths, err := r.WriteCharts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"study-http.svg", "http-c1.svg", "http-c100.svg", "cpu.svg"}
	if len(paths) != len(want) {
		t.Fatalf("wrote %v, want %v", paths, want)
	}
	for i, p := range paths {
		if filepath.Base(p) != want[i] {
			t.Errorf("chart %d is %s, want %s", i, p, want[i])
		}
	}
	b, err := os.ReadFile(paths[1])
	if err != nil {
		t.Fatal(err)
	}
	// The object names label the log size axis.
	for _, s := range []string{">1k<", ">1M<", ">docker-nat<"} {
		if !bytes.Contains(b, []byte(s)) {
			t.Errorf("http-c1.svg lacks the text %s", s)
		}
	}
	md := renderMarkdown(t, r)
	for _, f := range want {
		if !strings.Contains(md.String(), "]("+f+")") {
			t.Errorf("Markdown does not link %s", f)
		}
	}
}

func TestHTTPBaselines(t *testing.T) {
	in := sampleInputHTTP()
	in.Published.HTTPBaselines = map[string]string{"docker-nat": "docker-routed", "kvm": "docker-routed"}
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	nat, routed := findHTTP(r, "docker-nat", "1M", 100), findHTTP(r, "docker-routed", "1M", 100)
	if nat.Baseline != "docker-routed" || math.Abs(nat.Change-stats.Increase(routed.TotalTime.Mean, nat.TotalTime.Mean)) > 1e-9 {
		t.Errorf("docker-nat against docker-routed: %+v", nat)
	}
	for _, row := range r.Comparison.HTTP {
		if row.Scenario == "kvm" && row.Object == "1M" && row.Concurrency == 100 {
			if row.Baseline != "docker-routed" || math.Abs(row.PublishedChange-stats.Increase(87.85, 172.68)) > 1e-9 {
				t.Errorf("kvm 1M c100 %+v", row)
			}
		}
	}
	md := renderMarkdown(t, r)
	if !strings.Contains(md.String(), "against native; against docker-routed for docker-nat (positive: slower)") {
		t.Error("the HTTP section does not say which scenario docker-nat is compared with")
	}

	in.Published.HTTPBaselines = map[string]string{"docker-nat": "nope"}
	if _, err := Build(in); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown HTTP baseline: %v", err)
	}
}

func TestPublishedHTTPErrors(t *testing.T) {
	for _, tc := range []struct {
		row  PublishedHTTP
		want string
	}{
		{PublishedHTTP{Object: "1k", Concurrency: 1, Seconds: 1}, "no scenario"},
		{PublishedHTTP{Scenario: "native", Concurrency: 1, Seconds: 1}, "no object"},
		{PublishedHTTP{Scenario: "native", Object: "1k", Seconds: 1}, "concurrency"},
		{PublishedHTTP{Scenario: "native", Object: "1k", Concurrency: 1, Seconds: -1}, "seconds"},
		{PublishedHTTP{Scenario: "native", Object: "1k", Concurrency: 1, Seconds: math.NaN()}, "seconds"},
		{PublishedHTTP{Scenario: "native", Object: "1k", Concurrency: 1, Seconds: 1, CI: -0.1}, "CI"},
		{PublishedHTTP{Scenario: "native", Object: "1k", Concurrency: 1}, "neither seconds nor a text"},
	} {
		in := sampleInputHTTP()
		in.Published.HTTP = append(in.Published.HTTP, tc.row)
		if _, err := Build(in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.row, err, tc.want)
		}
	}
}

func TestHTTPOddLabels(t *testing.T) {
	in := Input{Run: results.Run{Experiment: "x", Complete: true}}
	add := func(sc string, trial int, probe, metric string, v float64, unit string, labels map[string]string) {
		in.Samples = append(in.Samples, results.Sample{Experiment: "x", Scenario: sc, Trial: trial, Probe: probe, Metric: metric,
			Value: v, Unit: unit, Labels: labels})
	}
	for trial := 1; trial <= 2; trial++ {
		for _, obj := range []string{"index", "10k", "2k"} {
			add("a", trial, "http", "total_time", 1000*float64(trial), "ms", map[string]string{"object": obj, "concurrency": "8"})
		}
		add("a", trial, "http", "total_time", 1, "s", map[string]string{"object": "2k"}) // no concurrency
		add("b", trial, "ab", "total_time", 1, "s", map[string]string{"object": "2k", "concurrency": "8"})
		add("b", trial, "ab", "errors", 0, "count", map[string]string{"object": "2k", "concurrency": "8"})
		add("a", trial, "load", "count", float64(4*trial), "count", map[string]string{"kind": "network", "node": "client"})
	}
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, row := range r.HTTP {
		order = append(order, fmt.Sprintf("%s/%s/c%d", row.Scenario, row.Object, row.Concurrency))
	}
	if got := strings.Join(order, " "); got != "a/2k/c0 b/2k/c0 a/2k/c8 b/2k/c8 a/10k/c8 b/10k/c8 a/index/c8 b/index/c8" {
		t.Errorf("rows %s", got)
	}
	if row := findHTTP(r, "a", "2k", 8); math.Abs(row.TotalTime.Mean-1.5) > 1e-12 {
		t.Errorf("ms not converted to s: %+v", row.TotalTime)
	}
	if row := findHTTP(r, "b", "2k", 8); row.TotalTime.N != 0 || row.AB.N != 2 {
		t.Errorf("ab-only row %+v", row)
	}
	notes := strings.Join(r.Notes, "\n")
	if !strings.Contains(notes, "2 HTTP samples have no concurrency label") || len(r.Other) != 1 || r.Other[0].Metric != "errors" || r.Other[0].Summary.N != 2 {
		t.Errorf("notes:\n%s", notes)
	}
	if got := r.loadText(); got != "Background load: 4/8 network streams from client in a; none in b." {
		t.Errorf("load text %q", got)
	}
	var md, html bytes.Buffer
	if err := r.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| b | 2k | 8 | 0 | — | no data |") {
		t.Errorf("no-data row:\n%s", md.String())
	}
	if err := r.HTML(&html); err != nil {
		t.Fatal(err)
	}
	// Concurrency 0 and 8: two charts, "index" is not on the size axis.
	if n := strings.Count(html.String(), "<svg"); n != 2 {
		t.Errorf("%d charts, want 2", n)
	}
	if !strings.Contains(html.String(), "not shown (object name is not a size): index") {
		t.Error("the chart does not say that index is not shown")
	}
}

func TestDockerCPUPublished(t *testing.T) {
	in := sampleInputHTTP()
	in.Published.Rows = []PublishedRow{{Scenario: "docker-nat", Metric: NodeMetric(MetricDockerCPU, "proxy"), Value: 118.42, Unit: "%"}}
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	var want float64
	for _, row := range r.CPU {
		if row.Scenario == "docker-nat" && row.Node == "proxy" {
			want = row.Docker.Mean
		}
	}
	if got := r.Comparison.Rows[0].Measured; math.Abs(got-want) > 1e-9 || want == 0 {
		t.Errorf("docker stats measured %v, want %v", got, want)
	}
}

func TestHTTPDeterministic(t *testing.T) {
	render := func() []byte {
		r := buildHTTPSample(t)
		var b bytes.Buffer
		if err := r.Markdown(&b); err != nil {
			t.Fatal(err)
		}
		if err := r.HTML(&b); err != nil {
			t.Fatal(err)
		}
		if err := r.SummaryCSV(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	first := render()
	for range 3 {
		if !bytes.Equal(first, render()) {
			t.Fatal("two renderings of the same HTTP input differ")
		}
	}
}

// TestHTTPRatioSameRequests checks that times are compared only when both
// ran the same number of requests (quick mode: 200 against the study's
// 10,000 must not give 0.02×), else per request.
func TestHTTPRatioSameRequests(t *testing.T) {
	row := func(total float64, reqs ...float64) *HTTPRow {
		return &HTTPRow{TotalTime: stats.Summarize([]float64{total}), Requests: stats.Summarize(reqs)}
	}
	tests := []struct {
		name       string
		m          *HTTPRow
		published  float64
		requests   int
		want       float64
		perRequest bool
	}{
		{"same count", row(7.0, 10000, 10000), 7.48, 10000, 7.0 / 7.48, false},
		{"quick: 200 of 10,000", row(0.14, 200, 200), 7.48, 10000, (0.14 / 200) / (7.48 / 10000), true},
		{"one trial short", row(7.0, 10000, 9990), 7.48, 10000, (7.0 / 9995) / (7.48 / 10000), true},
		{"study count unknown", row(7.0, 10000), 7.48, 0, math.NaN(), false},
		{"no request count", row(7.0), 7.48, 10000, math.NaN(), false},
	}
	for _, tt := range tests {
		got, per := httpRatio(tt.m, tt.published, tt.requests)
		if per != tt.perRequest || !(math.IsNaN(tt.want) && math.IsNaN(got) || math.Abs(got-tt.want) < 1e-12) {
			t.Errorf("%s: ratio %v per request %v, want %v %v", tt.name, got, per, tt.want, tt.perRequest)
		}
	}
}
