package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sfclab/sfclab/results"
)

// addAttempts records a repeated run's "attempts" or "attempt_cap" sample.
func (d *rttData) addAttempts(x results.Sample) {
	if x.Metric == "attempt_cap" {
		d.attemptCap = max(d.attemptCap, int(x.Value))
		return
	}
	if d.attempts == nil {
		d.attempts = map[int]results.Sample{}
	}
	d.attempts[x.Trial] = x
}

// fillAttempts puts the attempts each trial needed into row (nothing when the run was not
// repeated).
func (d *rttData) fillAttempts(row *RTTRow) {
	if len(d.attempts) == 0 {
		return
	}
	trials := make([]int, 0, len(d.attempts))
	for t := range d.attempts {
		trials = append(trials, t)
	}
	slices.Sort(trials)
	for _, t := range trials {
		x := d.attempts[t]
		row.Attempts = append(row.Attempts, int(x.Value))
		if x.Labels["complete"] != "true" {
			row.Incomplete++
		}
	}
	row.AttemptCap = d.attemptCap
}

// rttAttemptBlocks says, when the probe repeated runs until every echo came back, how many
// runs each cell's trials needed.
func (r *Report) rttAttemptBlocks() []block {
	t := &table{id: "rtt-attempts", header: []string{"scenario", "rate", "runs per trial", "at most", "trials still losing echoes"},
		right: []bool{false, false, false, true, true}}
	for _, row := range r.RTT {
		if len(row.Attempts) == 0 {
			continue
		}
		var as []string
		for _, a := range row.Attempts {
			as = append(as, strconv.Itoa(a))
		}
		t.rows = append(t.rows, []string{row.Scenario, row.Rate, strings.Join(as, ", "), strconv.Itoa(row.AttemptCap), strconv.Itoa(row.Incomplete)})
	}
	if len(t.rows) == 0 {
		return nil
	}
	return []block{{para: "Repeated until every echo came back (the probe's attempts option, as study D repeated a run until all its 1,000 echoes arrived): " +
		"the runs each trial needed, in trial order. The figures above are of each trial's last run; every earlier run is kept in the results " +
		"(samples labelled attempt and final=false). A trial still losing echoes at the bound is counted in the last column; its last run's loss is in the loss column."},
		{table: t}}
}

// attemptsText is the verdict's line on repeated runs ("" when none was repeated).
func (r *Report) attemptsText() string {
	total, retried, incomplete, cells := 0, 0, 0, 0
	for _, row := range r.RTT {
		if len(row.Attempts) == 0 {
			continue
		}
		cells++
		for _, a := range row.Attempts {
			total++
			if a > 1 {
				retried++
			}
		}
		incomplete += row.Incomplete
	}
	if cells == 0 {
		return ""
	}
	return fmt.Sprintf("Runs repeated until every echo came back: %d of %d trials needed more than one run; %d still lost echoes at the bound (see the attempts table).", retried, total, incomplete)
}
