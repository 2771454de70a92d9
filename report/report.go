// Package report turns the raw samples of one sfclab run into a report:
// throughput, latency, HTTP load, CPU and deploy-time tables per scenario
// with confidence intervals and comparisons against a baseline scenario,
// the figures of a published study beside the measured ones, the failed
// trials, and charts. It renders
// the report as Markdown, as one self-contained HTML page (inline CSS and
// SVG) and as a summary CSV.
//
// Every figure is recomputed from the samples with package stats; the
// report keeps nothing but what Build derived, so the same Input always
// gives byte-identical Markdown, HTML and CSV.
//
// # Input conventions
//
// Samples are read by probe and metric:
//
//   - iperf3/throughput in bit/s, label side=receiver|sender (one sample per
//     side per trial), labels protocol and streams. The per-trial value is the
//     receiver's figure, or the sender's when a trial has no receiver sample.
//   - ping/rtt in ms (one sample per echo reply, label seq), tcprtt/rtt and
//     tcprtt/connect in ms. Confidence intervals are across the per-trial
//     means; the median and p99 describe all samples of a scenario pooled.
//   - cpu/cpu_user and cpu/cpu_system in cores (1.0 = one core busy), label
//     node, one sample per node per trial; cpu/softirq in cores with
//     node=host, the host's softirq time over all cores;
//     cpu/docker_cpu_percent in % (100 % = one core busy), label node, the
//     CPU figure `docker stats` computes.
//   - http/total_time in s (ab's "Time taken for tests"), http/rps in
//     requests/s, http/errors, http/non2xx, http/bytes and http/requests as
//     counts: one sample each per run, that is per trial, object and
//     concurrency (labels object, concurrency, keepalive, via); http/request_time
//     in ms, one sample per answered request. http-ab/total_time and
//     http-ab/rps (probe "ab" is read the same way) are Apache Bench's figures
//     of a run with the same labels, shown beside sfclab's own.
//   - deploy/deploy_time in s, one sample per trial, optional label nodes.
//   - load/count, labels kind and node: the background load a trial ran
//     with, stated in the run section.
//
// Every sample's probe and metric must be one of package results/metric's
// vocabulary: Build fails on any other, so a metric renamed in a probe and
// not here is an error. Samples of failed trials are left out of every
// statistic; the failed trials are listed with their errors and the number
// of samples left out. Samples of a known metric no section reads are
// summarised under Other measurements; samples with a unit the report cannot
// convert are counted in the report's notes.
package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/results/metric"
)

// Metric names of the report. They name the rows of SummaryCSV and are the
// names a PublishedRow's Metric must use. Per-node CPU metrics of a
// PublishedRow carry the node after a colon (see NodeMetric).
const (
	// MetricThroughput is the per-trial TCP throughput, in Gbit/s.
	MetricThroughput = "throughput"
	// MetricPingRTT is the ICMP echo round-trip time, in ms.
	MetricPingRTT = "ping_rtt"
	// MetricTCPRTT is the request/response round-trip time over one TCP
	// connection, in ms.
	MetricTCPRTT = "tcprtt_rtt"
	// MetricTCPConnect is the TCP connect time, in ms.
	MetricTCPConnect = "tcprtt_connect"
	// MetricCPUUser is a node's user CPU time, in cores.
	MetricCPUUser = "cpu_user"
	// MetricCPUSystem is a node's system CPU time, in cores.
	MetricCPUSystem = "cpu_system"
	// MetricCPUTotal is a node's user plus system CPU time, in cores.
	MetricCPUTotal = "cpu_total"
	// MetricSoftirq is the host's softirq time over all cores, in cores.
	MetricSoftirq = "softirq"
	// MetricDockerCPU is a node's CPU as `docker stats` computes it, in %
	// (100 % = one core busy).
	MetricDockerCPU = "docker_cpu_percent"
	// MetricHTTPTotalTime is the wall time of one HTTP load run (all its
	// requests), in s, per trial.
	MetricHTTPTotalTime = "http_total_time"
	// MetricHTTPRPS is the finished requests per second of one HTTP load
	// run, per trial.
	MetricHTTPRPS = "http_rps"
	// MetricHTTPErrors counts the requests of one HTTP load run that got no
	// complete answer, per trial.
	MetricHTTPErrors = "http_errors"
	// MetricHTTPNon2xx counts the answers with a status outside 200-299 of
	// one HTTP load run, per trial.
	MetricHTTPNon2xx = "http_non2xx"
	// MetricHTTPBytes counts the body bytes one HTTP load run received, per
	// trial.
	MetricHTTPBytes = "http_bytes"
	// MetricHTTPRequests counts the finished requests of one HTTP load run,
	// per trial.
	MetricHTTPRequests = "http_requests"
	// MetricHTTPRequestTime is the time of one answered request, connect to
	// last body byte, in ms (all requests pooled).
	MetricHTTPRequestTime = "http_request_time"
	// MetricHTTPPhase is one phase of an HTTP load run's requests (label phase: connect,
	// wait, body, close), the median over the run's answered requests, in ms, per trial.
	MetricHTTPPhase = "http_phase"
	// MetricABTotalTime is Apache Bench's "Time taken for tests" of a run
	// with the same settings, in s, per trial.
	MetricABTotalTime = "ab_total_time"
	// MetricABRPS is Apache Bench's "Requests per second", per trial.
	MetricABRPS = "ab_rps"
	// MetricDeployTime is the time to deploy a scenario's lab, in ms, per
	// trial.
	MetricDeployTime = "deploy_time"
)

