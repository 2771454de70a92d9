package pktgen

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/testroot"
	"github.com/sfclab/sfclab/internal/vethpair"
)

// setup makes a veth pair, a generator in A and a far-end program in B.
func setup(t testing.TB, frames []int, sample int, m Mode) (*vethpair.Pair, *Generator, *Far) {
	t.Helper()
	setupRoot(t)
	p := vethpair.New(t)
	var g *Generator
	var f *Far
	if err := p.Do(p.B, func() (err error) { f, err = NewFar([]int{p.IndexB}, 9, m); return err }); err != nil {
		if errors.Is(err, ErrUnsupported) {
			t.Skipf("SKIPPED LOUDLY: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Do(p.B, f.Close) })
	flow := Flow{SrcMAC: p.MACA, DstMAC: p.MACB, Src: p.AddrA, Dst: p.AddrB, SrcPort: 40000, DstPort: 9}
	if err := p.Do(p.A, func() (err error) { g, err = NewGenerator(p.IndexA, flow, frames, sample); return err }); err != nil {
		if errors.Is(err, ErrUnsupported) {
			t.Skipf("SKIPPED LOUDLY: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Do(p.A, g.Close) })
	return p, g, f
}

func send(t testing.TB, p *vethpair.Pair, g *Generator, trial uint32, pps float64, d time.Duration) (uint64, time.Duration) {
	t.Helper()
	var sent uint64
	var took time.Duration
	if err := p.Do(p.A, func() (err error) { sent, took, err = g.Send(trial, pps, d, -1); return err }); err != nil {
		t.Fatal(err)
	}
	return sent, took
}

// TestCounterCountsEveryFrame: at a rate a direct veth takes without loss, the receiver's
// counter sees exactly what the generator sent, per trial, IMIX sizes included.
func TestCounterCountsEveryFrame(t *testing.T) {
	p, g, f := setup(t, []int{64, 570, 64, 1518}, 0, Count)
	for trial := uint32(1); trial <= 2; trial++ {
		// 10,000 frames are due; a loaded host sends fewer (1,012 seen), which is no matter
		// here: every frame sent must be counted.
		sent, _ := send(t, p, g, trial, 50e3, 200*time.Millisecond)
		c := settled(t, func() (Counts, error) { return f.Counts(trial) }, sent)
		if sent == 0 || c.Packets != sent {
			t.Errorf("trial %d: sent %d, counted %d", trial, sent, c.Packets)
		}
		// Mean frame on the wire of the cycle 64, 570, 64, 1518 less 4 bytes FCS each.
		if want := float64(64+570+64+1518)/4 - 4; c.Packets > 0 && abs(float64(c.Bytes)/float64(c.Packets)-want) > 2 {
			t.Errorf("trial %d: mean frame %.1f, want %.1f", trial, float64(c.Bytes)/float64(c.Packets), want)
		}
	}
	if c, _ := f.Counts(99); c.Packets != 0 {
		t.Errorf("trial never sent counted %d", c.Packets)
	}
}

// settled reads read until it reports want packets or 2 s pass, and returns the last reading:
// frames still in a veth ring or a NAPI poll when the sender returns reach the counter later,
// later still when other work holds the receiving CPU (a fixed 50 ms wait was seen short).
func settled(t testing.TB, read func() (Counts, error), want uint64) Counts {
	t.Helper()
	var c Counts
	var err error
	for end := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, err = read(); err != nil {
			t.Fatal(err)
		}
		if c.Packets >= want || time.Now().After(end) {
			return c
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestReflectorEchoes: every 16th frame carries a timestamp; the reflector sends every frame
// back and the sender's echo program reports an RTT per timestamped echo.
func TestReflectorEchoes(t *testing.T) {
	p, g, f := setup(t, []int{64}, 16, Reflect)
	if err := g.StartEchoes(); err != nil {
		t.Fatal(err)
	}
	sent, _ := send(t, p, g, 7, 100e3, 200*time.Millisecond)
	seen := settled(t, func() (Counts, error) { return f.Counts(7) }, sent)
	back := settled(t, func() (Counts, error) { return g.Echoes(7) }, sent)
	echoes, err := g.TakeEchoes(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sent %d, reflector saw %d, came back %d, %d timestamped", sent, seen.Packets, back.Packets, len(echoes))
	if seen.Packets != sent || back.Packets != sent {
		t.Errorf("sent %d, reflector saw %d, came back %d", sent, seen.Packets, back.Packets)
	}
	// Sequence numbers count per CPU (a thread that moves continues another CPU's count):
	// one in 16 of each CPU's run of frames, so up to one more per CPU than sent/16.
	if lo, hi := sent/16, (sent+15)/16+uint64(runtime.NumCPU()); uint64(len(echoes)) < lo || uint64(len(echoes)) > hi {
		t.Errorf("%d echoes with RTT, want %d-%d (one in 16 of %d)", len(echoes), lo, hi, sent)
	}
	for _, e := range echoes {
		if e.RTT <= 0 || e.RTT > time.Second || e.Seq%16 != 0 {
			t.Fatalf("echo %+v", e)
		}
	}
}

// TestPacing: the generator never sends faster than a requested rate from 10 kpps up (2 %
// over at most), and every frame it sends is counted. Other work on this shared 2-core
// machine only ever slows a sender (seen: 100 kpps asked, 89.7 kpps and once 17.6 kpps sent
// with builds beside), so the floor is only that it sent. The pacing error itself is
// BenchmarkPacing's figure, not a test's.
func TestPacing(t *testing.T) {
	p, g, f := setup(t, []int{64}, 0, Count)
	for i, pps := range []float64{10e3, 100e3, 300e3} {
		trial := uint32(100 + i)
		sent, took := send(t, p, g, trial, pps, 300*time.Millisecond)
		got := float64(sent) / took.Seconds()
		t.Logf("asked %.0f pps, sent %.0f pps (%d in %s)", pps, got, sent, took)
		if got > pps*1.02 || sent == 0 {
			t.Errorf("asked %.0f pps, sent %.0f pps (%d in %s)", pps, got, sent, took)
		}
		if c := settled(t, func() (Counts, error) { return f.Counts(trial) }, sent); c.Packets != sent {
			t.Errorf("asked %.0f pps: sent %d, counted %d", pps, sent, c.Packets)
		}
	}
}

// BenchmarkGenerator reports the unpaced rate of 64-byte frames over a direct veth pair,
// counted by the receiver's XDP counter.
func BenchmarkGenerator(b *testing.B) {
	p, g, f := setup(b, []int{64}, 0, Count)
	var sent, counted uint64
	var took time.Duration
	for i := 0; i < b.N; i++ {
		s, d := send(b, p, g, uint32(i+1), 0, time.Second)
		time.Sleep(20 * time.Millisecond)
		c, _ := f.Counts(uint32(i + 1))
		sent, counted, took = sent+s, counted+c.Packets, took+d
	}
	b.ReportMetric(float64(sent)/took.Seconds()/1e6, "Mpps-sent")
	b.ReportMetric(float64(counted)/took.Seconds()/1e6, "Mpps-counted")
}

// BenchmarkPacing reports, per requested rate, the achieved rate's error in percent (the
// target is within 1 %) and what the counter saw, over a direct veth pair.
func BenchmarkPacing(b *testing.B) {
	p, g, f := setup(b, []int{64}, 0, Count)
	for _, pps := range []float64{10e3, 100e3, 1e6, 2e6} {
		b.Run(fmt.Sprintf("%.0fkpps", pps/1e3), func(b *testing.B) {
			var worst float64
			for i := 0; i < b.N; i++ {
				trial := uint32(1000 + i + int(pps/1e3))
				sent, took := send(b, p, g, trial, pps, time.Second)
				err := (float64(sent)/took.Seconds()/pps - 1) * 100
				if abs(err) > abs(worst) {
					worst = err
				}
				time.Sleep(20 * time.Millisecond)
				c, _ := f.Counts(trial)
				b.ReportMetric(float64(sent-min(sent, c.Packets)), "lost")
			}
			b.ReportMetric(worst, "worst-error-%")
		})
	}
}

func setupRoot(t testing.TB) { testroot.Require(t, "this test attaches XDP programs in namespaces") }

func ifindex(name string) int {
	i, err := net.InterfaceByName(name)
	if err != nil {
		return 0
	}
	return i.Index
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
