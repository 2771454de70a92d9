package rtt

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	goruntime "runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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

// BenchmarkRateThreads: the achieved rate as a share of the requested one with one sending
// thread and with two, alternated on one lab, 0.5 s per rate and run (at least 10,000
// echoes), at 100, 150 and 200 Kpps: what the second thread adds where one falls short.
// Reports achieved/requested per thread count and rate.
func BenchmarkRateThreads(b *testing.B) {
	n, dst, _ := benchLab(b, pairLab)
	rates := []float64{100_000, 150_000, 200_000}
	threads := []int{1, 2}
	got := make([][]float64, len(threads))
	for i := range got {
		got[i] = make([]float64, len(rates))
	}
	defer func() { forceLanes = 0 }()
	for b.Loop() {
		for j, rate := range rates {
			for i, th := range threads {
				forceLanes = th
				r, err := Measure(context.Background(), n, netip.AddrPortFrom(dst, 0), Config{Count: max(10_000, int(rate/2)), Rate: rate})
				if err != nil {
					b.Fatal(err)
				}
				if r.Threads != th {
					b.Fatalf("%d threads sent, want %d", r.Threads, th)
				}
				got[i][j] += r.Achieved / rate
			}
		}
	}
	for i, th := range threads {
		for j, rate := range rates {
			b.ReportMetric(got[i][j]/float64(b.N), fmt.Sprintf("achieved/requested@%d-threads%d", int(rate), th))
		}
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

var pingGap = regexp.MustCompile(`ipg/ewma ([0-9.]+)/`)

// BenchmarkEchoCost: what one echo costs this machine's kernel on the lab of BenchmarkCPU1Kpps
// (two endpoints on a bridge), the floor under the probe's CPU and rate. On one locked thread,
// in a tight loop of 10,000 echoes each, measured with the thread's own rusage: "bare-us" is
// sendto + recvmsg of the reply with no timestamps (a veth path runs the whole round trip
// inside the sendto), "stamped-send-us" the CPU of the sendto alone with timestamps (a
// sending thread cannot go faster than one echo per that), "stamped-us" adds the probe's SO_TIMESTAMPING and the read of its TX
// timestamp; "wake-us" is one ppoll timer wake-up at 1 kHz with nothing sent (1,000 of
// them). Beside them the probe's flood ("probe-flood-us", whole process CPU per echo) and
// ping -f's CPU per echo and inter-packet gap ("ping-f-us", "ping-f-ipg-us"). At 1 Kpps a
// sleeping prober cannot use less than (stamped + wake) x 1,000 per second, and one thread
// cannot send faster than 1/stamped.
func BenchmarkEchoCost(b *testing.B) {
	n, dst, netns := benchLab(b, pairLab)
	var bare, stamped, sendOnly, wake, flood, pingCPU, pingIPG float64
	const echoes = 10_000
	for b.Loop() {
		for _, ts := range []bool{false, true} {
			var per, send time.Duration
			err := n.Do(func() error {
				var err error
				per, send, err = loopCost(dst, ts, echoes)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			if ts {
				stamped += float64(per.Nanoseconds()) / 1000
				sendOnly += float64(send.Nanoseconds()) / 1000
			} else {
				bare += float64(per.Nanoseconds()) / 1000
			}
		}
		wake += float64(wakeCost(1000).Nanoseconds()) / 1000
		r, err := Measure(context.Background(), n, netip.AddrPortFrom(dst, 0), Config{Count: echoes, Rate: Max})
		if err != nil {
			b.Fatal(err)
		}
		flood += float64(r.CPU.Nanoseconds()) / 1000 / float64(r.Sent)
		out, c := inNode(b, netns, "ping", "-q", "-n", "-f", "-c", strconv.Itoa(echoes), dst.String())
		pingCPU += float64(c.Nanoseconds()) / 1000 / echoes
		if m := pingGap.FindSubmatch(out); m != nil {
			ipg, _ := strconv.ParseFloat(string(m[1]), 64)
			pingIPG += ipg * 1000
		}
	}
	nn := float64(b.N)
	b.ReportMetric(bare/nn, "bare-us")
	b.ReportMetric(stamped/nn, "stamped-us")
	b.ReportMetric(sendOnly/nn, "stamped-send-us")
	b.ReportMetric(wake/nn, "wake-us")
	b.ReportMetric(flood/nn, "probe-flood-us")
	b.ReportMetric(pingCPU/nn, "ping-f-us")
	b.ReportMetric(pingIPG/nn, "ping-f-ipg-us")
}

// loopCost sends count ICMP echoes to dst one after another from a locked thread (created in
// the calling thread's namespace), each followed by the read of its reply (and, with
// stamps, of its TX timestamps), and returns the thread's CPU per echo and the mean CPU of
// the sendto call alone (the thread's CPU clock read around it, so it includes about one
// clock read), which bounds what one sending thread can reach.
func loopCost(dst netip.Addr, stamps bool, count int) (time.Duration, time.Duration, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
	if err != nil {
		return 0, 0, err
	}
	defer unix.Close(fd)
	if stamps {
		// The probe's flags once the driver's TX stamp came (veth stamps; see readTX).
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPING, tsFlags&^unix.SOF_TIMESTAMPING_TX_SCHED); err != nil {
			return 0, 0, err
		}
	}
	var per, inSend time.Duration
	done := make(chan error, 1)
	go func() {
		goruntime.LockOSThread() // not unlocked: the thread ends with the goroutine
		sa := &unix.SockaddrInet4{Addr: dst.As4()}
		msg := message(ProtoICMP, 64)
		buf, oob := make([]byte, 256), make([]byte, 512)
		var r0, r1 unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &r0)
		got := 0
		for seq := range count {
			encode(msg, ProtoICMP, 1, uint64(seq))
			var c0, c1 unix.Timespec
			_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &c0)
			if err := unix.Sendto(fd, msg, 0, sa); err != nil {
				done <- err
				return
			}
			_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &c1)
			inSend += time.Duration(c1.Nano() - c0.Nano())
			for try := 0; try < 1000; try++ { // the reply is there at once on a veth path
				if _, _, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_DONTWAIT); err == nil {
					got++
					break
				}
			}
			for stamps {
				if _, _, _, _, err := unix.Recvmsg(fd, buf[:1], oob, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT); err != nil {
					break
				}
			}
		}
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &r1)
		per = time.Duration((r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano()) / int64(count))
		inSend /= time.Duration(count)
		if got < count*9/10 {
			done <- fmt.Errorf("%d replies of %d", got, count)
			return
		}
		done <- nil
	}()
	err = <-done
	return per, inSend, err
}

