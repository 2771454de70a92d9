package report

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/sfclab/sfclab/stats"
)

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
		if row.IsBaseline || base == nil || r.Incomparable(row.Scenario, base.Scenario) {
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
