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
// Samples of failed trials are left out of every statistic; the failed
// trials are listed with their errors and the number of samples left out.
// Samples of any other probe or metric, or with a unit the report cannot
// convert, are counted in the report's notes.
package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/stats"
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

// NoICMPPath is shown for the ping figures of a scenario that has samples of
// other probes but no ping reply at all: ICMP cannot cross an L4 proxy.
const NoICMPPath = "N/A (no ICMP path)"

// IncompleteMark is the mark a report of a run with Complete == false
// carries at its top.
const IncompleteMark = "incomplete (interrupted)"

// Published holds the figures a published study reports, to be shown beside
// the measured ones.
type Published struct {
	// Study names the study, e.g. "A. Docker-based NFV service chaining on a
	// single host (2026)"; Source says where its figures come from.
	Study, Source string
	// Rows are the published figures, shown in this order.
	Rows []PublishedRow
	// HTTP are the published HTTP load figures (study B: seconds for a
	// number of requests, mean ± 95 % CI), shown in this order in the table
	// "Published vs measured (HTTP)".
	HTTP []PublishedHTTP
	// HTTPBaselines maps a scenario to the scenario it is compared with in
	// the HTTP tables when that is not the report's baseline: study B
	// compares each platform with native within the same case, so with the
	// cache in the scenario names {"docker-nat-cache": "native-cache"}. It
	// sets both the change column of the measured HTTP table and the
	// baseline of the published overheads. Keys may name published-only
	// scenarios; a value must be a scenario of the run or of HTTP.
	HTTPBaselines map[string]string
	// Notes are free text lines printed under the published tables, e.g.
	// why a platform of the study is not measured.
	Notes []string
}

// PublishedHTTP is one published HTTP load figure: the time a number of
// requests for one object at one concurrency took on one platform.
type PublishedHTTP struct {
	// Scenario is the scenario of this run the figure corresponds to, or,
	// for a platform this run does not measure, the label to show (e.g.
	// "kvm").
	Scenario string
	// Object is the object's size name as the http probe labels it ("1k",
	// "10M"); it matches a measured object of the same name or size.
	Object string
	// Concurrency is the number of requests in flight (ab -c).
	Concurrency int
	// Seconds is the published mean time for the study's requests, in s; 0
	// when the study gives no figure (then Text must be set).
	Seconds float64
	// CI is the published 95 % confidence half-width, in s; 0 or NaN when
	// not given.
	CI float64
	// Text, when set, says why the row has no measured figure, e.g. "not
	// measured: no hardware virtualisation"; it is shown instead of the
	// measured figure when this run has none, and beside it when it has.
	Text string
}

// PublishedRow is one published figure.
type PublishedRow struct {
	// Scenario is the scenario of this run the figure corresponds to.
	Scenario string
	// Metric is one of the Metric constants, or NodeMetric(...) for a
	// per-node CPU figure.
	Metric string
	// Value is the figure in Unit. It is ignored when Text is set.
	Value float64
	// Unit is the unit of Value: "Gbit/s", "Mbit/s", "kbit/s" or "bit/s"
	// for throughput; "ms", "us" or "s" for latency; "cores" or "%" (100 % =
	// one core, as docker stats counts) for CPU, including MetricDockerCPU.
	// It may be empty when Text is set.
	Unit string
	// Text replaces Value when the study gives no meaningful number, e.g.
	// "N/A".
	Text string
}

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

// Report is a built report. Its exported fields are the tables it renders;
// NaN in a float field means "not available" and renders as "n/a" (or
// empty in CSV).
type Report struct {
	// Run is the run the report is about.
	Run results.Run
	// Scenarios are the scenarios in display order.
	Scenarios []string
	// Baseline is the scenario the others are compared with.
	Baseline string
	// Trials counts the trials of each scenario, in display order.
	Trials []TrialCount
	// Throughput has one row per scenario (none if the run has no
	// throughput sample at all).
	Throughput []ThroughputRow
	// Latency has one row per latency metric present in the run and
	// scenario, grouped by metric.
	Latency []LatencyRow
	// HTTP has one row per object, concurrency and scenario with HTTP
	// samples, ordered by concurrency, then object size, then scenario.
	HTTP []HTTPRow
	// CPU has one row per scenario and node, nodes in order of appearance.
	CPU []CPURow
	// Softirq has one row per scenario with host softirq samples.
	Softirq []SoftirqRow
	// CPUFindings has one sentence per scenario with CPU samples saying
	// where the cycles went, computed from the data.
	CPUFindings []string
	// Deploy has one row per scenario with deploy-time samples.
	Deploy []DeployRow
	// Load is the background load of each scenario that ran with one, in
	// display order, then in order of appearance.
	Load []LoadRow
	// Comparison is the published-vs-measured tables; nil when the Input
	// had no Published.
	Comparison *Comparison
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

	// latency holds the pooled samples (ms) for the distribution charts,
	// by metric and scenario.
	latency map[string]map[string][]float64
	// httpBaselines is Published.HTTPBaselines (nil without).
	httpBaselines map[string]string
}

