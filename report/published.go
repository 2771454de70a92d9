package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/sfclab/sfclab/stats"
)

// Published holds the figures a published study reports, to be shown beside
// the measured ones.
type Published struct {
	// Study names the study, e.g. "A. Docker-based NFV service chaining on a
	// single host (2026)"; Source says which of its tables or slides the
	// figures come from and how the study ran, never a file path.
	Study, Source string
	// Reference cites the study: authors, title, venue, year.
	Reference string
	// Rows are the published figures, shown in this order.
	Rows []PublishedRow
	// HTTP are the published HTTP load figures (study B: seconds for a
	// number of requests, mean ± 95 % CI), shown in this order in the table
	// "Published vs measured (HTTP)".
	HTTP []PublishedHTTP
	// HTTPRequests is the number of requests each published HTTP time
	// covers (study B: 10,000). A measured / published ratio of times is
	// given only where every trial finished exactly this many requests;
	// elsewhere the ratio is per request, and with 0 there is none.
	HTTPRequests int
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
	// Claims are the study's own conclusions; the report's verdict says
	// whether each holds in this run.
	Claims []Claim
	// Modes, when set, is a table of this run's throughput case by case
	// across steering modes or placements (measured figures only).
	Modes *ModeTable
	// Figures are the study's figures and tables the first screen
	// reproduces beside the published values; nil derives them from Rows,
	// HTTP and the run's rtt rows (see Report.figures).
	Figures []Figure
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

// Comparison is the table of published figures beside measured ones.
type Comparison struct {
	// Study, Source and Reference are copied from Published.
	Study, Source, Reference string
	// Rows follow the order of Published.Rows.
	Rows []ComparisonRow
	// HTTP follows the order of Published.HTTP.
	HTTP []HTTPComparisonRow
	// Notes are copied from Published.
	Notes []string
	// Claims are copied from Published.
	Claims []Claim
	// HTTPRequests is copied from Published.
	HTTPRequests int
	// Figures are copied from Published.
	Figures []Figure
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

// buildComparison fills r.Comparison from the published figures.
func (r *Report) buildComparison(p *Published) error {
	cmpT := &Comparison{Study: p.Study, Source: p.Source, Reference: p.Reference, Claims: p.Claims, HTTPRequests: p.HTTPRequests, Figures: p.Figures}
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
	if r.NotRun(scenario) != "" {
		return math.NaN(), math.NaN(), NotRunText
	}
	return math.NaN(), math.NaN(), notMeasured
}

// NotRunText is the measured cell of a published figure whose scenario this run left out
// (Report.NotRun); the table's note says why.
const NotRunText = "not run"
