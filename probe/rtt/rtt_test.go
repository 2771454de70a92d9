package rtt

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/probe"
	pingprobe "github.com/sfclab/sfclab/probe/ping"
	"github.com/sfclab/sfclab/probe/rtt/echo"
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

// pingRTTs runs iputils ping from the client at interval and returns its RTTs.
func pingRTTs(t *testing.T, l *labtest.Lab, dst netip.Addr, count int, interval time.Duration) []time.Duration {
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
	return ds
}

// TestAgainstPing compares the probe with iputils ping at 1 Kpps on one lab, interleaved over
// three rounds. ping's figure is user send time to the reply's kernel RX timestamp (it reads
// SO_TIMESTAMP): our stack_tx + path, not our rtt (which also counts the reply's way up to the
// application). So, for echoes that met the same conditions, our path <= ping <= our rtt must
// hold. The test compares the fastest echo of each (over 3,000): other work on the machine only
// ever adds time, so the minimum is the one figure of a run that it does not move. Medians do
// move: a CI run saw our path median at 12.8 µs over ping's 10 µs (the probe sleeping between
// echoes, ping spinning), and with the probe Busy, other builds running, ping's per-round
// medians ranged 6 to 45 µs against a steady 3 µs path. The probe runs Busy, as ping spins.
// Slack: a tenth of the bound and 2 µs (ping prints whole µs); still far tighter than a probe
// that timed the wrong points (ms, or the reply's way up counted as path). The medians are
// logged beside.
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
		pings = append(pings, pingRTTs(t, l, dst, 1000, time.Millisecond)...)
		r, err := echo.Measure(context.Background(), l.Node(t, "client"), target, Config{Count: 1000, Rate: 1000, Busy: true})
		if err != nil {
			t.Fatal(err)
		}
		if r.Received != 1000 || r.TXStamps != 1000 {
			t.Fatalf("received %d, stamped %d", r.Received, r.TXStamps)
		}
		if !r.RateReached() { // the machine is shared: a stall shows here, and is not hidden
			t.Logf("achieved %.0f pps of 1000", r.Achieved)
		}
		paths = append(paths, r.Durations(Packet.Path, true)...)
		pingDefs = append(pingDefs, r.Durations(Packet.PingRTT, true)...)
		rtts = append(rtts, r.Durations(Packet.RTT, false)...)
	}
	low := func(ds []time.Duration) time.Duration { return slices.Min(ds) }
	t.Logf("fastest (median) of 3,000: ping %s (%s); probe path %s (%s), stack_tx+path %s (%s), rtt %s (%s)",
		low(pings), echo.Median(pings), low(paths), echo.Median(paths), low(pingDefs), echo.Median(pingDefs), low(rtts), echo.Median(rtts))
	slack := func(d time.Duration) time.Duration { return d/10 + 2*time.Microsecond }
	ping, path, rtt := low(pings), low(paths), low(rtts)
	if ping < path-slack(path) || ping > rtt+slack(rtt) {
		t.Errorf("ping's fastest echo %s is outside [our fastest path %s, our fastest rtt %s]", ping, path, rtt)
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
	if err := New(Config{Protocol: echo.ProtoUDP, Count: 300, Rate: 2000, Port: 7007}).Run(context.Background(), env, func(s results.Sample) { got = append(got, s) }); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	values := map[string]float64{}
	for _, s := range got {
		counts[s.Metric]++
		values[s.Metric] = s.Value
		// UDP echoes are timed at the sender's interface too (tc egress to port 7007, tc
		// ingress from it).
		if s.Metric == "path_end" && (s.Labels["end"] != echo.PathEndTC || s.Value < 270) {
			t.Errorf("path end %v %v: want tc for nearly every echo", s.Value, s.Labels)
		}
		if s.Probe != Name || s.Labels["protocol"] != "udp" || s.Labels["rate"] != "2000" {
			t.Errorf("sample %+v", s)
		}
	}
	// Every echo has an RTT; the kernel timestamps that split it come for nearly all of them
	// (289 of 300 seen with the host busy: a TX timestamp still on the error queue when the
	// probe stops waiting), and the probe must say how many it got.
	if counts["rtt"] != 300 || values["loss"] != 0 || values["sent"] != 300 || counts["path_end"] != 1 ||
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
	r, err := echo.Measure(context.Background(), l.Node(t, "client"), netip.AddrPortFrom(nobody, 0), Config{Count: 20, Rate: 100, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Sent != 20 || r.Received != 0 || r.Loss() != 100 || time.Since(t0) > 3*time.Second {
		t.Errorf("to %s: sent %d received %d loss %v in %s", nobody, r.Sent, r.Received, r.Loss(), time.Since(t0))
	}

	labtest.Exclusive(t)
	r, err = echo.Measure(context.Background(), l.Node(t, "client"), netip.AddrPortFrom(dst, 0), Config{Count: 5000, Rate: 5_000_000})
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
