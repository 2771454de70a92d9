// Package results holds what measurements produce: raw samples (the artefact every statistic
// and report is recomputed from), and their store.
package results

import "time"

// Sample is one raw measurement.
type Sample struct {
	// Experiment and Scenario say what was measured; Trial is the repetition (1-based).
	Experiment string `json:"experiment"`
	// Scenario is the scenario of Experiment the sample was taken in.
	Scenario string `json:"scenario"`
	// Trial is the repetition of Scenario (1-based).
	Trial int `json:"trial"`
	// Probe is the probe that took it ("iperf3", "ping", "tcprtt", "cpu").
	Probe string `json:"probe"`
	// Metric is what the value is, e.g. "throughput", "rtt", "connect", "cpu_user", "cpu_system", "softirq".
	Metric string `json:"metric"`
	// Value is the measured value, in Unit.
	Value float64 `json:"value"`
	// Unit of Value: "bit/s", "ms", "cores", "s", "count".
	Unit string `json:"unit"`
	// Time is when the value was measured.
	Time time.Time `json:"time"`
	// Labels qualify the sample: node, side ("sender"/"receiver"), seq, cc algorithm, ...
	Labels map[string]string `json:"labels,omitempty"`
}

// Trial status values.
const (
	TrialOK     = "ok"
	TrialFailed = "failed"
)

// Trial is one repetition of one scenario and how it ended.
type Trial struct {
	// Experiment is the experiment the trial belongs to.
	Experiment string `json:"experiment"`
	// Scenario is the scenario the trial repeats.
	Scenario string `json:"scenario"`
	// Trial is the repetition number (1-based).
	Trial int `json:"trial"`
	// Status is TrialOK, TrialFailed, or a state of a trial not yet ended.
	Status string `json:"status"`
	// Error says why the trial failed ("" when it did not).
	Error string `json:"error,omitempty"`
	// Started is when the trial started.
	Started time.Time `json:"started"`
	// Ended is when the trial ended (zero while it runs).
	Ended time.Time `json:"ended"`
}

// Run describes one bench run: the experiment, where it ran and whether it finished.
type Run struct {
	// Experiment is the experiment run.
	Experiment string `json:"experiment"`
	// Study names the published study the experiment reproduces ("" for none).
	Study string `json:"study,omitempty"`
	// Started is when the run started.
	Started time.Time `json:"started"`
	// Ended is when the run ended (zero while it runs).
	Ended time.Time `json:"ended"`
	// Complete is false for a run that was interrupted before every trial ran.
	Complete bool `json:"complete"`
	// Env describes where it ran: kernel, cpu, cores, tool versions, sfclab version.
	Env map[string]string `json:"env"`
}
