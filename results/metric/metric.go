// Package metric is the vocabulary of sfclab's measurements: every probe and metric a
// sample may carry, with the unit the probe emits it in. Probes build their samples from it
// (Def.Sample), and the report reads only samples whose probe and metric it knows here, so a
// metric renamed on one side and not the other is an error, not a silently empty table.
//
// A built-in probe's metrics are defined here; a probe in its own package may declare its
// own with Define. The probe then emits through the Def (Def.Sample), and the report says
// where it shows it.
package metric

import (
	"fmt"
	"slices"
	"time"

	"github.com/sfclab/sfclab/results"
)

// Def is one metric of one probe.
type Def struct {
	// Probe and Metric are the names in results.Sample.
	Probe, Metric string
	// Unit is the unit the probe emits the value in.
	Unit string
	// Doc says what the value is.
	Doc string
}

// ID is "probe/metric".
func (d Def) ID() string { return d.Probe + "/" + d.Metric }

// Sample returns a sample of d with value v, taken now.
func (d Def) Sample(v float64, labels map[string]string) results.Sample {
	return results.Sample{Probe: d.Probe, Metric: d.Metric, Unit: d.Unit, Value: v, Time: time.Now(), Labels: labels}
}

// Probe names.
const (
	Iperf3 = "iperf3"
	Ping   = "ping"
	TCPRTT = "tcprtt"
	HTTP   = "http"
	AB     = "ab"
	HTTPAB = "http-ab" // Apache Bench's figures as runs before probe ab recorded them
	CPU    = "cpu"
	Deploy = "deploy"
	Load   = "load"
	RTT    = "rtt"
	NDR    = "ndr"
	Flows  = "flows"
	Memory = "memory"
)

// Units used more than once.
const (
	unitMS   = "ms"
	unitPct  = "%"
	unitCnt  = "count"
	unitCore = "cores"
	unitPPS  = "pps"
	unitBPS  = "bit/s"
)