// wakeCost is the CPU of one ppoll timer wake-up of a locked thread with no timer slack,
// waking n times 1 ms apart.
func wakeCost(n int) time.Duration {
	var per time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		goruntime.LockOSThread()
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
		m := &measurement{rawWait: goruntime.GOMAXPROCS(0) > 1}
		efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			return
		}
		defer unix.Close(efd)
		fds := []unix.PollFd{{Fd: int32(efd), Events: unix.POLLIN}}
		var r0, r1 unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &r0)
		start := time.Now()
		for i := 1; i <= n; i++ {
			for d := time.Duration(i)*time.Millisecond - time.Since(start); d > 0; d = time.Duration(i)*time.Millisecond - time.Since(start) {
				m.ts = unix.NsecToTimespec(int64(d))
				_, _ = m.ppoll(fds, &m.ts)
			}
		}
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &r1)
		per = time.Duration((r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano()) / int64(n))
	}()
	<-done
	return per
}

// BenchmarkFloorAsPing: BenchmarkFloor's comparison with the probe's figure computed as iputils
// ping computes its own: each echo's send time and RX stamp cut to whole microseconds (ping's
// timeval), their difference summed, and the mean cut to whole microseconds (ping's integer
// division) — so both sides of the ratio carry the same rounding. Reports ping -f's mean, the
// probe's mean computed so, and their ratio.
func BenchmarkFloorAsPing(b *testing.B) {
	n, dst, netns := benchLab(b, vethLab)
	var pMean, oMean float64
	for b.Loop() {
		out, _ := inNode(b, netns, "ping", "-q", "-n", "-f", "-c", "10000", dst.String())
		m := pingSummary.FindSubmatch(out)
		if m == nil {
			b.Fatalf("ping -f: %s", out)
		}
		avg, _ := strconv.ParseFloat(string(m[2]), 64)
		pMean += avg * 1000
		r, err := Measure(context.Background(), n, netip.AddrPortFrom(dst, 0), Config{Count: 10_000, Rate: Max})
		if err != nil {
			b.Fatal(err)
		}
		var sum, k int64
		for _, p := range r.Packets {
			if !p.Lost() && p.Stamped() {
				sum += p.RXKernel/1000 - p.Sent/1000
				k++
			}
		}
		if k == 0 {
			b.Fatal("no stamped echo")
		}
		oMean += float64(sum / k)
	}
	nn := float64(b.N)
	b.ReportMetric(pMean/nn, "ping-f-mean-us")
	b.ReportMetric(oMean/nn, "probe-mean-us-as-ping")
	b.ReportMetric(oMean/pMean, "probe/ping-mean-as-ping")
}
