package report

import (
	"fmt"
	"math"
	"slices"

	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/results/metric"
)

// latencyMetric describes one latency metric read from the samples.
type latencyMetric struct {
	key, probe, metric, label string
}

var latencyMetrics = []latencyMetric{
	{MetricPingRTT, "ping", "rtt", "ping RTT (ICMP echo)"},
	{MetricTCPRTT, "tcprtt", "rtt", "TCP request/response RTT"},
	{MetricTCPConnect, "tcprtt", "connect", "TCP connect time"},
}

type trialKey struct {
	scenario string
	trial    int
}

// perTrial maps a trial number to the values of that trial in sample order.
type perTrial map[int][]float64

func (p perTrial) add(trial int, v float64) { p[trial] = append(p[trial], v) }

// means returns the sorted trial numbers and the mean of each trial.
func (p perTrial) means() ([]int, []float64) {
	trials := sortedKeys(p)
	out := make([]float64, len(trials))
	for i, t := range trials {
		out[i] = mean(p[t])
	}
	return trials, out
}

// collected is the samples of the successful trials, sorted by kind.
type collected struct {
	// throughput: scenario -> side -> trial -> Gbit/s
	throughput map[string]map[string]perTrial
	protocols  map[string][]string
	streams    map[string][]string
	// latency: metric key -> scenario -> trial -> ms; pooled keeps all
	// samples in input order.
	latency map[string]map[string]perTrial
	pooled  map[string]map[string][]float64
	// cpu: scenario -> node -> metric -> trial -> cores; nodes in order of
	// appearance.
	cpu     map[string]map[string]map[string]perTrial
	nodes   map[string][]string
	softirq map[string]perTrial
	// cpuWindow: the spans (s) the CPU figures of iperf3 transfers cover.
	cpuWindow []float64
	// http: one entry per scenario, object and concurrency.
	http map[httpKey]*httpData
	// deploy: scenario -> trial -> ms; deployNodes: scenario -> distinct
	// nodes labels in order of appearance.
	deploy      map[string]perTrial
	deployNodes map[string][]string
	// runtimes: scenario -> distinct runtime labels of its deploy samples.
	runtimes map[string][]string
	// load: scenario -> kind and node -> counts, keys in order of
	// appearance.
	load      map[string]map[loadKey][]float64
	loadOrder map[string][]loadKey
	// used marks scenarios with any usable sample.
	used map[string]bool
	// noICMP marks scenarios whose ping probe said the chain has no ICMP
	// path (a ping/loss sample labelled icmp_path=none).
	noICMP map[string]bool
	// other: samples of known metrics no section reads (other.go).
	other []results.Sample
}

