package rtt

import (
	"strconv"
	"time"

	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/rtt/echo"
	"github.com/sfclab/sfclab/results"
)

// Samples turns a result into samples. Per echo that came back (label seq): "rtt" (ms,
// application view), and when both kernel timestamps are known "path" (ms, TX to RX
// timestamp), "stack_tx" and "stack_rx" (ms, the sender's stack either way). Per run:
// "sent", "received", "duplicates", "reordered", "errors" (count), "loss" (%),
// "rate_requested" and "rate_achieved" (pps; label rate_reached true/false), "timestamped"
// (count of echoes with both kernel timestamps) and "cpu_self" (cores the sfclab process used
// over the run). Every sample carries labels protocol, size and rate.
func Samples(r *Result) []results.Sample {
	base := map[string]string{"protocol": r.Protocol, "size": strconv.Itoa(r.Size), "rate": echo.RateLabel(r.Requested)}
	with := func(kv ...string) map[string]string {
		l := make(map[string]string, len(base)+len(kv)/2)
		for k, v := range base {
			l[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
	var out []results.Sample
	stamped := 0
	for _, p := range r.Packets {
		if p.Lost() {
			continue
		}
		seq := strconv.FormatUint(p.Seq, 10)
		out = append(out, probe.NewSample(Name, "rtt", "ms", ms(p.RTT()), with("seq", seq)))
		if p.Stamped() {
			stamped++
			tx := "driver"
			if p.Wire {
				tx = "tc"
			} else if p.TXSched {
				tx = "device"
			}
			out = append(out,
				probe.NewSample(Name, "path", "ms", ms(p.Path()), with("seq", seq, "tx_stamp", tx)),
				probe.NewSample(Name, "stack_tx", "ms", ms(p.StackTX()), with("seq", seq, "tx_stamp", tx)),
				probe.NewSample(Name, "stack_rx", "ms", ms(p.StackRX()), with("seq", seq)))
		}
	}
	count := func(metric string, v int) {
		out = append(out, probe.NewSample(Name, metric, "count", float64(v), with()))
	}
	count("sent", r.Sent)
	count("received", r.Received)
	count("duplicates", r.Duplicates)
	count("reordered", r.Reordered)
	count("errors", r.Errors)
	count("timestamped", stamped)
	out = append(out, pathEndSamples(r, with)...)
	out = append(out, probe.NewSample(Name, "loss", "%", r.Loss(), with()))
	reached := strconv.FormatBool(r.RateReached())
	if r.Requested != echo.Max {
		out = append(out, probe.NewSample(Name, "rate_requested", "pps", r.Requested, with("rate_reached", reached)))
	}
	out = append(out, probe.NewSample(Name, "rate_achieved", "pps", r.Achieved, with("rate_reached", reached)))
	if r.Wall > 0 {
		out = append(out, probe.NewSample(Name, "cpu_self", "cores", r.CPU.Seconds()/r.Wall.Seconds(), with()))
	}
	return out
}