// TrialCount is how the trials of one scenario ended.
type TrialCount struct {
	// Scenario is the scenario counted.
	Scenario string
	// OK counts trials that did not fail (including trials that only
	// appear in the samples).
	OK int
	// Failed counts the trials listed in Report.Failed.
	Failed int
}

// ThroughputRow is the throughput of one scenario.
type ThroughputRow struct {
	// Scenario is the scenario of the row.
	Scenario string
	// Trials are the trial numbers with a throughput figure, ascending.
	Trials []int
	// Gbits is the throughput of each of Trials, in Gbit/s.
	Gbits []float64
	// Summary summarises Gbits.
	Summary stats.Summary
	// Side is the iperf3 side the figures come from: "receiver", "sender",
	// or both joined by "+" when some trials had to fall back.
	Side string
	// Flows describes the iperf3 flows from the protocol and streams
	// labels, e.g. "tcp, 1 stream".
	Flows string
	// IsBaseline marks the baseline row.
	IsBaseline bool
	// Degradation is D_th in percent against the baseline
	// (stats.Degradation); NaN for the baseline and when either has no data.
	Degradation float64
	// PValue is the two-sided Mann-Whitney U p-value of Gbits against the
	// baseline's; NaN for the baseline and when the test cannot be run.
	PValue float64
	// PValueErr is why the test could not be run ("" when it ran).
	PValueErr string
}

// LatencyRow is one latency metric of one scenario, in ms.
type LatencyRow struct {
	// Scenario is the scenario of the row.
	Scenario string
	// Metric is MetricPingRTT, MetricTCPRTT or MetricTCPConnect.
	Metric string
	// Label is the display name of Metric.
	Label string
	// Samples summarises all samples pooled (N is the sample count; Median
	// and P99 describe the distribution).
	Samples stats.Summary
	// TrialMeans summarises the per-trial means (N is the trial count; the
	// CI is across trials). Its Mean is the figure compared with the
	// baseline.
	TrialMeans stats.Summary
	// Missing says why there are no samples, e.g. NoICMPPath; "" when
	// there are.
	Missing string
	// IsBaseline marks the baseline row.
	IsBaseline bool
	// Increase is K_lat in percent against the baseline (stats.Increase of
	// the TrialMeans means); NaN for the baseline and when either has no
	// data.
	Increase float64
}

// CPURow is the CPU use of one node in one scenario, in cores, over trials.
type CPURow struct {
	// Scenario is the scenario of the row.
	Scenario string
	// Node is the node (label node of the samples).
	Node string
	// User summarises the per-trial user CPU time.
	User stats.Summary
	// System summarises the per-trial system CPU time.
	System stats.Summary
	// Total summarises the per-trial user+system time, over the trials
	// that have both.
	Total stats.Summary
	// Docker summarises the per-trial CPU % `docker stats` computed for the
	// node (100 % = one core busy); N == 0 without cpu/docker_cpu_percent
	// samples.
	Docker stats.Summary
}

// SoftirqRow is the host softirq time of one scenario, in cores, over
// trials.
type SoftirqRow struct {
	// Scenario is the scenario of the row.
	Scenario string
	// Softirq summarises the per-trial host softirq time.
	Softirq stats.Summary
}

// Comparison is the table of published figures beside measured ones.
type Comparison struct {
	// Study and Source are copied from Published.
	Study, Source string
	// Rows follow the order of Published.Rows.
	Rows []ComparisonRow
	// HTTP follows the order of Published.HTTP.
	HTTP []HTTPComparisonRow
	// Notes are copied from Published.
	Notes []string
}

// ComparisonRow is one published figure and the matching measured one.
type ComparisonRow struct {
	// Scenario and Metric are copied from the PublishedRow.
	Scenario, Metric string
	// Unit is the published unit; Measured is converted to it.
	Unit string
	// Published is the published value (NaN when PublishedText is set).
	Published float64
	// PublishedText is the PublishedRow's Text, e.g. "N/A".
	PublishedText string
	// Measured is this run's value (NaN when MeasuredText is set): the
	// mean over trials (of the trial means for latency).
	Measured float64
	// MeasuredText says why there is no measured value, e.g. NoICMPPath or
	// "not measured".
	MeasuredText string
	// Change names the relative change shown: "D_th" for throughput,
	// "K_lat" for latency, "" for none.
	Change string
	// PublishedChange is Change computed from the published values, in
	// percent against the published baseline (NaN when not available).
	PublishedChange float64
	// MeasuredChange is Change of this run, in percent against the
	// baseline scenario (NaN when not available).
	MeasuredChange float64
	// IsBaseline marks rows of the baseline scenario.
	IsBaseline bool
}

