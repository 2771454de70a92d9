package report

import (
	"math"

	"github.com/sfclab/sfclab/stats"
)

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
