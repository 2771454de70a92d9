package pktgen

import (
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkEchoes1Mpps asks for 1 Mpps of 64-byte frames for 1 s over a direct veth pair, a
// timestamp in every 1024th, reflected by sfc_reflect at the far end: the achieved rate of
// echoes (target >= 0.95 Mpps), the RTT of the timestamped ones, reordering, and the CPU time
// of this process per Mpps sent (the reflector's softirq time is charged to whichever task
// runs and is not in it).
func BenchmarkEchoes1Mpps(b *testing.B) {
	const every = 1024
	p, g, f := setup(b, []int{64}, every, Reflect)
	if err := g.StartEchoes(); err != nil {
		b.Fatal(err)
	}
	var rate, echoRate, cpuPerMpps float64
	var rtts []time.Duration
	var reordered, lostAtReflector uint64
	for i := 0; i < b.N; i++ {
		trial := uint32(2000 + i)
		var ru0, ru1 unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_SELF, &ru0)
		sent, took := send(b, p, g, trial, 1e6, time.Second)
		_ = unix.Getrusage(unix.RUSAGE_SELF, &ru1)
		time.Sleep(50 * time.Millisecond)
		back, _ := g.Echoes(trial)
		seen, _ := f.Counts(trial)
		es, err := g.TakeEchoes(time.Second)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range es {
			rtts = append(rtts, e.RTT)
		}
		cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
		rate += float64(sent) / took.Seconds()
		echoRate += float64(back.Packets) / took.Seconds()
		cpuPerMpps += cpu.Seconds() / took.Seconds() / (float64(sent) / took.Seconds() / 1e6)
		reordered += back.Reordered
		lostAtReflector += seen.Packets - min(seen.Packets, back.Packets)
	}
	n := float64(b.N)
	slices.Sort(rtts)
	q := func(f float64) float64 {
		if len(rtts) == 0 {
			return 0
		}
		return float64(rtts[int(f*float64(len(rtts)-1))].Microseconds())
	}
	b.ReportMetric(rate/n/1e6, "sent-Mpps")
	b.ReportMetric(echoRate/n/1e6, "echo-Mpps")
	b.ReportMetric(q(0.5), "rtt-p50-us")
	b.ReportMetric(q(0.99), "rtt-p99-us")
	b.ReportMetric(float64(len(rtts))/n, "rtts/trial")
	b.ReportMetric(float64(reordered)/n, "reordered/trial")
	b.ReportMetric(float64(lostAtReflector)/n, "lost-after-reflector/trial")
	b.ReportMetric(cpuPerMpps/n, "cpu-s/s-per-Mpps")
}