// FailedTrial is a trial that did not end "ok".
type FailedTrial struct {
	// Scenario is the trial's scenario.
	Scenario string
	// Trial is the trial number.
	Trial int
	// Status is how it ended, e.g. "failed".
	Status string
	// Error is the error the trial reported.
	Error string
	// Started is when the trial started (zero when unknown).
	Started time.Time
	// Ended is when the trial ended (zero when unknown).
	Ended time.Time
	// Excluded counts the samples of this trial left out of the statistics.
	Excluded int
}

// SummaryRow is one row of SummaryCSV: the summary of one series.
type SummaryRow struct {
	// Scenario is the scenario of the row.
	Scenario string
	// Metric is a Metric constant; latency metrics come twice, as the
	// pooled samples (e.g. "ping_rtt", without a CI: samples of one trial
	// are not independent) and as the per-trial means (e.g.
	// "ping_rtt_trial_mean", with the CI across trials). HTTP metrics carry
	// the object and concurrency (see HTTPMetric).
	Metric string
	// Node is the node for per-node CPU metrics, "host" for softirq.
	Node string
	// Unit is "Gbit/s", "ms", "cores", "%", "s", "requests/s" or "count".
	Unit string
	// Summary is stats.Summarize of the series.
	Summary stats.Summary
}

// latencyMetric describes one latency metric read from the samples.
type latencyMetric struct {
	key, probe, metric, label string
}

var latencyMetrics = []latencyMetric{
	{MetricPingRTT, "ping", "rtt", "ping RTT (ICMP echo)"},
	{MetricTCPRTT, "tcprtt", "rtt", "TCP request/response RTT"},
	{MetricTCPConnect, "tcprtt", "connect", "TCP connect time"},
}

type trialKey struct {
	scenario string
	trial    int
}

// perTrial maps a trial number to the values of that trial in sample order.
type perTrial map[int][]float64

func (p perTrial) add(trial int, v float64) { p[trial] = append(p[trial], v) }

// means returns the sorted trial numbers and the mean of each trial.
func (p perTrial) means() ([]int, []float64) {
	trials := sortedKeys(p)
	out := make([]float64, len(trials))
	for i, t := range trials {
		out[i] = mean(p[t])
	}
	return trials, out
}

// collected is the samples of the successful trials, sorted by kind.
type collected struct {
	// throughput: scenario -> side -> trial -> Gbit/s
	throughput map[string]map[string]perTrial
	protocols  map[string][]string
	streams    map[string][]string
	// latency: metric key -> scenario -> trial -> ms; pooled keeps all
	// samples in input order.
	latency map[string]map[string]perTrial
	pooled  map[string]map[string][]float64
	// cpu: scenario -> node -> metric -> trial -> cores; nodes in order of
	// appearance.
	cpu     map[string]map[string]map[string]perTrial
	nodes   map[string][]string
	softirq map[string]perTrial
	// http: one entry per scenario, object and concurrency.
	http map[httpKey]*httpData
	// deploy: scenario -> trial -> ms; deployNodes: scenario -> distinct
	// nodes labels in order of appearance.
	deploy      map[string]perTrial
	deployNodes map[string][]string
	// load: scenario -> kind and node -> counts, keys in order of
	// appearance.
	load      map[string]map[loadKey][]float64
	loadOrder map[string][]loadKey
	// used marks scenarios with any usable sample.
	used map[string]bool
}

