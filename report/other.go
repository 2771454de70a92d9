package report

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/results/metric"
	"github.com/sfclab/sfclab/stats"
)

// OtherRow summarises a metric of the vocabulary that no section of the report reads (a
// probe's figure the report has no table for, or a new probe's): per scenario and the
// labels that tell its series apart, over the per-trial means, in the unit the probe emits.
type OtherRow struct {
	// Probe and Metric name the samples; Unit is the vocabulary's.
	Probe, Metric, Unit string
	// Scenario is the scenario of the row.
	Scenario string
	// Labels are the labels that tell the series apart (node, side, end, host, phase), as
	// "k=v" joined by ", "; empty when the samples have none of them.
	Labels string
	// Samples counts the samples.
	Samples int
	// Summary summarises the per-trial means.
	Summary stats.Summary
}

// OtherPart is the section of the metrics no other section reads.
type OtherPart struct {
	// Other has one row per probe/metric, scenario and series, in the order the samples
	// first appear, grouped by probe/metric.
	Other []OtherRow
}

// seriesLabels are the labels that split a metric into series in Other.
var seriesLabels = []string{"node", "host", "side", "end", "phase"}

// buildOther summarises the samples of known metrics the report does not otherwise read.
func (r *Report) buildOther(samples []results.Sample) {
	type key struct{ pm, scenario, labels string }
	per := map[key]perTrial{}
	n := map[key]int{}
	var order []key
	var pms []string
	for _, x := range samples {
		if math.IsNaN(x.Value) || math.IsInf(x.Value, 0) {
			continue
		}
		var ls []string
		for _, l := range seriesLabels {
			if v, ok := x.Labels[l]; ok {
				ls = append(ls, l+"="+v)
			}
		}
		k := key{x.Probe + "/" + x.Metric, x.Scenario, strings.Join(ls, ", ")}
		if per[k] == nil {
			per[k] = perTrial{}
			order = append(order, k)
			if !slices.Contains(pms, k.pm) {
				pms = append(pms, k.pm)
			}
		}
		per[k].add(x.Trial, x.Value)
		n[k]++
	}
	scenarioIndex := map[string]int{}
	for i, s := range r.Scenarios {
		scenarioIndex[s] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if a.pm != b.pm {
			return slices.Index(pms, a.pm) < slices.Index(pms, b.pm)
		}
		return scenarioIndex[a.scenario] < scenarioIndex[b.scenario]
	})
	for _, k := range order {
		probe, m, _ := strings.Cut(k.pm, "/")
		d, _ := metric.Lookup(probe, m)
		_, means := per[k].means()
		r.Other = append(r.Other, OtherRow{Probe: probe, Metric: m, Unit: d.Unit, Scenario: k.scenario, Labels: k.labels,
			Samples: n[k], Summary: stats.Summarize(means)})
	}
}

// otherSection is the table of Other; ok is false without rows.
func (r *Report) otherSection() (section, bool) {
	if len(r.Other) == 0 {
		return section{}, false
	}
	t := &table{id: "other-table", header: []string{"probe/metric", "unit", "scenario", "series", "trials", "samples", "mean", "95 % CI"},
		right: []bool{false, false, false, false, true, true, true, true}}
	for _, row := range r.Other {
		s := row.Summary
		t.rows = append(t.rows, []string{row.Probe + "/" + row.Metric, row.Unit, r.ScenarioLabel(row.Scenario), orDash(row.Labels),
			strconv.Itoa(s.N), strconv.Itoa(row.Samples), fixed(s.Mean, 3), ciRange(s.CI95Low, s.CI95High, 3)})
	}
	return section{id: "other", title: "Other measurements", level: 2, blocks: []block{{table: t}, {para: fmt.Sprint(
		"Figures the probes recorded that no section above shows, in the unit the probe emits them (package results/metric names each): ",
		"the mean over trials of each trial's mean, with its Student t 95 % CI.")}}}, true
}