func (r *Report) collect(samples []results.Sample, failed map[trialKey]*FailedTrial) *collected {
	c := &collected{
		throughput:  map[string]map[string]perTrial{},
		protocols:   map[string][]string{},
		streams:     map[string][]string{},
		latency:     map[string]map[string]perTrial{},
		pooled:      map[string]map[string][]float64{},
		cpu:         map[string]map[string]map[string]perTrial{},
		nodes:       map[string][]string{},
		softirq:     map[string]perTrial{},
		http:        map[httpKey]*httpData{},
		deploy:      map[string]perTrial{},
		deployNodes: map[string][]string{},
		runtimes:    map[string][]string{},
		load:        map[string]map[loadKey][]float64{},
		loadOrder:   map[string][]loadKey{},
		used:        map[string]bool{},
		noICMP:      map[string]bool{},
	}
	badConcurrency := 0
	badUnit := map[string]int{}   // probe/metric [unit] -> count
	nonFinite := map[string]int{} // probe/metric -> count
	for _, x := range samples {
		if f := failed[trialKey{x.Scenario, x.Trial}]; f != nil {
			f.Excluded++
			continue
		}
		pm := x.Probe + "/" + x.Metric
		if pm == metric.PingLoss.ID() {
			// Read for one thing only: the probe saying the chain has no ICMP path.
			if x.Labels["icmp_path"] == "none" {
				c.noICMP[x.Scenario] = true
			}
			continue
		}
		if x.Probe == metric.NDR || x.Probe == metric.Flows { // built by buildNDR, buildFlows
			c.used[x.Scenario] = true
			continue
		}
		kind := sampleKind(x)
		if x.Probe == metric.RTT || pm == metric.LoadBackground.ID() {
			continue // read by buildRTT
		}
		if isHostCPU(x) {
			continue // read by buildHostCPU
		}
		if r.readByUnit(x) {
			continue // read by its unit (unit.go)
		}
		if pm == metric.CPUWindow.ID() { // the span the cpu figures cover: said in the CPU section
			if b := x.Labels["bound"]; (b == "inside" || b == "around") && x.Unit == "s" && !math.IsNaN(x.Value) && !math.IsInf(x.Value, 0) {
				c.cpuWindow = append(c.cpuWindow, x.Value)
			}
			continue
		}
		if pm == metric.HTTPPhaseMean.ID() {
			continue // the medians (phase_median) are read; the means stay in the raw samples
		}
		if kind == "" {
			c.other = append(c.other, x) // a known metric no section reads: Other measurements
			continue
		}
		if math.IsNaN(x.Value) || math.IsInf(x.Value, 0) {
			nonFinite[pm]++
			continue
		}
		v, ok := toCanonical(kind, x.Unit, x.Value)
		if !ok {
			badUnit[fmt.Sprintf("%s in %q", pm, x.Unit)]++
			continue
		}
		c.used[x.Scenario] = true
		switch kind {
		case MetricThroughput:
			side := x.Labels["side"]
			bySide := c.throughput[x.Scenario]
			if bySide == nil {
				bySide = map[string]perTrial{}
				c.throughput[x.Scenario] = bySide
			}
			if bySide[side] == nil {
				bySide[side] = perTrial{}
			}
			bySide[side].add(x.Trial, v)
			if p := x.Labels["protocol"]; p != "" && !slices.Contains(c.protocols[x.Scenario], p) {
				c.protocols[x.Scenario] = append(c.protocols[x.Scenario], p)
			}
			if s := x.Labels["streams"]; s != "" && !slices.Contains(c.streams[x.Scenario], s) {
				c.streams[x.Scenario] = append(c.streams[x.Scenario], s)
			}
		case MetricPingRTT, MetricTCPRTT, MetricTCPConnect:
			if c.latency[kind] == nil {
				c.latency[kind] = map[string]perTrial{}
				c.pooled[kind] = map[string][]float64{}
			}
			if c.latency[kind][x.Scenario] == nil {
				c.latency[kind][x.Scenario] = perTrial{}
			}
			c.latency[kind][x.Scenario].add(x.Trial, v)
			c.pooled[kind][x.Scenario] = append(c.pooled[kind][x.Scenario], v)
		case MetricCPUUser, MetricCPUSystem, MetricDockerCPU:
			node := x.Labels["node"]
			if node == "" {
				node = "(no node label)"
			}
			byNode := c.cpu[x.Scenario]
			if byNode == nil {
				byNode = map[string]map[string]perTrial{}
				c.cpu[x.Scenario] = byNode
			}
			if byNode[node] == nil {
				byNode[node] = map[string]perTrial{}
				c.nodes[x.Scenario] = append(c.nodes[x.Scenario], node)
			}
			if byNode[node][kind] == nil {
				byNode[node][kind] = perTrial{}
			}
			byNode[node][kind].add(x.Trial, v)
		case MetricSoftirq:
			if c.softirq[x.Scenario] == nil {
				c.softirq[x.Scenario] = perTrial{}
			}
			c.softirq[x.Scenario].add(x.Trial, v)
		case MetricDeployTime:
			c.deploy[x.Scenario] = addTrial(c.deploy[x.Scenario], x.Trial, v)
			if n := x.Labels["nodes"]; n != "" && !slices.Contains(c.deployNodes[x.Scenario], n) {
				c.deployNodes[x.Scenario] = append(c.deployNodes[x.Scenario], n)
			}
			if rt := x.Labels["runtime"]; rt != "" && !slices.Contains(c.runtimes[x.Scenario], rt) {
				c.runtimes[x.Scenario] = append(c.runtimes[x.Scenario], rt)
			}
		case kindLoad:
			c.addLoad(x, v)
		default: // HTTP
			if !c.addHTTP(kind, x, v) {
				badConcurrency++
			}
		}
	}
	if badConcurrency > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d HTTP %s no concurrency label that is a positive number; shown as concurrency 0.",
			badConcurrency, plural(badConcurrency, "sample has", "samples have")))
	}
	for _, k := range sortedKeys(badUnit) {
		r.Notes = append(r.Notes, fmt.Sprintf("%d %s left out: unknown unit (%s).",
			badUnit[k], plural(badUnit[k], "sample", "samples"), k))
	}
	for _, k := range sortedKeys(nonFinite) {
		r.Notes = append(r.Notes, fmt.Sprintf("%d %s left out: value is NaN or infinite (%s).",
			nonFinite[k], plural(nonFinite[k], "sample", "samples"), k))
	}
	return c
}