// Build computes the report of in. It fails if Baseline names no scenario
// of the run, or if a published row has an unknown metric or unit.
func Build(in Input) (*Report, error) {
	r := &Report{Run: in.Run}

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

	c := r.collect(in.Samples, failed)
	r.countTrials(in, failed)
	r.buildThroughput(c)
	r.buildLatency(c)
	r.buildHTTP(c)
	r.buildCPU(c)
	r.buildDeploy(c)
	r.buildLoad(c)
	if in.Published != nil {
		if err := r.buildComparison(in.Published); err != nil {
			return nil, fmt.Errorf("build report: %w", err)
		}
		r.buildHTTPComparison(in.Published)
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

func (r *Report) collect(samples []results.Sample, failed map[trialKey]*FailedTrial) *collected {
	c := &collected{
		throughput:  map[string]map[string]perTrial{},
		protocols:   map[string][]string{},
		streams:     map[string][]string{},
		latency:     map[string]map[string]perTrial{},
		pooled:      map[string]map[string][]float64{},
		cpu:         map[string]map[string]map[string]perTrial{},
		nodes:       map[string][]string{},
		softirq:     map[string]perTrial{},
		http:        map[httpKey]*httpData{},
		deploy:      map[string]perTrial{},
		deployNodes: map[string][]string{},
		load:        map[string]map[loadKey][]float64{},
		loadOrder:   map[string][]loadKey{},
		used:        map[string]bool{},
	}
	badConcurrency := 0
	ignored := map[string]int{}   // probe/metric -> count
	badUnit := map[string]int{}   // probe/metric [unit] -> count
	nonFinite := map[string]int{} // probe/metric -> count
	for _, x := range samples {
		if f := failed[trialKey{x.Scenario, x.Trial}]; f != nil {
			f.Excluded++
			continue
		}
		pm := x.Probe + "/" + x.Metric
		kind := sampleKind(x)
		if kind == "" {
			ignored[pm]++
			continue
		}
		if math.IsNaN(x.Value) || math.IsInf(x.Value, 0) {
			nonFinite[pm]++
			continue
		}
		v, ok := toCanonical(kind, x.Unit, x.Value)
		if !ok {
			badUnit[fmt.Sprintf("%s in %q", pm, x.Unit)]++
			continue
		}
		c.used[x.Scenario] = true
		switch kind {
		case MetricThroughput:
			side := x.Labels["side"]
			bySide := c.throughput[x.Scenario]
			if bySide == nil {
				bySide = map[string]perTrial{}
				c.throughput[x.Scenario] = bySide
			}
			if bySide[side] == nil {
				bySide[side] = perTrial{}
			}
			bySide[side].add(x.Trial, v)
			if p := x.Labels["protocol"]; p != "" && !slices.Contains(c.protocols[x.Scenario], p) {
				c.protocols[x.Scenario] = append(c.protocols[x.Scenario], p)
			}
			if s := x.Labels["streams"]; s != "" && !slices.Contains(c.streams[x.Scenario], s) {
				c.streams[x.Scenario] = append(c.streams[x.Scenario], s)
			}
		case MetricPingRTT, MetricTCPRTT, MetricTCPConnect:
			if c.latency[kind] == nil {
				c.latency[kind] = map[string]perTrial{}
				c.pooled[kind] = map[string][]float64{}
			}
			if c.latency[kind][x.Scenario] == nil {
				c.latency[kind][x.Scenario] = perTrial{}
			}
			c.latency[kind][x.Scenario].add(x.Trial, v)
			c.pooled[kind][x.Scenario] = append(c.pooled[kind][x.Scenario], v)
		case MetricCPUUser, MetricCPUSystem, MetricDockerCPU:
			node := x.Labels["node"]
			if node == "" {
				node = "(no node label)"
			}
			byNode := c.cpu[x.Scenario]
			if byNode == nil {
				byNode = map[string]map[string]perTrial{}
				c.cpu[x.Scenario] = byNode
			}
			if byNode[node] == nil {
				byNode[node] = map[string]perTrial{}
				c.nodes[x.Scenario] = append(c.nodes[x.Scenario], node)
			}
			if byNode[node][kind] == nil {
				byNode[node][kind] = perTrial{}
			}
			byNode[node][kind].add(x.Trial, v)
		case MetricSoftirq:
			if c.softirq[x.Scenario] == nil {
				c.softirq[x.Scenario] = perTrial{}
			}
			c.softirq[x.Scenario].add(x.Trial, v)
		case MetricDeployTime:
			c.deploy[x.Scenario] = addTrial(c.deploy[x.Scenario], x.Trial, v)
			if n := x.Labels["nodes"]; n != "" && !slices.Contains(c.deployNodes[x.Scenario], n) {
				c.deployNodes[x.Scenario] = append(c.deployNodes[x.Scenario], n)
			}
		case kindLoad:
			c.addLoad(x, v)
		default: // HTTP
			if !c.addHTTP(kind, x, v) {
				badConcurrency++
			}
		}
	}
	if badConcurrency > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d HTTP %s no concurrency label that is a positive number; shown as concurrency 0.",
			badConcurrency, plural(badConcurrency, "sample has", "samples have")))
	}
	for _, k := range sortedKeys(ignored) {
		r.Notes = append(r.Notes, fmt.Sprintf("%d %s not in the report (probe/metric %s is not one it reads).",
			ignored[k], plural(ignored[k], "sample is", "samples are"), k))
	}
	for _, k := range sortedKeys(badUnit) {
		r.Notes = append(r.Notes, fmt.Sprintf("%d %s left out: unknown unit (%s).",
			badUnit[k], plural(badUnit[k], "sample", "samples"), k))
	}
	for _, k := range sortedKeys(nonFinite) {
		r.Notes = append(r.Notes, fmt.Sprintf("%d %s left out: value is NaN or infinite (%s).",
			nonFinite[k], plural(nonFinite[k], "sample", "samples"), k))
	}
	return c
}

