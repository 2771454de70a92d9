package report

import (
	"time"
)

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
