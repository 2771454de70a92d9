package iperf3

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/results/metric"
)

// Error is the error iperf3 reported in its -J output ("error": "...").
type Error struct {
	// Msg is iperf3's own text, e.g. "unable to connect to server: Connection refused".
	Msg string
}

// Error returns "iperf3: " and iperf3's text.
func (e *Error) Error() string { return "iperf3: " + e.Msg }

// Result is what one iperf3 client run reported in its end summary.
type Result struct {
	// Protocol is "tcp" or "udp".
	Protocol string
	// Streams is the number of parallel streams; Reverse is true when the server sent (-R).
	Streams int
	Reverse bool
	// SentBPS and ReceivedBPS are the bit rates the sender and the receiver saw.
	SentBPS, ReceivedBPS float64
	// SentBytes and ReceivedBytes are the bytes the sender sent and the receiver received
	// (the same summaries' "bytes").
	SentBytes, ReceivedBytes int64
	// Retransmits is the sender's TCP retransmission count (0 for UDP).
	Retransmits int64
	// HostCPU and RemoteCPU are iperf3's own CPU use in percent of one core: the client's
	// (host_total) and the server's (remote_total).
	HostCPU, RemoteCPU float64
	// SenderCC and ReceiverCC are the TCP congestion control algorithms actually used
	// ("" for UDP).
	SenderCC, ReceiverCC string
	// JitterMS, LostPercent, LostPackets and Packets are the receiver's UDP figures.
	JitterMS    float64
	LostPercent float64
	LostPackets int64
	Packets     int64
	// Timesecs is start.timestamp.timesecs: the wall-clock second (Unix time, truncated)
	// at which the client's control connection was up, before the parameter exchange and
	// the data connections; 0 when absent.
	Timesecs int64
	// Measured and Omitted are the seconds of the transfer the report covers and of the
	// omitted warm-up before it (-O): the sums of the durations (end - start) of the
	// intervals whose "omitted" is false and true.
	Measured, Omitted float64
}

type sum struct {
	Bytes         int64    `json:"bytes"`
	BitsPerSecond float64  `json:"bits_per_second"`
	Retransmits   *int64   `json:"retransmits"`
	JitterMS      *float64 `json:"jitter_ms"`
	LostPercent   *float64 `json:"lost_percent"`
	LostPackets   int64    `json:"lost_packets"`
	Packets       int64    `json:"packets"`
}

type interval struct {
	Sum struct {
		Start   float64 `json:"start"`
		End     float64 `json:"end"`
		Omitted bool    `json:"omitted"`
	} `json:"sum"`
}

type report struct {
	Start struct {
		Timestamp struct {
			Timesecs int64 `json:"timesecs"`
		} `json:"timestamp"`
		TestStart struct {
			Protocol   string `json:"protocol"`
			NumStreams int    `json:"num_streams"`
			Reverse    int    `json:"reverse"`
		} `json:"test_start"`
	} `json:"start"`
	Intervals []interval `json:"intervals"`
	End       struct {
		Sum         *sum `json:"sum"`
		SumSent     *sum `json:"sum_sent"`
		SumReceived *sum `json:"sum_received"`
		CPU         *struct {
			HostTotal   float64 `json:"host_total"`
			RemoteTotal float64 `json:"remote_total"`
		} `json:"cpu_utilization_percent"`
		SenderCC   string `json:"sender_tcp_congestion"`
		ReceiverCC string `json:"receiver_tcp_congestion"`
	} `json:"end"`
	Error string `json:"error"`
}