// sampleKind returns the report metric a sample feeds, or "" if none.
func sampleKind(x results.Sample) string {
	switch {
	case x.Probe == "iperf3" && x.Metric == "throughput":
		return MetricThroughput
	case x.Probe == "ping" && x.Metric == "rtt":
		return MetricPingRTT
	case x.Probe == "tcprtt" && x.Metric == "rtt":
		return MetricTCPRTT
	case x.Probe == "tcprtt" && x.Metric == "connect":
		return MetricTCPConnect
	case x.Probe == "cpu" && x.Metric == "cpu_user":
		return MetricCPUUser
	case x.Probe == "cpu" && x.Metric == "cpu_system":
		return MetricCPUSystem
	case x.Probe == "cpu" && x.Metric == "softirq":
		return MetricSoftirq
	case x.Probe == "cpu" && x.Metric == "docker_cpu_percent":
		return MetricDockerCPU
	case x.Probe == "deploy" && x.Metric == "deploy_time":
		return MetricDeployTime
	case x.Probe == "load" && x.Metric == "count":
		return kindLoad
	case x.Probe == "http":
		return httpKinds[x.Metric]
	case x.Probe == "http-ab" || x.Probe == "ab":
		return abKinds[x.Metric]
	}
	return ""
}

// unitFactor returns the factor converting a value in unit to the report's
// unit for metric kind (Gbit/s, ms or cores).
func unitFactor(kind, unit string) (float64, bool) {
	switch kind {
	case MetricThroughput:
		switch unit {
		case "bit/s":
			return 1e-9, true
		case "kbit/s":
			return 1e-6, true
		case "Mbit/s":
			return 1e-3, true
		case "Gbit/s":
			return 1, true
		}
	case MetricPingRTT, MetricTCPRTT, MetricTCPConnect:
		switch unit {
		case "ms":
			return 1, true
		case "us", "µs":
			return 1e-3, true
		case "s":
			return 1e3, true
		}
	case MetricCPUUser, MetricCPUSystem, MetricCPUTotal, MetricSoftirq:
		switch unit {
		case "cores":
			return 1, true
		case "%":
			return 0.01, true
		}
	case MetricDockerCPU:
		switch unit {
		case "%":
			return 1, true
		case "cores":
			return 100, true
		}
	case MetricHTTPTotalTime, MetricABTotalTime, MetricDeployTime:
		// Total times are kept in s, deploy times in ms.
		f := 1.0
		if kind == MetricDeployTime {
			f = 1e3
		}
		switch unit {
		case "s":
			return f, true
		case "ms":
			return f * 1e-3, true
		}
	case MetricHTTPRequestTime:
		switch unit {
		case "ms":
			return 1, true
		case "us", "µs":
			return 1e-3, true
		case "s":
			return 1e3, true
		}
	case MetricHTTPRPS, MetricABRPS:
		switch unit {
		case "requests/s", "req/s", "1/s", "/s":
			return 1, true
		}
	case MetricHTTPErrors, MetricHTTPNon2xx, MetricHTTPBytes, MetricHTTPRequests, kindLoad:
		switch unit {
		case "count", "":
			return 1, true
		}
	}
	return 0, false
}

// canonicalUnit returns the report's unit for metric kind.
func canonicalUnit(kind string) string {
	switch kind {
	case MetricThroughput:
		return "Gbit/s"
	case MetricPingRTT, MetricTCPRTT, MetricTCPConnect:
		return "ms"
	case MetricDockerCPU:
		return "%"
	}
	return "cores"
}

func toCanonical(kind, unit string, v float64) (float64, bool) {
	f, ok := unitFactor(kind, unit)
	return v * f, ok
}

func (r *Report) countTrials(in Input, failed map[trialKey]*FailedTrial) {
	ok := map[trialKey]bool{}
	for _, t := range in.Trials {
		if k := (trialKey{t.Scenario, t.Trial}); failed[k] == nil {
			ok[k] = true
		}
	}
	for _, x := range in.Samples {
		if k := (trialKey{x.Scenario, x.Trial}); failed[k] == nil {
			ok[k] = true
		}
	}
	counts := map[string]*TrialCount{}
	for _, s := range r.Scenarios {
		r.Trials = append(r.Trials, TrialCount{Scenario: s})
	}
	for i := range r.Trials {
		counts[r.Trials[i].Scenario] = &r.Trials[i]
	}
	for k := range ok {
		counts[k.scenario].OK++
	}
	for k := range failed {
		counts[k.scenario].Failed++
	}
}