// NodeMetric returns the name a PublishedRow uses for a per-node CPU metric
// (MetricCPUUser, MetricCPUSystem, MetricCPUTotal or MetricDockerCPU) of
// node, e.g.
// NodeMetric(MetricCPUTotal, "lb") == "cpu_total:lb".
func NodeMetric(metric, node string) string { return metric + ":" + node }

// NoICMPPath is shown for the ping figures of a scenario whose chain has no
// ICMP path (a proxy on it; the ping probe labels its loss sample
// icmp_path=none). Elsewhere a ping without replies fails its trial.
const NoICMPPath = "N/A (no ICMP path)"

// IncompleteMark is the mark a report of a run with Complete == false
// carries at its top.
const IncompleteMark = "incomplete (interrupted)"

// Input is what Build reads.
type Input struct {
	// Run is the run the samples belong to (results.Store.Run).
	Run results.Run
	// Trials are the run's trials (results.Store.Trials); those not "ok"
	// are listed as failed and their samples left out.
	Trials []results.Trial
	// Samples are the run's raw samples (results.Store.Samples).
	Samples []results.Sample
	// Scenarios is the display order. When empty, scenarios appear in the
	// order they first appear in Trials, then in Samples; scenarios found in
	// the data but missing from Scenarios are appended in that order.
	Scenarios []string
	// Baseline is the scenario the others are compared with ("" = the first
	// scenario).
	Baseline string
	// Published holds the figures of the study the experiment reproduces;
	// nil when it reproduces none.
	Published *Published
}

// Report is a built report: the run it is about, then its parts, each a small struct of the
// tables one section renders (parts.go), embedded so that a part's fields read as the
// report's own (r.Throughput, r.CPU). Its exported fields are the tables it renders; NaN in a
// float field means "not available" and renders as "n/a" (or empty in CSV).
type Report struct {
	// Run is the run the report is about.
	Run results.Run
	// Scenarios are the scenarios in display order.
	Scenarios []string
	// Baseline is the scenario the others are compared with.
	Baseline string
	// Runtimes names the runtime each scenario ran on (netns, docker; label
	// runtime of its deploy samples); nil when the samples do not say.
	Runtimes map[string]string
	// Trials counts the trials of each scenario, in display order.
	Trials []TrialCount
	// Failed lists the trials whose status is neither "ok" nor empty
	// (failed, or still "running" when an interrupted run stopped), in the
	// order of Input.Trials.
	Failed []FailedTrial
	// Notes are remarks about the data: fallbacks taken and samples not
	// used.
	Notes []string
	// Summary is what SummaryCSV writes.
	Summary []SummaryRow
	// ChartFiles are the chart files written by WriteCharts, relative to
	// its directory; Markdown links them when set.
	ChartFiles []string

	ThroughputPart
	LatencyPart
	HTTPPart
	CPUPart
	DeployPart
	LoadPart
	RTTPart
	NDRPart
	FlowsPart
	PublishedPart
	OtherPart

	// sampled marks the sections of fixed place (throughput, latency, cpu) that have any
	// sample in the run, failed trials' included (sampledSections): a section without one is
	// left out, since the run did not measure it.
	sampled map[string]bool

	// units are the report's parts that stand on their own: they read their samples and
	// render their sections themselves (unit.go).
	units []sectionUnit

	// styles gives each series key (a scenario's name, a node's) the place of its style in
	// seriesPalette, in the order the charts first asked (seriesStyle): one style per key in
	// every chart of the report.
	styles map[string]int
}

