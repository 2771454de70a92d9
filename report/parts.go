package report

import "github.com/sfclab/sfclab/stats"

// The parts a Report is assembled from: each holds the tables of one section, is filled by
// that section's build step and read by its renderer (and by the verdict and the studies'
// claims, through the Report, whose fields they become).

// ThroughputPart is the throughput section's table (throughput.go).
type ThroughputPart struct {
	// Throughput has one row per scenario (none if the run has no
	// throughput sample at all).
	Throughput []ThroughputRow
}

// LatencyPart is the latency section (latency.go).
type LatencyPart struct {
	// Latency has one row per latency metric present in the run and
	// scenario, grouped by metric.
	Latency []LatencyRow
	// latency holds the pooled samples (ms) for the distribution charts,
	// by metric and scenario.
	latency map[string]map[string][]float64
	// latTrials holds the per-trial latency samples (metric -> scenario ->
	// trial -> ms) for the paired ratios of the verdict.
	latTrials map[string]map[string]perTrial
}

// HTTPPart is the HTTP load section (http.go).
type HTTPPart struct {
	// HTTP has one row per object, concurrency and scenario with HTTP
	// samples, ordered by concurrency, then object size, then scenario.
	HTTP []HTTPRow
	// httpBaselines is Published.HTTPBaselines (nil without).
	httpBaselines map[string]string
}

// CPUPart is the CPU section (cpu.go, hostcpu.go).
type CPUPart struct {
	// CPU has one row per scenario and node, nodes in order of appearance.
	CPU []CPURow
	// Softirq has one row per scenario with host softirq samples.
	Softirq []SoftirqRow
	// CPUWindow summarises the spans (s) the CPU figures of iperf3 transfers cover (samples
	// cpu/window with bound inside or around), over all trials; N == 0 when none.
	CPUWindow stats.Summary
	// CPUFindings has one sentence per scenario with CPU samples saying
	// where the cycles went, computed from the data.
	CPUFindings []string
	// HostCPU has one row per scenario and emulated host with per-host CPU samples.
	HostCPU []HostCPURow
}

// DeployPart is the deploy-time section.
type DeployPart struct {
	// Deploy has one row per scenario with deploy-time samples.
	Deploy []DeployRow
}

// LoadPart is the background load the run section states.
type LoadPart struct {
	// Load is the background load of each scenario that ran with one, in
	// display order, then in order of appearance.
	Load []LoadRow
}

// RTTPart is the rtt probe's section (rtt.go, rttbox.go).
type RTTPart struct {
	// RTT has one row per scenario and rate of the rtt probe; RTTTrends and RTTPairs are its
	// tests against background nodes and between scenarios (see rtt.go).
	RTT       []RTTRow
	RTTTrends []RTTTrend
	RTTPairs  []RTTPair
	// RTTBoxes are the rtt section's box plots, one per background kind, host and rate.
	RTTBoxes []RTTBoxGroup
	// RTTStudyTests and RTTStudyCorrs are study D's Table 3 and Fig. 12, its way and ours
	// (see rttstudy.go).
	RTTStudyTests []RTTStudyTest
	RTTStudyCorrs []RTTStudyCorr
	rttEchoes     map[rttKey]*rttData
}

// NDRPart is the no-drop-rate section (ndr.go).
type NDRPart struct {
	// NDR has one row per no-drop-rate search (scenario, frame size, trial); see ndr.go.
	NDR []NDRRow
}

// FlowsPart is the flows probe's section and the tap's (flows.go).
type FlowsPart struct {
	// FlowSeries, Flows and FlowWindows are the flows probe's time series, flows and the
	// windows between their ends; Taps what each tap got (see flows.go).
	FlowSeries  []FlowSeries
	Flows       []FlowRow
	FlowWindows []FlowWindow
	Taps        []TapRow
}

// PublishedPart is what a reproduced study adds: the published figures beside the measured
// ones and the modes table (published.go, balancers.go).
type PublishedPart struct {
	// Modes compares steering modes case by case (Published.Modes), nil without.
	Modes *ModeTable
	// Comparison is the published-vs-measured tables; nil when the Input
	// had no Published.
	Comparison *Comparison
}