func (r *Report) buildThroughput(c *collected) {
	if len(c.throughput) == 0 {
		return
	}
	rows := map[string]*ThroughputRow{}
	for _, s := range r.Scenarios {
		row := ThroughputRow{Scenario: s, IsBaseline: s == r.Baseline}
		bySide := c.throughput[s]
		trials := map[int]bool{}
		for _, pt := range bySide {
			for t := range pt {
				trials[t] = true
			}
		}
		var sides []string
		for _, t := range sortedKeys(trials) {
			side := ""
			for _, cand := range []string{"receiver", "sender", ""} {
				if vs := bySide[cand][t]; len(vs) > 0 {
					side = cand
					break
				}
			}
			vs := bySide[side][t]
			if len(vs) == 0 {
				// Only sides with other names: not a throughput figure.
				continue
			}
			if side != "receiver" {
				what := "the sender's figure is used"
				if side == "" {
					what = "a sample without a side label is used"
				}
				r.Notes = append(r.Notes, fmt.Sprintf("Throughput, %s trial %d: no receiver sample; %s.", s, t, what))
			}
			if side == "" {
				side = "unlabelled"
			}
			if !slices.Contains(sides, side) {
				sides = append(sides, side)
			}
			row.Trials = append(row.Trials, t)
			row.Gbits = append(row.Gbits, mean(vs))
		}
		row.Side = strings.Join(sides, "+")
		row.Flows = flows(c.protocols[s], c.streams[s])
		row.Summary = stats.Summarize(row.Gbits)
		row.Degradation, row.PValue = math.NaN(), math.NaN()
		r.Throughput = append(r.Throughput, row)
	}
	for i := range r.Throughput {
		rows[r.Throughput[i].Scenario] = &r.Throughput[i]
	}
	base := rows[r.Baseline]
	for i := range r.Throughput {
		row := &r.Throughput[i]
		if row.IsBaseline || base == nil {
			continue
		}
		if row.Summary.N > 0 && base.Summary.N > 0 {
			row.Degradation = stats.Degradation(base.Summary.Mean, row.Summary.Mean)
		}
		res, err := stats.MannWhitneyU(row.Gbits, base.Gbits)
		if err != nil {
			row.PValueErr = err.Error()
			continue
		}
		row.PValue = res.PValue
	}
}

func flows(protocols, streams []string) string {
	var parts []string
	if len(protocols) > 0 {
		parts = append(parts, strings.Join(protocols, "/"))
	}
	if len(streams) > 0 {
		word := "streams"
		if len(streams) == 1 && streams[0] == "1" {
			word = "stream"
		}
		parts = append(parts, strings.Join(streams, "/")+" "+word)
	}
	return strings.Join(parts, ", ")
}

func (r *Report) buildLatency(c *collected) {
	r.latency = c.pooled
	for _, m := range latencyMetrics {
		byScenario := c.latency[m.key]
		if len(byScenario) == 0 {
			continue
		}
		var base *LatencyRow
		start := len(r.Latency)
		for _, s := range r.Scenarios {
			row := LatencyRow{Scenario: s, Metric: m.key, Label: m.label, IsBaseline: s == r.Baseline, Increase: math.NaN()}
			row.Samples = stats.Summarize(c.pooled[m.key][s])
			_, means := byScenario[s].means()
			row.TrialMeans = stats.Summarize(means)
			if row.Samples.N == 0 {
				row.Missing = "no samples"
				if m.key == MetricPingRTT && c.used[s] {
					row.Missing = NoICMPPath
				}
			}
			r.Latency = append(r.Latency, row)
		}
		for i := start; i < len(r.Latency); i++ {
			if r.Latency[i].IsBaseline {
				base = &r.Latency[i]
			}
		}
		for i := start; i < len(r.Latency); i++ {
			row := &r.Latency[i]
			if row.IsBaseline || base == nil || row.TrialMeans.N == 0 || base.TrialMeans.N == 0 {
				continue
			}
			row.Increase = stats.Increase(base.TrialMeans.Mean, row.TrialMeans.Mean)
		}
	}
}

func (r *Report) buildCPU(c *collected) {
	for _, s := range r.Scenarios {
		for _, node := range c.nodes[s] {
			m := c.cpu[s][node]
			row := CPURow{Scenario: s, Node: node}
			_, user := m[MetricCPUUser].means()
			_, sys := m[MetricCPUSystem].means()
			row.User = stats.Summarize(user)
			row.System = stats.Summarize(sys)
			var total []float64
			for _, t := range sortedKeys(m[MetricCPUUser]) {
				if vs := m[MetricCPUSystem][t]; len(vs) > 0 {
					total = append(total, mean(m[MetricCPUUser][t])+mean(vs))
				}
			}
			row.Total = stats.Summarize(total)
			_, docker := m[MetricDockerCPU].means()
			row.Docker = stats.Summarize(docker)
			r.CPU = append(r.CPU, row)
		}
		if pt := c.softirq[s]; len(pt) > 0 {
			_, v := pt.means()
			r.Softirq = append(r.Softirq, SoftirqRow{Scenario: s, Softirq: stats.Summarize(v)})
		}
	}
	for _, s := range r.Scenarios {
		if f := r.cpuFinding(s); f != "" {
			r.CPUFindings = append(r.CPUFindings, f)
		}
	}
}

