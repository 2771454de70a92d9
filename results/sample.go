// Package results holds what measurements produce: raw samples (the artefact every statistic
// and report is recomputed from), and their store.
package results

import "time"

// Sample is one raw measurement.
type Sample struct {
	// Experiment and Scenario say what was measured; Trial is the repetition (1-based).
	Experiment string `json:"experiment"`
	Scenario   string `json:"scenario"`
	Trial      int    `json:"trial"`
	// Probe is the probe that took it ("iperf3", "ping", "tcprtt", "cpu").
	Probe string `json:"probe"`
	// Metric is what the value is, e.g. "throughput", "rtt", "connect", "cpu_user", "cpu_system", "softirq".
	Metric string  `json:"metric"`
	Value  float64 `json:"value"`
	// Unit of Value: "bit/s", "ms", "cores", "s", "count".
	Unit string    `json:"unit"`
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
	Experiment string    `json:"experiment"`
	Scenario   string    `json:"scenario"`
	Trial      int       `json:"trial"`
	Status     string    `json:"status"`
	Error      string    `json:"error,omitempty"`
	Started    time.Time `json:"started"`
	Ended      time.Time `json:"ended"`
}

// Run describes one bench run: the experiment, where it ran and whether it finished.
type Run struct {
	Experiment string `json:"experiment"`
	// Study names the published study the experiment reproduces ("" for none).
	Study    string            `json:"study,omitempty"`
	Started  time.Time         `json:"started"`
	Ended    time.Time         `json:"ended"`
	Complete bool              `json:"complete"`
	Env      map[string]string `json:"env"`
}
