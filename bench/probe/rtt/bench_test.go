package rtt

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/bench/probe"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/journal"
)

// vethLab is two endpoints on a direct veth pair (no bridge): the RTT floor.
const vethLab = `
name: t-rtt-veth
endpoints:
  client: {kind: client}
  server: {kind: server}
chains:
  - {name: direct, from: client, to: server}
`

// benchLab deploys a lab for a benchmark (destroyed at its end) and returns the client node,
// the destination address and the client's namespace.
func benchLab(b *testing.B, yaml string) (Doer, netip.Addr, string) {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("SKIPPED LOUDLY: this benchmark deploys a real lab and needs root")
	}
	p := labtest.Plan(b, yaml)
	d := &deploy.Deployer{Journal: journal.Journal{Root: b.TempDir()}}
	if _, err := d.Deploy(context.Background(), p, "bench"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = d.Destroy(context.Background(), p.Lab) })
	labtest.Exclusive(b)
	n, err := d.Node(p, "client")
	if err != nil {
		b.Fatal(err)
	}
	dst := probe.DestinationAddr(p, p.Chains[0])
	if err := Warm(context.Background(), n, netip.AddrPortFrom(dst, 0), Config{}); err != nil {
		b.Fatal(err)
	}
	return n, dst, p.Node("client").Netns
}

// inNode runs argv in a namespace and returns its output and the CPU time it used.
func inNode(b *testing.B, netns string, argv ...string) ([]byte, time.Duration) {
	b.Helper()
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru0)
	out, err := exec.Command("ip", append([]string{"netns", "exec", netns}, argv...)...).Output()
	if err != nil {
		b.Fatalf("%v: %v", argv, err)
	}
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru1)
	return out, time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
}

// BenchmarkCPU1Kpps: the CPU of the sfclab process while the probe sends 1000 echoes at
// 1 Kpps per iteration, beside iputils ping's (-i 0.001) on the same lab, interleaved. Both
// include the kernel's work forwarding the echo through the veth/bridge path, which runs in the
// sender's send call. Reports probe-cores (user+system), probe-user-cores, ping-cores.
func BenchmarkCPU1Kpps(b *testing.B) {
	n, dst, netns := benchLab(b, pairLab)
	var probeCPU, probeUser, pingCPU, probeWall, pingWall time.Duration
	for b.Loop() {
		r, err := Measure(context.Background(), n, netip.AddrPortFrom(dst, 0), Config{Count: 1000, Rate: 1000})
		if err != nil {
			b.Fatal(err)
		}
		probeCPU += r.CPU
		probeUser += r.CPUUser
		probeWall += r.Wall
		t0 := time.Now()
		_, c := inNode(b, netns, "ping", "-q", "-n", "-i", "0.001", "-c", "1000", dst.String())
		pingCPU += c
		pingWall += time.Since(t0)
	}
	b.ReportMetric(probeCPU.Seconds()/probeWall.Seconds(), "probe-cores")
	b.ReportMetric(probeUser.Seconds()/probeWall.Seconds(), "probe-user-cores")
	b.ReportMetric(pingCPU.Seconds()/pingWall.Seconds(), "ping-cores")
}

// BenchmarkRate: the achieved rate as a share of the requested one, 10,000 echoes (at least
// 0.5 s) per rate. Reports achieved/requested per rate.
func BenchmarkRate(b *testing.B) {
	n, dst, _ := benchLab(b, pairLab)
	rates := []float64{1000, 10_000, 50_000, 100_000}
	got := make([]float64, len(rates))
	for b.Loop() {
		for i, rate := range rates {
			count := max(10_000, int(rate/2))
			r, err := Measure(context.Background(), n, netip.AddrPortFrom(dst, 0), Config{Count: count, Rate: rate})
			if err != nil {
				b.Fatal(err)
			}
			got[i] += r.Achieved / rate
		}
	}
	for i, rate := range rates {
		b.ReportMetric(got[i]/float64(b.N), "achieved/requested@"+strconv.Itoa(int(rate)))
	}
}

var pingSummary = regexp.MustCompile(`= ([0-9.]+)/([0-9.]+)/([0-9.]+)/`)

// BenchmarkFloor: the RTT floor on a direct veth pair: the probe's flood (rate max, one echo
// outstanding, as ping -f) beside ping -f, 10,000 echoes each, interleaved. ping -f reports
// user send to kernel RX timestamp, so the probe's stack_tx+path is compared. Reports the
// minimum and mean of both and probe/ping ratios.
func BenchmarkFloor(b *testing.B) {
	n, dst, netns := benchLab(b, vethLab)
	var pMin, pMean, oMin, oMean float64
	for b.Loop() {
		out, _ := inNode(b, netns, "ping", "-q", "-n", "-f", "-c", "10000", dst.String())
		m := pingSummary.FindSubmatch(out)
		if m == nil {
			b.Fatalf("ping -f: %s", out)
		}
		mn, _ := strconv.ParseFloat(string(m[1]), 64)
		avg, _ := strconv.ParseFloat(string(m[2]), 64)
		pMin += mn * 1000
		pMean += avg * 1000
		r, err := Measure(context.Background(), n, netip.AddrPortFrom(dst, 0), Config{Count: 10_000, Rate: Max})
		if err != nil {
			b.Fatal(err)
		}
		ds := r.Durations(Packet.PingRTT, true)
		lo, sum := ds[0], time.Duration(0)
		for _, d := range ds {
			lo = min(lo, d)
			sum += d
		}
		oMin += float64(lo.Nanoseconds()) / 1000
		oMean += float64(sum.Nanoseconds()) / 1000 / float64(len(ds))
	}
	nn := float64(b.N)
	b.ReportMetric(pMin/nn, "ping-f-min-us")
	b.ReportMetric(pMean/nn, "ping-f-mean-us")
	b.ReportMetric(oMin/nn, "probe-min-us")
	b.ReportMetric(oMean/nn, "probe-mean-us")
	b.ReportMetric(oMin/pMin, "probe/ping-min")
	b.ReportMetric(oMean/pMean, "probe/ping-mean")
}
