package ndr

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/pktgen"
	"github.com/sfclab/sfclab/probe"
)

// BenchmarkForwarderLossTimeline is the investigation of the one-forwarder chain's loss at low
// rates with its receiving side on the other CPU (docs/packet-rate.md, "Open"): it sends
// 30 kpps of 64-byte frames for 2 s through the forwarder, first with everything where the
// kernel puts it, then placed as the search places it (sender on CPU 0, the forwarder's
// veths' threaded NAPI on CPU 1 at SCHED_FIFO), and logs, every 100 ms, the frames the
// forwarder's veths dropped, so that the drops can be placed in time (at the start of a
// trial, or throughout), with the total lost at the counter.
func BenchmarkForwarderLossTimeline(b *testing.B) {
	labtest.Exclusive(b)
	l := labtest.Deploy(b, fwdLab)
	env := l.ProbeEnv(b, "c")
	src, dst, _, err := probe.Ends(env, "bench")
	if err != nil {
		b.Fatal(err)
	}
	next, err := env.Node(env.Chain.Path[1])
	if err != nil {
		b.Fatal(err)
	}
	port := probe.ServicePort(env.Plan, env.Chain)
	target := netip.AddrPortFrom(env.Chain.Target, probe.TargetPort(env.Plan, env.Chain))
	var sfd int
	if err := src.Do(func() (err error) { sfd, err = udpSocket(netip.AddrPort{}, target); return err }); err != nil {
		b.Fatal(err)
	}
	defer closeFD(sfd)
	snd := NewSender(sfd, []int{64})
	// Neighbours resolved (a fresh link drops the first datagrams): up to 3 s.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		_, _, _ = snd.Send(1, 1000, 100*time.Millisecond)
		if src.Do(func() error { _, _, err := pktgen.FlowFrom(sfd, target); return err }) == nil {
			break
		}
	}
	drops := func() uint64 {
		var n uint64
		_ = next.Do(func() error {
			links, err := netlink.LinkList()
			for _, l := range links {
				if l.Type() == "veth" && l.Attrs().Statistics != nil {
					n += l.Attrs().Statistics.RxDropped + l.Attrs().Statistics.TxDropped
				}
			}
			return err
		})
		return n
	}
	// Where the drops are counted: every veth of the forwarder and the destination, rx and tx.
	type ctr struct{ rx, tx uint64 }
	perVeth := func() map[string]ctr {
		m := map[string]ctr{}
		for _, n := range []struct {
			name string
			node probe.Node
		}{{"f1", next}, {"server", dst}} {
			_ = n.node.Do(func() error {
				links, err := netlink.LinkList()
				for _, l := range links {
					if st := l.Attrs().Statistics; l.Type() == "veth" && st != nil {
						m[n.name+"/"+l.Attrs().Name] = ctr{st.RxDropped, st.TxDropped}
					}
				}
				return err
			})
		}
		return m
	}
	id := uint32(100)
	for _, v := range []struct {
		placed   bool
		maxBurst int
		maxLag   time.Duration
	}{{false, 0, 0}, {true, 0, 0}, {true, MaxBurst, MaxLag}} {
		placed := v.placed
		x, err := newXDPGen(context.Background(), src, next, dst, sfd, target, port, []int{64}, placed)
		if err != nil {
			b.Fatal(err)
		}
		x.gen.MaxBurst, x.gen.MaxLag = v.maxBurst, v.maxLag
		for i := 0; i < b.N; i++ {
			id++
			var mu sync.Mutex
			var line []string
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				last := drops()
				for k := 0; ; k++ {
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Millisecond):
					}
					d := drops()
					mu.Lock()
					line = append(line, fmt.Sprint(d-last))
					mu.Unlock()
					last = d
				}
			}()
			before := perVeth()
			o, err := x.trial(id, 30e3, 2*time.Second, 200*time.Millisecond)
			var where []string
			for k, v := range perVeth() {
				if d := (ctr{v.rx - before[k].rx, v.tx - before[k].tx}); d.rx+d.tx > 0 {
					where = append(where, fmt.Sprintf("%s rx_dropped %d tx_dropped %d", k, d.rx, d.tx))
				}
			}
			b.Logf("drops by interface: %v", where)
			close(stop)
			<-done
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("max burst %d (cap %d, lag %s, skipped %d, ENOSPC retries %d), placed=%v (%s): sent %d, counted %d, lost %d (%.2f %%); veth drops per 100 ms: %s", x.gen.LastMaxBurst, v.maxBurst, v.maxLag, x.gen.LastSkipped, x.gen.LastRetries, placed, x.placement, o.Sent, o.Received,
				o.Sent-min(o.Sent, o.Received), float64(o.Sent-min(o.Sent, o.Received))/float64(max(o.Sent, 1))*100, strings.Join(line, " "))
		}
		x.Close()
	}
}