// idleCores is the CPU use below which a node counts as idle in its own
// cgroup (it prints as 0.00 cores).
const idleCores = 0.005

// cpuFinding says in one sentence where the cycles of scenario s went.
func (r *Report) cpuFinding(s string) string {
	var nodes []CPURow
	for _, row := range r.CPU {
		if row.Scenario == s && row.Total.N > 0 {
			nodes = append(nodes, row)
		}
	}
	soft := math.NaN()
	for _, row := range r.Softirq {
		if row.Scenario == s && row.Softirq.N > 0 {
			soft = row.Softirq.Mean
		}
	}
	if len(nodes) == 0 && math.IsNaN(soft) {
		return ""
	}
	thr := ""
	for _, row := range r.Throughput {
		if row.Scenario == s && row.Summary.N > 0 {
			thr = fmt.Sprintf(" at %s Gbit/s", f2(row.Summary.Mean))
		}
	}
	// Busiest first; ties keep the order of appearance.
	slices.SortStableFunc(nodes, func(a, b CPURow) int { return cmp.Compare(b.Total.Mean, a.Total.Mean) })
	var parts []string
	softNamed := false
	for i, n := range nodes {
		desc := fmt.Sprintf("%s %s cores (%s user, %s system)", n.Node, f2(n.Total.Mean), f2(n.User.Mean), f2(n.System.Mean))
		switch {
		case i == 0 && n.Total.Mean >= idleCores:
			desc += thr + ", the busiest node"
			if math.IsNaN(soft) || soft <= n.Total.Mean {
				desc += " and the bottleneck candidate"
			}
		case n.Total.Mean < idleCores && !math.IsNaN(soft) && soft >= idleCores:
			desc = fmt.Sprintf("%s %s cores in its own cgroup — its forwarding runs in host softirq (%s cores)",
				n.Node, f2(n.Total.Mean), f2(soft))
			softNamed = true
		case n.Total.Mean < idleCores:
			desc = fmt.Sprintf("%s %s cores in its own cgroup", n.Node, f2(n.Total.Mean))
		}
		parts = append(parts, desc)
	}
	if !math.IsNaN(soft) {
		switch {
		case len(nodes) == 0:
			parts = append(parts, fmt.Sprintf("host softirq %s cores%s (no per-node figures)", f2(soft), thr))
		case soft > nodes[0].Total.Mean:
			parts = append(parts, fmt.Sprintf("host softirq %s cores, more than any node: kernel packet processing is the bottleneck candidate", f2(soft)))
		case !softNamed:
			parts = append(parts, fmt.Sprintf("host softirq %s cores", f2(soft)))
		}
	}
	return s + ": " + strings.Join(parts, "; ") + "."
}

// buildComparison fills r.Comparison from the published figures.
func (r *Report) buildComparison(p *Published) error {
	cmpT := &Comparison{Study: p.Study, Source: p.Source}
	// Published baseline values by metric, in the published units.
	pubBase := map[string]PublishedRow{}
	for _, row := range p.Rows {
		if row.Scenario == r.Baseline && row.Text == "" {
			pubBase[row.Metric] = row
		}
	}
	for i, pr := range p.Rows {
		kind, node, ok := splitMetric(pr.Metric)
		if !ok {
			return fmt.Errorf("published row %d (%s %s): unknown metric %q", i+1, pr.Scenario, pr.Metric, pr.Metric)
		}
		if pr.Unit == "" && pr.Text != "" {
			// A figure given only as text needs no unit; the measured one is
			// then shown in the report's own unit.
			pr.Unit = canonicalUnit(kind)
		}
		f, ok := unitFactor(kind, pr.Unit)
		if !ok {
			return fmt.Errorf("published row %d (%s %s): unit %q does not fit the metric", i+1, pr.Scenario, pr.Metric, pr.Unit)
		}
		row := ComparisonRow{
			Scenario: pr.Scenario, Metric: pr.Metric, Unit: pr.Unit,
			Published: pr.Value, PublishedText: pr.Text,
			PublishedChange: math.NaN(), MeasuredChange: math.NaN(),
			IsBaseline: pr.Scenario == r.Baseline,
		}
		if pr.Text != "" {
			row.Published = math.NaN()
		}
		measured, change, missing := r.measured(kind, node, pr.Scenario)
		row.Measured = measured / f
		row.MeasuredText = missing
		if missing != "" {
			row.Measured = math.NaN()
		}
		switch kind {
		case MetricThroughput:
			row.Change = "D_th"
		case MetricPingRTT, MetricTCPRTT, MetricTCPConnect:
			row.Change = "K_lat"
		}
		if row.Change != "" && !row.IsBaseline {
			row.MeasuredChange = change
			if b, ok := pubBase[pr.Metric]; ok && pr.Text == "" {
				bf, _ := unitFactor(kind, b.Unit)
				base, val := b.Value*bf, pr.Value*f
				if kind == MetricThroughput {
					row.PublishedChange = stats.Degradation(base, val)
				} else {
					row.PublishedChange = stats.Increase(base, val)
				}
			}
		}
		cmpT.Rows = append(cmpT.Rows, row)
	}
	r.Comparison = cmpT
	return nil
}