// Build computes the report of in. It fails if Baseline names no scenario
// of the run, if a sample's probe/metric is not in the vocabulary (package
// results/metric; the error is a *metric.UnknownError), or if a published
// row has an unknown metric or unit.
func Build(in Input) (*Report, error) {
	if err := metric.Check(in.Samples); err != nil {
		return nil, fmt.Errorf("build report: %w", err)
	}
	r := &Report{Run: in.Run, units: newUnits()}

	seen := map[trialKey]bool{}
	for _, t := range in.Trials {
		k := trialKey{t.Scenario, t.Trial}
		if t.Status == results.TrialOK || t.Status == "" || seen[k] {
			continue
		}
		seen[k] = true
		r.Failed = append(r.Failed, FailedTrial{Scenario: t.Scenario, Trial: t.Trial, Status: t.Status,
			Error: t.Error, Started: t.Started, Ended: t.Ended})
	}
	// Pointers into r.Failed, taken once it no longer grows.
	failed := map[trialKey]*FailedTrial{}
	for i := range r.Failed {
		failed[trialKey{r.Failed[i].Scenario, r.Failed[i].Trial}] = &r.Failed[i]
	}

	r.Scenarios = scenarioOrder(in)
	r.Baseline = in.Baseline
	if r.Baseline == "" && len(r.Scenarios) > 0 {
		r.Baseline = r.Scenarios[0]
	}
	if r.Baseline != "" && !slices.Contains(r.Scenarios, r.Baseline) {
		return nil, fmt.Errorf("build report: baseline %q is not a scenario of the run (scenarios: %s)",
			r.Baseline, strings.Join(r.Scenarios, ", "))
	}

	if in.Published != nil {
		if err := r.checkPublishedHTTP(in.Published); err != nil {
			return nil, fmt.Errorf("build report: %w", err)
		}
		r.httpBaselines = in.Published.HTTPBaselines
	}

	r.sampled = sampledSections(in.Samples)
	c := r.collect(in.Samples, failed)
	for s, rts := range c.runtimes {
		if r.Runtimes == nil {
			r.Runtimes = map[string]string{}
		}
		r.Runtimes[s] = strings.Join(rts, "/")
	}
	r.countTrials(in, failed)
	r.buildThroughput(c)
	r.buildLatency(c)
	r.buildHTTP(c)
	r.buildCPU(c)
	r.buildDeploy(c)
	r.buildLoad(c)
	r.buildOther(c.other)
	r.buildRTT(in.Samples)
	r.buildHostCPU(in.Samples)
	r.buildNDR(in.Samples, failed)
	r.buildFlows(in.Samples, failed)
	r.buildUnits(in.Samples, failed)
	if in.Published != nil {
		if err := r.buildComparison(in.Published); err != nil {
			return nil, fmt.Errorf("build report: %w", err)
		}
		r.buildHTTPComparison(in.Published)
		r.Modes = in.Published.Modes
	}
	r.buildSummary()
	return r, nil
}

// scenarioOrder returns in.Scenarios followed by the scenarios of the data
// not in it, in order of first appearance.
func scenarioOrder(in Input) []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, s := range in.Scenarios {
		add(s)
	}
	for _, t := range in.Trials {
		add(t.Scenario)
	}
	for _, x := range in.Samples {
		add(x.Scenario)
	}
	return out
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// sampledSections says which of the sections every run used to have (throughput, latency,
// cpu; by their section ids) have at least one sample in samples, whatever the trial's status.
func sampledSections(samples []results.Sample) map[string]bool {
	out := map[string]bool{}
	for _, x := range samples {
		if x.Probe == metric.RTT || isHostCPU(x) {
			continue // the rtt section's and the per-host CPU table's
		}
		switch sampleKind(x) {
		case MetricThroughput:
			out["throughput"] = true
		case MetricPingRTT, MetricTCPRTT, MetricTCPConnect:
			out["latency"] = true
		case MetricCPUUser, MetricCPUSystem, MetricDockerCPU, MetricSoftirq:
			out["cpu"] = true
		}
	}
	return out
}