// reportKinds maps the vocabulary's metrics to the report metric they feed.
var reportKinds = map[metric.Def]string{
	metric.IperfThroughput: MetricThroughput,
	metric.PingRTT:         MetricPingRTT,
	metric.TCPRoundTr:      MetricTCPRTT,
	metric.TCPConnect:      MetricTCPConnect,
	metric.CPUUser:         MetricCPUUser,
	metric.CPUSystem:       MetricCPUSystem,
	metric.CPUSoftirq:      MetricSoftirq,
	metric.CPUDocker:       MetricDockerCPU,
	metric.DeployTime:      MetricDeployTime,
	metric.LoadCount:       kindLoad,
	metric.HTTPTotalTime:   MetricHTTPTotalTime,
	metric.HTTPRPS:         MetricHTTPRPS,
	metric.HTTPErrors:      MetricHTTPErrors,
	metric.HTTPNon2xx:      MetricHTTPNon2xx,
	metric.HTTPBytes:       MetricHTTPBytes,
	metric.HTTPRequests:    MetricHTTPRequests,
	metric.HTTPRequestTime: MetricHTTPRequestTime,
	metric.ABTotalTime:     MetricABTotalTime,
	metric.ABRPS:           MetricABRPS,
}

// sampleKind returns the report metric a sample feeds, or "" if none.
func sampleKind(x results.Sample) string {
	d, ok := metric.Lookup(x.Probe, x.Metric)
	if !ok {
		return ""
	}
	if d == metric.HTTPPhaseMedian {
		if slices.Contains(HTTPPhases, x.Labels["phase"]) {
			return MetricHTTPPhase
		}
		return ""
	}
	if d.Probe == metric.HTTPAB { // runs before probe ab had its name
		d, _ = metric.Lookup(metric.AB, d.Metric)
	}
	return reportKinds[d]
}

// unitFactor returns the factor converting a value in unit to the report's
// unit for metric kind (Gbit/s, ms or cores).
func unitFactor(kind, unit string) (float64, bool) {
	switch kind {
	case MetricThroughput:
		switch unit {
		case "bit/s":
			return 1e-9, true
		case "kbit/s":
			return 1e-6, true
		case "Mbit/s":
			return 1e-3, true
		case "Gbit/s":
			return 1, true
		}
	case MetricPingRTT, MetricTCPRTT, MetricTCPConnect:
		switch unit {
		case "ms":
			return 1, true
		case "us", "µs":
			return 1e-3, true
		case "s":
			return 1e3, true
		}
	case MetricCPUUser, MetricCPUSystem, MetricCPUTotal, MetricSoftirq:
		switch unit {
		case "cores":
			return 1, true
		case "%":
			return 0.01, true
		}
	case MetricDockerCPU:
		switch unit {
		case "%":
			return 1, true
		case "cores":
			return 100, true
		}
	case MetricHTTPTotalTime, MetricABTotalTime, MetricDeployTime:
		// Total times are kept in s, deploy times in ms.
		f := 1.0
		if kind == MetricDeployTime {
			f = 1e3
		}
		switch unit {
		case "s":
			return f, true
		case "ms":
			return f * 1e-3, true
		}
	case MetricHTTPRequestTime, MetricHTTPPhase:
		switch unit {
		case "ms":
			return 1, true
		case "us", "µs":
			return 1e-3, true
		case "s":
			return 1e3, true
		}
	case MetricHTTPRPS, MetricABRPS:
		switch unit {
		case "requests/s", "req/s", "1/s", "/s":
			return 1, true
		}
	case MetricHTTPErrors, MetricHTTPNon2xx, MetricHTTPBytes, MetricHTTPRequests, kindLoad:
		switch unit {
		case "count", "":
			return 1, true
		}
	}
	return 0, false
}

// canonicalUnit returns the report's unit for metric kind.
func canonicalUnit(kind string) string {
	switch kind {
	case MetricThroughput:
		return "Gbit/s"
	case MetricPingRTT, MetricTCPRTT, MetricTCPConnect:
		return "ms"
	case MetricDockerCPU:
		return "%"
	}
	return "cores"
}

func toCanonical(kind, unit string, v float64) (float64, bool) {
	f, ok := unitFactor(kind, unit)
	return v * f, ok
}