// BenchmarkForwarderLossVsRate measures the one-forwarder chain's loss per trial against the
// offered rate, placed as the search places it (sender on CPU 0 at SCHED_FIFO, the forwarder's
// threaded NAPI on CPU 1 at SCHED_FIFO 50, 1 ms calls of at most 128 frames): one round per
// iteration, a 0.5 s trial of 64-byte frames at each rate of lossRates. Each trial logs what
// the search sees (sent, counted, loss), where the frames were dropped (the forwarder's
// ingress veth's rx_dropped: its ring full; the sender's tx_dropped: the same frames refused
// at the sender), what the generator did (skipped, largest call) and the trial's start and
// end on CLOCK_MONOTONIC, to match the trial with a scheduler trace (perf sched record -k
// CLOCK_MONOTONIC).
func BenchmarkForwarderLossVsRate(b *testing.B) {
	labtest.Exclusive(b)
	l := labtest.Deploy(b, fwdLab)
	env := l.ProbeEnv(b, "c")
	src, dst, _, err := probe.Ends(env, "bench")
	if err != nil {
		b.Fatal(err)
	}
	next, err := env.Node(env.Chain.Path[1])
	if err != nil {
		b.Fatal(err)
	}
	port := probe.ServicePort(env.Plan, env.Chain)
	target := netip.AddrPortFrom(env.Chain.Target, probe.TargetPort(env.Plan, env.Chain))
	var sfd int
	if err := src.Do(func() (err error) { sfd, err = udpSocket(netip.AddrPort{}, target); return err }); err != nil {
		b.Fatal(err)
	}
	defer closeFD(sfd)
	snd := NewSender(sfd, []int{64})
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		_, _, _ = snd.Send(1, 1000, 100*time.Millisecond)
		if src.Do(func() error { _, _, err := pktgen.FlowFrom(sfd, target); return err }) == nil {
			break
		}
	}
	ingressDrops := func() uint64 {
		var n uint64
		_ = next.Do(func() error {
			ln, err := netlink.LinkByName("ingress")
			if err == nil && ln.Attrs().Statistics != nil {
				n = ln.Attrs().Statistics.RxDropped
			}
			return err
		})
		return n
	}
	x, err := newXDPGen(context.Background(), src, next, dst, sfd, target, port, []int{64}, true)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	b.Logf("placement: %s", x.placement)
	mono := func() float64 {
		var ts unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		return float64(ts.Nano()) / 1e9
	}
	id := uint32(100)
	lossy := map[float64]int{}
	trials := map[float64]int{}
	for i := 0; i < b.N; i++ {
		for _, pps := range lossRates {
			id++
			d0 := ingressDrops()
			t0 := mono()
			o, err := x.trial(id, pps, 500*time.Millisecond, 100*time.Millisecond)
			t1 := mono()
			if err != nil {
				b.Fatal(err)
			}
			d := ingressDrops() - d0
			lost := o.Sent - min(o.Sent, o.Received)
			trials[pps]++
			if lost > 0 {
				lossy[pps]++
			}
			b.Logf("trial at %6.0f kpps: offered %7.1f kpps, sent %6d, lost %4d (%.3f %%), f1/ingress rx_dropped %4d, refused at sender %4d, skipped %d, largest call %d, NAPI wait %d µs by %s (disturbed %v), mono %.3f-%.3f",
				pps/1e3, o.Offered/1e3, o.Sent, lost, float64(lost)/float64(max(o.Sent, 1))*100, d, o.Refused, o.Skipped, x.gen.LastMaxBurst,
				o.Stall.Microseconds(), o.StallBy, o.Disturbed, t0, t1)
		}
	}
	for _, pps := range lossRates {
		b.Logf("%6.0f kpps: %d of %d trials lost frames", pps/1e3, lossy[pps], trials[pps])
	}
}

// lossRates are BenchmarkForwarderLossVsRate's rates (pps), low to high.
var lossRates = []float64{50e3, 100e3, 200e3, 300e3, 400e3}