// Parse decodes the output of `iperf3 -c ... -J` (iperf3 3.x). TCP rates come from
// end.sum_sent and end.sum_received; UDP rates from the same when present, else end.sum, and
// UDP jitter and loss from the receiver's summary. When iperf3 reported an error the result is
// an *Error carrying its text.
func Parse(out []byte) (Result, error) {
	var rep report
	if err := json.Unmarshal(out, &rep); err != nil {
		return Result{}, fmt.Errorf("decode iperf3 -J output: %w (output: %q)", err, head(out, 200))
	}
	if rep.Error != "" {
		return Result{}, &Error{Msg: rep.Error}
	}
	ts := rep.Start.TestStart
	r := Result{
		Protocol:   strings.ToLower(ts.Protocol),
		Streams:    ts.NumStreams,
		Reverse:    ts.Reverse != 0,
		SenderCC:   rep.End.SenderCC,
		ReceiverCC: rep.End.ReceiverCC,
		Timesecs:   max(rep.Start.Timestamp.Timesecs, 0),
	}
	for _, iv := range rep.Intervals {
		d := iv.Sum.End - iv.Sum.Start
		if !(d > 0 && d < maxInterval) { // also false for NaN
			continue
		}
		if iv.Sum.Omitted {
			r.Omitted += d
		} else {
			r.Measured += d
		}
	}
	if c := rep.End.CPU; c != nil {
		r.HostCPU, r.RemoteCPU = c.HostTotal, c.RemoteTotal
	}
	sent, recv := rep.End.SumSent, rep.End.SumReceived
	if sent == nil {
		sent = rep.End.Sum
	}
	if recv == nil {
		recv = rep.End.Sum
	}
	if sent == nil || recv == nil {
		return Result{}, fmt.Errorf("decode iperf3 -J output: no end summary (end.sum_sent/sum_received/sum)")
	}
	r.SentBPS, r.ReceivedBPS = sent.BitsPerSecond, recv.BitsPerSecond
	r.SentBytes, r.ReceivedBytes = sent.Bytes, recv.Bytes
	if sent.Retransmits != nil {
		r.Retransmits = *sent.Retransmits
	}
	if r.Protocol == "udp" {
		// The receiver's view holds the loss and jitter; iperf3 3.12 also copies them into sum.
		u := recv
		if u.JitterMS == nil && rep.End.Sum != nil {
			u = rep.End.Sum
		}
		if u.JitterMS != nil {
			r.JitterMS = *u.JitterMS
		}
		if u.LostPercent != nil {
			r.LostPercent = *u.LostPercent
		}
		r.LostPackets, r.Packets = u.LostPackets, u.Packets
	}
	return r, nil
}

// maxInterval bounds one interval's duration (seconds): longer ones are not iperf3's and
// are ignored rather than allowed to date a window years wide.
const maxInterval = 86400

// Transfer returns the wall-clock window of the measured transfer (the intervals not omitted)
// of a client run that started at started and exited at exited, as this process saw them.
//
// iperf3 -J does not date its intervals precisely: start.timestamp.timesecs is a whole
// second, taken when the control connection is up, before the parameter exchange and the
// data connections; the intervals' start and end are seconds from the data streams' start.
// So the window is anchored at the end: the transfer ends right before the client exits
// (what follows it is the results exchange over the control connection, a few round trips,
// milliseconds in a lab: checked with strace on 2 s tests in a lab, the window so computed
// starts 5 ms after the data connection was up), and lasts Measured seconds, the omitted ones
// coming before it (iperf3 3.12 restarts the interval offsets after them). Its
// start is then clamped to no earlier than the client's start and than timesecs, both known
// to come before the transfer. ok is false when the report has no interval data.
func (r Result) Transfer(started, exited time.Time) (w probe.Window, ok bool) {
	if r.Measured <= 0 || !exited.After(started) {
		return probe.Window{}, false
	}
	to, from := exited, started
	if run := exited.Sub(started); r.Measured < run.Seconds() {
		from = to.Add(-time.Duration(r.Measured * float64(time.Second)))
	}
	if r.Timesecs > 0 {
		if ts := time.Unix(r.Timesecs, 0); from.Before(ts) && ts.Before(to) {
			from = ts
		}
	}
	return probe.Window{From: from, To: to}, true
}

func head(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// Samples turns a result into the probe's samples, all taken at t: "throughput" (bit/s) for
// side=sender and side=receiver, "retransmits" (count, TCP), "jitter" (ms) and "loss" (%)
// (UDP), and iperf3's own CPU use "process_cpu" (% of one core) for end=client and
// end=server. Every sample is labelled protocol, streams, and cc (the sender's congestion
// control, TCP only); reversed tests (-R) carry direction=reverse.
func Samples(r Result, t time.Time) []results.Sample {
	base := map[string]string{"protocol": r.Protocol, "streams": strconv.Itoa(r.Streams)}
	if r.Protocol == "tcp" && r.SenderCC != "" {
		base["cc"] = r.SenderCC
	}
	if r.Reverse {
		base["direction"] = "reverse"
	}
	var out []results.Sample
	add := func(d metric.Def, v float64, kv ...string) {
		l := make(map[string]string, len(base)+len(kv)/2)
		for k, v := range base {
			l[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		s := d.Sample(v, l)
		s.Time = t
		out = append(out, s)
	}
	add(metric.IperfThroughput, r.SentBPS, "side", "sender")
	add(metric.IperfThroughput, r.ReceivedBPS, "side", "receiver")
	if r.Protocol == "tcp" {
		add(metric.IperfRetransmits, float64(r.Retransmits), "side", "sender")
	}
	if r.Protocol == "udp" {
		add(metric.IperfJitter, r.JitterMS, "side", "receiver")
		add(metric.IperfLoss, r.LostPercent, "side", "receiver")
	}
	add(metric.IperfProcessCPU, r.HostCPU, "end", "client")
	add(metric.IperfProcessCPU, r.RemoteCPU, "end", "server")
	return out
}
