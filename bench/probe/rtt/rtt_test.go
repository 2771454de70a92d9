package rtt

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/sfclab/sfclab/bench/probe"
	pingprobe "github.com/sfclab/sfclab/bench/probe/ping"
	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/results"
)

// pairLab is two endpoints on one bridge, as study A's baseline.
const pairLab = `
name: t-rtt-pair
links: bridge
endpoints:
  client: {kind: client}
  server: {kind: server}
chains:
  - {name: direct, from: client, to: server}
`

// pingMedian runs iputils ping from the client at interval and returns its median RTT.
func pingMedian(t *testing.T, l *labtest.Lab, dst netip.Addr, count int, interval time.Duration) time.Duration {
	t.Helper()
	out, err := l.Node(t, "client").Output(context.Background(), nil, pingprobe.Config{Count: count, Interval: interval}.Args(dst.String())...)
	if err != nil {
		t.Fatalf("ping: %v", err)
	}
	var ds []time.Duration
	for _, rep := range pingprobe.Parse(out).Replies {
		ds = append(ds, time.Duration(rep.RTT*1e6))
	}
	if len(ds) < count*9/10 {
		t.Fatalf("ping: %d replies of %d", len(ds), count)
	}
	return Median(ds)
}

// TestAgainstPing compares the probe with iputils ping at 1 Kpps on one lab, interleaved over
// three rounds. ping's figure is user send time to the reply's kernel RX timestamp (it reads
// SO_TIMESTAMP): our stack_tx + path, not our rtt (which also counts the reply's way up to the
// application). ping spins between echoes at this interval (about a core of CPU), keeping the
// sender's CPU awake; the probe sleeps by default, which adds wake-up time to stack_tx. On this
// shared 2-core machine neither median is steady to 5 % from run to run, so the test asserts
// what must hold: ping's median lies between our path median and our rtt median (5 % and
// ping's 1 µs resolution of slack), and logs stack_tx+path beside it.
func TestAgainstPing(t *testing.T) {
	l := labtest.Deploy(t, pairLab)
	labtest.Exclusive(t)
	env := l.ProbeEnv(t, "direct")
	dst := probe.DestinationAddr(env.Plan, env.Chain)
	target := netip.AddrPortFrom(dst, 0)
	if err := Warm(context.Background(), l.Node(t, "client"), target, Config{}); err != nil {
		t.Fatal(err)
	}
	var pings, paths, pingDefs, rtts []time.Duration
	for range 3 {
		pings = append(pings, pingMedian(t, l, dst, 1000, time.Millisecond))
		r, err := Measure(context.Background(), l.Node(t, "client"), target, Config{Count: 1000, Rate: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if r.Received != 1000 || r.TXStamps != 1000 {
			t.Fatalf("received %d, stamped %d", r.Received, r.TXStamps)
		}
		if !r.RateReached() { // the machine is shared: a stall shows here, and is not hidden
			t.Logf("achieved %.0f pps of 1000", r.Achieved)
		}
		paths = append(paths, Median(r.Durations(Packet.Path, true)))
		pingDefs = append(pingDefs, Median(r.Durations(Packet.PingRTT, true)))
		rtts = append(rtts, Median(r.Durations(Packet.RTT, false)))
	}
	pingMed, path, pingDef, rtt := Median(pings), Median(paths), Median(pingDefs), Median(rtts)
	t.Logf("medians over 3 rounds: ping %s %v; probe path %s %v, stack_tx+path %s %v, rtt %s %v",
		pingMed, pings, path, paths, pingDef, pingDefs, rtt, rtts)
	slack := func(d time.Duration) time.Duration { return d/20 + time.Microsecond }
	if pingMed < path-slack(path) || pingMed > rtt+slack(rtt) {
		t.Errorf("ping's median %s is outside [our path %s, our rtt %s]", pingMed, path, rtt)
	}
}

func diff(a, b time.Duration) time.Duration {
	if a > b {
		return a - b
	}
	return b - a
}

// TestProbeUDP runs the probe as the runner does: UDP, responder started and stopped.
func TestProbeUDP(t *testing.T) {
	l := labtest.Deploy(t, pairLab)
	env := l.ProbeEnv(t, "direct")
	var got []results.Sample
	// Run warms the path up first (the lab was just deployed): no echo of the run is lost.
	if err := New(Config{Protocol: ProtoUDP, Count: 300, Rate: 2000, Port: 7007}).Run(context.Background(), env, func(s results.Sample) { got = append(got, s) }); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	values := map[string]float64{}
	for _, s := range got {
		counts[s.Metric]++
		values[s.Metric] = s.Value
		if s.Probe != Name || s.Labels["protocol"] != "udp" || s.Labels["rate"] != "2000" {
			t.Errorf("sample %+v", s)
		}
	}
	// Every echo has an RTT; the kernel timestamps that split it come for nearly all of them
	// (289 of 300 seen with the host busy: a TX timestamp still on the error queue when the
	// probe stops waiting), and the probe must say how many it got.
	if counts["rtt"] != 300 || values["loss"] != 0 || values["sent"] != 300 ||
		counts["path"] != int(values["timestamped"]) || counts["stack_tx"] != counts["path"] || values["timestamped"] < 270 {
		t.Errorf("samples per metric %v, values %v", counts, values)
	}
	// The schedule is never ahead of the requested rate; how close a run on a busy host comes
	// to it is BenchmarkRate's to measure (1957 of 2000 pps seen in CI beside other packages).
	if a := values["rate_achieved"]; a > 1.01*2000 || a < 0.5*2000 {
		t.Errorf("achieved %.0f of 2000 pps: ahead of the schedule, or far behind it", a)
	}
	// The responder is gone: its port can be bound again.
	r, err := StartResponder(l.Node(t, "server"), 7007, false)
	if err != nil {
		t.Fatalf("responder port still taken after Run: %v", err)
	}
	r.Close()
}

// TestLossAndRate: echoes to an address nobody has are all lost, within the timeout; a rate
// the machine cannot reach is reported as not reached.
func TestLossAndRate(t *testing.T) {
	l := labtest.Deploy(t, pairLab)
	env := l.ProbeEnv(t, "direct")
	dst := probe.DestinationAddr(env.Plan, env.Chain)
	nobody := dst.Next().Next().Next() // in the segment's subnet, not assigned
	t0 := time.Now()
	r, err := Measure(context.Background(), l.Node(t, "client"), netip.AddrPortFrom(nobody, 0), Config{Count: 20, Rate: 100, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Sent != 20 || r.Received != 0 || r.Loss() != 100 || time.Since(t0) > 3*time.Second {
		t.Errorf("to %s: sent %d received %d loss %v in %s", nobody, r.Sent, r.Received, r.Loss(), time.Since(t0))
	}

	labtest.Exclusive(t)
	r, err = Measure(context.Background(), l.Node(t, "client"), netip.AddrPortFrom(dst, 0), Config{Count: 5000, Rate: 5_000_000})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("5 Mpps requested: achieved %.0f pps, %d received", r.Achieved, r.Received)
	if r.RateReached() || r.Achieved <= 0 {
		t.Errorf("5 Mpps reported as reached (achieved %.0f)", r.Achieved)
	}
	var reported bool
	for _, s := range Samples(r) {
		if s.Metric == "rate_achieved" && s.Labels["rate_reached"] == "false" && s.Value == r.Achieved {
			reported = true
		}
	}
	if !reported {
		t.Error("no rate_achieved sample with rate_reached=false")
	}
}