// The vocabulary, probe by probe.
var (
	IperfThroughput  = def(Iperf3, "throughput", unitBPS, "TCP or UDP throughput at one end (label side)")
	IperfRetransmits = def(Iperf3, "retransmits", unitCnt, "TCP retransmissions of the sender")
	IperfJitter      = def(Iperf3, "jitter", unitMS, "UDP jitter at the receiver")
	IperfLoss        = def(Iperf3, "loss", unitPct, "UDP datagrams lost")
	IperfProcessCPU  = def(Iperf3, "process_cpu", unitPct, "iperf3's own CPU (label end)")

	PingRTT  = def(Ping, "rtt", unitMS, "ICMP echo round trip, one per reply")
	PingLoss = def(Ping, "loss", unitPct, "echoes without a reply (label icmp_path=none: the chain has no ICMP path)")

	TCPConnect = def(TCPRTT, "connect", unitMS, "TCP connect time, one per connection")
	TCPRoundTr = def(TCPRTT, "rtt", unitMS, "request/response round trip over one connection, one per request")

	HTTPRequestTime = def(HTTP, "request_time", unitMS, "one answered request, connect to last body byte")
	HTTPTotalTime   = def(HTTP, "total_time", "s", "wall time of one load run")
	HTTPRPS         = def(HTTP, "rps", "requests/s", "finished requests per second of one run")
	HTTPErrors      = def(HTTP, "errors", unitCnt, "requests without a complete answer")
	HTTPNon2xx      = def(HTTP, "non2xx", unitCnt, "answers with a status outside 200-299")
	HTTPBytes       = def(HTTP, "bytes", unitCnt, "body bytes received")
	HTTPRequests    = def(HTTP, "requests", unitCnt, "finished requests")
	HTTPPhaseMedian = def(HTTP, "phase_median", unitMS, "median of one phase of the requests (label phase)")
	HTTPPhaseMean   = def(HTTP, "phase_mean", unitMS, "mean of one phase of the requests (label phase)")

	ABTotalTime  = def(AB, "total_time", "s", "Apache Bench's time taken for tests")
	ABRPS        = def(AB, "rps", "requests/s", "Apache Bench's requests per second")
	ABErrors     = def(AB, "errors", unitCnt, "Apache Bench's failed requests")
	ABNon2xx     = def(AB, "non2xx", unitCnt, "Apache Bench's non-2xx responses")
	ABBytes      = def(AB, "bytes", unitCnt, "Apache Bench's HTML bytes transferred")
	ABRequests   = def(AB, "requests", unitCnt, "Apache Bench's complete requests")
	ABTimePerReq = def(AB, "request_time_mean", unitMS, "Apache Bench's mean time per request")

	CPUUser         = def(CPU, "cpu_user", unitCore, "a node's user CPU time per second (label node)")
	CPUSystem       = def(CPU, "cpu_system", unitCore, "a node's system CPU time per second (label node)")
	CPUSoftirq      = def(CPU, "softirq", unitCore, "the host's softirq time over all cores (node=host)")
	CPUWindow       = def(CPU, "window", "s", "the span the CPU figures cover (label bound)")
	CPUDocker       = def(CPU, "docker_cpu_percent", unitPct, "a container's CPU as docker stats computes it (100 % = one core)")
	CPUHostNodesUsr = def(CPU, "host_nodes_user", unitCore, "user CPU of an emulated host's nodes summed (label host)")
	CPUHostNodesSys = def(CPU, "host_nodes_system", unitCore, "system CPU of an emulated host's nodes summed (label host)")
	CPUHostUsr      = def(CPU, "host_usr", unitPct, "an emulated host's cores busy in user mode, as mpstat")
	CPUHostSys      = def(CPU, "host_sys", unitPct, "an emulated host's cores busy in system mode, as mpstat")
	CPUHostSoft     = def(CPU, "host_soft", unitPct, "an emulated host's cores busy in softirq, as mpstat")

	CPUMemory     = def(CPU, "memory", "bytes", "a node's cgroup memory at the window's end (label node)")
	CPUMemoryPeak = def(CPU, "memory_peak", "bytes", "the highest of a node's cgroup memory readings in the window (label node)")

	DeployTime = def(Deploy, "deploy_time", "s", "time to deploy a scenario's lab")

	LoadCount      = def(Load, "count", unitCnt, "background load processes of a trial (labels kind, node)")
	LoadBackground = def(Load, "background_nodes", unitCnt, "background nodes of an rtt cell (labels kind, side)")

	RTTRoundTrip     = def(RTT, "rtt", unitMS, "an echo's round trip as the application saw it")
	RTTPath          = def(RTT, "path", unitMS, "an echo's round trip between the kernel's TX and RX stamps")
	RTTStackTX       = def(RTT, "stack_tx", unitMS, "an echo's time in the sender's stack on the way out")
	RTTStackRX       = def(RTT, "stack_rx", unitMS, "an echo's time in the sender's stack on the way back")
	RTTSent          = def(RTT, "sent", unitCnt, "echoes sent")
	RTTReceived      = def(RTT, "received", unitCnt, "echoes answered")
	RTTDuplicates    = def(RTT, "duplicates", unitCnt, "replies received more than once")
	RTTReordered     = def(RTT, "reordered", unitCnt, "replies received out of order")
	RTTErrors        = def(RTT, "errors", unitCnt, "send or receive errors")
	RTTTimestamped   = def(RTT, "timestamped", unitCnt, "echoes with both kernel timestamps")
	RTTLoss          = def(RTT, "loss", unitPct, "echoes without a reply")
	RTTRateRequested = def(RTT, "rate_requested", unitPPS, "the requested echo rate (-1: flood)")
	RTTRateAchieved  = def(RTT, "rate_achieved", unitPPS, "the echo rate reached")
	RTTCPUSelf       = def(RTT, "cpu_self", unitCore, "the probe's own CPU")
	RTTAttempts      = def(RTT, "attempts", unitCnt, "runs a trial needed until every echo came back (attempts option)")
	RTTAttemptCap    = def(RTT, "attempt_cap", unitCnt, "the most runs a trial was allowed (attempts option)")
	RTTPathEnd       = def(RTT, "path_end", unitCnt, "echoes whose path was timed at the interface (label end: tc, socket or xdp)")
	RTTSocketTXOff   = def(RTT, "socket_tx_offset", unitMS, "median of the socket's TX stamp minus the tc egress stamp")
	RTTSocketRXOff   = def(RTT, "socket_rx_offset", unitMS, "median of the socket's RX stamp minus the tc ingress stamp")
	RTTReflectorSeen = def(RTT, "reflector_seen", unitCnt, "high-rate echoes the reflector saw")
	RTTReflectorLost = def(RTT, "reflector_lost", unitCnt, "high-rate echoes the reflector saw but that never came back")
	RTTSampled       = def(RTT, "sampled", unitPct, "share of high-rate echoes that carry a timestamp")
	RTTGenCeiling    = def(RTT, "generator_ceiling", unitPPS, "the XDP generator's unpaced rate into the chain before a high-rate run (a request above it is clamped)")

	NDRRcvbufErrors  = def(NDR, "trial_rcvbuf_errors", "packets", "receiver socket drops of one search trial")
	NDROfferedPPS    = def(NDR, "trial_offered_pps", unitPPS, "rate offered in one search trial")
	NDRReceivedPPS   = def(NDR, "trial_received_pps", unitPPS, "rate received in one search trial")
	NDRTrialLoss     = def(NDR, "trial_loss", unitPct, "loss of one search trial")
	NDRCalibratedPPS = def(NDR, "generator_calibrated_pps", unitPPS, "the generator's calibrated rate")
	NDRGeneratorMax  = def(NDR, "generator_max_pps", unitPPS, "the generator's highest rate")
	NDRGeneratorCeil = def(NDR, "generator_ceiling_pps", unitPPS, "the generator's measured ceiling into the chain: frames that left its interface unpaced (a max rate above it is clamped)")
	NDRRatePPS       = def(NDR, "ndr_pps", unitPPS, "no-drop rate")
	NDRRateBPS       = def(NDR, "ndr_bps", unitBPS, "no-drop rate in bits")
	PDRRatePPS       = def(NDR, "pdr_pps", unitPPS, "partial-drop rate")
	PDRRateBPS       = def(NDR, "pdr_bps", unitBPS, "partial-drop rate in bits")
	NDRTrials        = def(NDR, "trials", unitCnt, "trials the search ran")

	FlowsEgressRate  = def(Flows, "egress_rate", unitBPS, "a function's egress rate per interval (labels node, t)")
	FlowsTapRate     = def(Flows, "tap_rate", unitBPS, "a tap's rate per interval")
	FlowsEgressBytes = def(Flows, "egress_bytes", "bytes", "a function's egress bytes over the run")
	FlowsTapBytes    = def(Flows, "tap_bytes", "bytes", "a tap's bytes over the run")
	FlowsThroughput  = def(Flows, "flow_throughput", unitBPS, "one flow's throughput (label side)")
	FlowsLoss        = def(Flows, "flow_loss", unitPct, "one flow's loss")
)

