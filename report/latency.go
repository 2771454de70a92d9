package report

import (
	"math"

	"github.com/sfclab/sfclab/stats"
)

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

func (r *Report) buildLatency(c *collected) {
	r.latency = c.pooled
	r.latTrials = c.latency
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
				if m.key == MetricPingRTT && c.noICMP[s] {
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
			if row.IsBaseline || base == nil || row.TrialMeans.N == 0 || base.TrialMeans.N == 0 || r.Incomparable(row.Scenario, base.Scenario) {
				continue
			}
			row.Increase = stats.Increase(base.TrialMeans.Mean, row.TrialMeans.Mean)
		}
	}
}