// splitMetric parses a PublishedRow metric into the report metric and node.
func splitMetric(m string) (kind, node string, ok bool) {
	if k, n, found := strings.Cut(m, ":"); found {
		switch k {
		case MetricCPUUser, MetricCPUSystem, MetricCPUTotal, MetricDockerCPU:
			return k, n, n != ""
		}
		return "", "", false
	}
	switch m {
	case MetricThroughput, MetricPingRTT, MetricTCPRTT, MetricTCPConnect, MetricSoftirq:
		return m, "", true
	}
	return "", "", false
}

// measured returns this run's figure for a metric of a scenario in the
// report's unit, its change against the baseline in percent (NaN if none),
// and a text when there is no figure.
func (r *Report) measured(kind, node, scenario string) (v, change float64, missing string) {
	const notMeasured = "not measured"
	switch kind {
	case MetricThroughput:
		for _, row := range r.Throughput {
			if row.Scenario == scenario && row.Summary.N > 0 {
				return row.Summary.Mean, row.Degradation, ""
			}
		}
	case MetricPingRTT, MetricTCPRTT, MetricTCPConnect:
		for _, row := range r.Latency {
			if row.Scenario == scenario && row.Metric == kind {
				if row.Missing != "" {
					return math.NaN(), math.NaN(), row.Missing
				}
				return row.TrialMeans.Mean, row.Increase, ""
			}
		}
	case MetricSoftirq:
		for _, row := range r.Softirq {
			if row.Scenario == scenario {
				return row.Softirq.Mean, math.NaN(), ""
			}
		}
	default:
		for _, row := range r.CPU {
			if row.Scenario != scenario || row.Node != node {
				continue
			}
			s := map[string]stats.Summary{MetricCPUUser: row.User, MetricCPUSystem: row.System, MetricCPUTotal: row.Total,
				MetricDockerCPU: row.Docker}[kind]
			if s.N > 0 {
				return s.Mean, math.NaN(), ""
			}
		}
	}
	return math.NaN(), math.NaN(), notMeasured
}

func (r *Report) buildSummary() {
	add := func(s, metric, node, unit string, sum stats.Summary) {
		r.Summary = append(r.Summary, SummaryRow{Scenario: s, Metric: metric, Node: node, Unit: unit, Summary: sum})
	}
	for _, s := range r.Scenarios {
		for _, row := range r.Throughput {
			if row.Scenario == s {
				add(s, MetricThroughput, "", "Gbit/s", row.Summary)
			}
		}
		for _, row := range r.Latency {
			if row.Scenario == s {
				pooled := row.Samples
				// Samples of one trial are not independent: no CI on the
				// pooled series, only across trial means.
				pooled.CI95Low, pooled.CI95High, pooled.CI95Half = math.NaN(), math.NaN(), math.NaN()
				add(s, row.Metric, "", "ms", pooled)
				add(s, row.Metric+"_trial_mean", "", "ms", row.TrialMeans)
			}
		}
		for _, row := range r.CPU {
			if row.Scenario == s {
				add(s, MetricCPUUser, row.Node, "cores", row.User)
				add(s, MetricCPUSystem, row.Node, "cores", row.System)
				add(s, MetricCPUTotal, row.Node, "cores", row.Total)
				if row.Docker.N > 0 {
					add(s, MetricDockerCPU, row.Node, "%", row.Docker)
				}
			}
		}
		for _, row := range r.Softirq {
			if row.Scenario == s {
				add(s, MetricSoftirq, "host", "cores", row.Softirq)
			}
		}
		r.httpSummary(s, add)
		for _, row := range r.Deploy {
			if row.Scenario == s {
				add(s, MetricDeployTime, "", "ms", row.Summary)
			}
		}
	}
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