var (
	all  []Def
	byID = map[[2]string]int{}
)

// Define adds a metric to the vocabulary and returns it: a probe outside this package (a new
// probe's own package, or one registered only by a test) declares its metrics with it in a
// package-level var, so they are known before any sample is read. It panics when probe/metric
// is defined already, as two definitions of one name would make samples ambiguous.
func Define(probe, metric, unit, doc string) Def { return def(probe, metric, unit, doc) }

func def(probe, metric, unit, doc string) Def {
	d := Def{Probe: probe, Metric: metric, Unit: unit, Doc: doc}
	if _, ok := Lookup(probe, metric); ok {
		panic("metric: " + d.ID() + " defined twice")
	}
	byID[[2]string{probe, metric}] = len(all)
	all = append(all, d)
	return d
}

func init() {
	// Runs recorded before probe ab had its name carry Apache Bench's figures as http-ab.
	for _, d := range []Def{ABTotalTime, ABRPS, ABErrors, ABNon2xx, ABBytes, ABRequests} {
		def(HTTPAB, d.Metric, d.Unit, d.Doc)
	}
}

// Lookup returns the definition of probe/metric.
func Lookup(probe, metric string) (Def, bool) {
	i, ok := byID[[2]string{probe, metric}]
	if !ok {
		return Def{}, false
	}
	return all[i], true
}

// All returns every definition, in the order above.
func All() []Def { return slices.Clone(all) }

// UnknownError says a sample names a probe/metric the vocabulary lacks.
type UnknownError struct {
	Probe, Metric string
	// Count is the number of such samples.
	Count int
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("%d %s of unknown metric %s/%s (not in package results/metric: renamed, or a probe added without its vocabulary)",
		e.Count, plural(e.Count, "sample", "samples"), e.Probe, e.Metric)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Check returns an *UnknownError for the first probe/metric of samples the vocabulary lacks
// (in order of first appearance), with the number of its samples; nil when it knows all.
func Check(samples []results.Sample) error {
	var first *UnknownError
	for _, x := range samples {
		if _, ok := Lookup(x.Probe, x.Metric); ok {
			continue
		}
		if first == nil {
			first = &UnknownError{Probe: x.Probe, Metric: x.Metric}
		}
		if x.Probe == first.Probe && x.Metric == first.Metric {
			first.Count++
		}
	}
	if first == nil {
		return nil
	}
	return first
}
