package rtt

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/pktgen"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/rtt/echo"
	"github.com/sfclab/sfclab/results"
)

const highRateFwdLab = `
name: t-rtt-hr
endpoints: {client: {}, server: {}}
functions: {f1: {kind: forwarder}}
chains: [{name: c, from: client, to: server, hops: [f1]}]
`

func highRate(t testing.TB, yaml, chain string, h HighRate) map[string][]results.Sample {
	t.Helper()
	return highRateOn(t, labtest.Deploy(t, yaml), chain, h)
}

func highRateOn(t testing.TB, l *labtest.Lab, chain string, h HighRate) map[string][]results.Sample {
	t.Helper()
	got := map[string][]results.Sample{}
	if err := RunHighRate(context.Background(), l.ProbeEnv(t, chain), h, func(s results.Sample) { got[s.Metric] = append(got[s.Metric], s) }); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestHighRateEchoes: at 100 kpps over a direct pair and through a forwarder, every
// timestamped frame that came back has an RTT, the reflector's counts are reported apart,
// and the sampled share is the one asked for.
func TestHighRateEchoes(t *testing.T) {
	labtest.Exclusive(t)
	for _, c := range []struct{ name, yaml, chain string }{{"direct", vethLab, "direct"}, {"forwarder", highRateFwdLab, "c"}} {
		t.Run(c.name, func(t *testing.T) {
			got := highRate(t, c.yaml, c.chain, HighRate{Rate: 100e3, Duration: 300 * time.Millisecond, SampleEvery: 64})
			one := func(m string) float64 {
				if len(got[m]) != 1 {
					t.Fatalf("%s: %d samples", m, len(got[m]))
				}
				return got[m][0].Value
			}
			achieved, loss, seen := one("rate_achieved"), one("loss"), one("reflector_seen")
			sent := achieved * 0.3
			t.Logf("achieved %.0f pps, loss %.2f %%, reflector saw %.0f, %d RTTs, reflector lost %.0f", achieved, loss, seen, len(got["rtt"]), one("reflector_lost"))
			if achieved <= 0 || seen <= 0 || len(got["rtt"]) == 0 {
				t.Fatalf("nothing measured")
			}
			if want := sent * (1 - loss/100) / 64; float64(len(got["rtt"])) < want*0.9 || float64(len(got["rtt"])) > want*1.1+2 {
				t.Errorf("%d RTTs, want about %.0f (one in 64 of what came back)", len(got["rtt"]), want)
			}
			if one("sampled") != 100.0/64 {
				t.Errorf("sampled %v %%", one("sampled"))
			}
			for _, s := range got["rtt"] {
				if s.Value <= 0 || s.Value > 1000 || s.Labels["method"] != "xdp-reflector" {
					t.Fatalf("rtt sample %+v", s)
				}
			}
		})
	}
	if err := RunHighRate(context.Background(), probe.Env{}, HighRate{}, nil); err == nil {
		t.Error("zero rate accepted")
	}
}

// BenchmarkHighRate1Mpps asks for echoes at 1 Mpps (64 B, a timestamp in every 1024th) over
// a direct link and through one forwarder: achieved rate (target >= 0.95 Mpps on the direct
// link), loss and RTT median.
func BenchmarkHighRate1Mpps(b *testing.B) {
	labtest.Exclusive(b)
	for _, c := range []struct{ name, yaml, chain string }{{"direct", vethLab, "direct"}, {"forwarder", highRateFwdLab, "c"}} {
		l := labtest.Deploy(b, c.yaml)
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				got := highRateOn(b, l, c.chain, HighRate{Rate: 1e6, Duration: time.Second})
				b.ReportMetric(got["rate_achieved"][0].Value/1e6, "achieved-Mpps")
				b.ReportMetric(got["loss"][0].Value, "loss-%")
				b.ReportMetric(float64(len(got["rtt"])), "rtts")
				var v []float64
				for _, s := range got["rtt"] {
					v = append(v, s.Value*1000)
				}
				if len(v) > 0 {
					sort.Float64s(v)
					b.ReportMetric(v[len(v)/2], "rtt-p50-us")
				}
			}
		})
	}
}

// TestHighRateClampAndCleanup: a rate far above what the generator offers into the chain is
// clamped to its measured ceiling and said so (label rate_clamped_from, rate_reached=false,
// the ceiling as a sample), and when the run returns no sfc_ program is left loaded.
func TestHighRateClampAndCleanup(t *testing.T) {
	labtest.Exclusive(t)
	l := labtest.Deploy(t, vethLab)
	before, err := pktgen.Loaded()
	if err != nil {
		t.Fatal(err)
	}
	got := highRateOn(t, l, "direct", HighRate{Rate: 1e9, Duration: 200 * time.Millisecond})
	for _, m := range []string{"generator_ceiling", "rate_requested", "rate_achieved"} {
		if len(got[m]) != 1 {
			t.Fatalf("%s: %d samples", m, len(got[m]))
		}
	}
	ceil, ach := got["generator_ceiling"][0].Value, got["rate_achieved"][0].Value
	t.Logf("ceiling %.0f pps (program %s pps, refused %s), achieved %.0f pps", ceil, got["generator_ceiling"][0].Labels["ceiling_program_pps"], got["generator_ceiling"][0].Labels["ceiling_refused"], ach)
	if ceil <= 0 || ceil >= 1e9 {
		t.Errorf("ceiling %v", ceil)
	}
	for _, m := range []string{"rate_requested", "rate_achieved", "loss", "rtt"} {
		for _, s := range got[m] {
			if s.Labels["rate_clamped_from"] != "1000000000" {
				t.Fatalf("%s: labels %v, want rate_clamped_from=1000000000", m, s.Labels)
			}
		}
	}
	if got["rate_requested"][0].Value != 1e9 || got["rate_achieved"][0].Labels["rate_reached"] != "false" {
		t.Errorf("requested %v, achieved labels %v", got["rate_requested"][0].Value, got["rate_achieved"][0].Labels)
	}
	after, err := pktgen.Loaded()
	if err != nil {
		t.Fatal(err)
	}
	if len(after) > len(before) {
		t.Errorf("%d sfc_ programs loaded after the run, %d before", len(after), len(before))
	}
}

// TestMethodOnTwoHosts runs the rtt probe at 200 kpps on study D's testbed (two emulated
// hosts, the ends on bridges): with veth and ebpf-redirect the default method is the XDP
// generator (the ends' peers are in the hosts' namespaces and get sfc_pass there), every
// sample says so and carries the rate; with macvlan (no XDP transmission from the source) it
// falls back to the socket path, the reason in every sample, and asked for xdp explicitly
// it is refused with that reason. No sfc_ program is left behind either way.
func TestMethodOnTwoHosts(t *testing.T) {
	labtest.Exclusive(t)
	for _, driver := range []string{"veth", "ebpf-redirect", "macvlan"} {
		t.Run(driver, func(t *testing.T) {
			l := labtest.Deploy(t, twoHostsLab(driver))
			env := l.ProbeEnv(t, "echo")
			before, err := pktgen.Loaded()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]results.Sample{}
			cfg := Config{Protocol: echo.ProtoUDP, Rate: 200e3, Count: 100, SampleEvery: 256}
			if err := New(cfg).Run(context.Background(), env, func(s results.Sample) { got[s.Metric] = append(got[s.Metric], s) }); err != nil {
				t.Fatal(err)
			}
			if len(got["rate_achieved"]) != 1 || len(got["rtt"]) == 0 {
				t.Fatalf("rate_achieved %d samples, %d rtts", len(got["rate_achieved"]), len(got["rtt"]))
			}
			a := got["rate_achieved"][0]
			t.Logf("%s: method %s, achieved %.0f pps, %d rtts, fallback %q", driver, a.Labels["method"], a.Value, len(got["rtt"]), a.Labels["fallback_reason"])
			if a.Labels["rate"] != "200000" {
				t.Errorf("rate label %q", a.Labels["rate"])
			}
			if driver == "macvlan" {
				if a.Labels["method"] != echo.MethodSocket || !strings.Contains(a.Labels["fallback_reason"], "not a veth") {
					t.Errorf("labels %v: want the socket method and the reason", a.Labels)
				}
				cfg.Method = echo.MethodXDP
				err := New(cfg).Run(context.Background(), env, func(results.Sample) {})
				if !errors.Is(err, pktgen.ErrUnsupported) || !strings.Contains(err.Error(), "not a veth") {
					t.Errorf("method xdp on macvlan: %v, want refused with the reason", err)
				}
			} else {
				if a.Labels["method"] != echo.MethodXDPName || a.Labels["fallback_reason"] != "" {
					t.Errorf("labels %v: want the xdp method", a.Labels)
				}
				if len(got["reflector_seen"]) != 1 || got["reflector_seen"][0].Value == 0 {
					t.Errorf("the reflector saw nothing: %v", got["reflector_seen"])
				}
			}
			after, err := pktgen.Loaded()
			if err != nil {
				t.Fatal(err)
			}
			if len(after) > len(before) {
				t.Errorf("%d sfc_ programs loaded after the run, %d before", len(after), len(before))
			}
		})
	}
}

// TestHighRateOnAShapedLink: the XDP generator's frames and the reflector's echoes leave
// with XDP_TX, below the qdisc layer, so a tbf on an end's own link would never see them. With
// the source's link shaped (segment 0) or the destination's (segment 1, the forwarder's
// egress and the server's link) to 10 Mbit/s, the default method at 100 kpps falls back to the
// socket path with the reason naming tbf and the end, and what came back is held to the
// shaper's rate (10e6/(60*8) = 20.8 kpps of minimum frames, 30 % margin for its 16 kB burst);
// asked for xdp explicitly, the run is refused with that reason. No sfc_ program is left.
func TestHighRateOnAShapedLink(t *testing.T) {
	labtest.Exclusive(t)
	const shaperPPS = 10e6 / (60 * 8)
	for _, tc := range []struct{ segment, end string }{{"0", "source"}, {"1", "destination"}} {
		t.Run(tc.end, func(t *testing.T) {
			l := labtest.Deploy(t, `
name: t-rtt-shp`+tc.segment+`
endpoints: {client: {}, server: {}}
functions: {f1: {kind: forwarder}}
chains: [{name: c, from: client, to: server, hops: [f1], shaping: [{segment: `+tc.segment+`, rate: 10mbit}]}]
`)
			env := l.ProbeEnv(t, "c")
			before, err := pktgen.Loaded()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]results.Sample{}
			cfg := Config{Protocol: echo.ProtoUDP, Rate: 100e3, Duration: time.Second}
			if err := New(cfg).Run(context.Background(), env, func(s results.Sample) { got[s.Metric] = append(got[s.Metric], s) }); err != nil {
				t.Fatal(err)
			}
			if len(got["rate_achieved"]) != 1 || len(got["loss"]) != 1 {
				t.Fatalf("rate_achieved %d samples, loss %d", len(got["rate_achieved"]), len(got["loss"]))
			}
			a := got["rate_achieved"][0]
			back := a.Value * (1 - got["loss"][0].Value/100)
			t.Logf("method %s, fallback %q, achieved %.0f pps, came back %.0f pps, %d rtts", a.Labels["method"], a.Labels["fallback_reason"], a.Value, back, len(got["rtt"]))
			if a.Labels["method"] != echo.MethodSocket || !strings.Contains(a.Labels["fallback_reason"], "tbf") || !strings.Contains(a.Labels["fallback_reason"], tc.end) {
				t.Errorf("labels %v: want the socket method, the reason naming tbf on the %s", a.Labels, tc.end)
			}
			if back > 1.3*shaperPPS {
				t.Errorf("%.0f pps came back through a %.0f pps shaper", back, shaperPPS)
			}
			cfg.Method = echo.MethodXDP
			err = New(cfg).Run(context.Background(), env, func(results.Sample) {})
			if !errors.Is(err, pktgen.ErrUnsupported) || !strings.Contains(err.Error(), "tbf") {
				t.Errorf("method xdp on a shaped %s: %v, want refused naming tbf", tc.end, err)
			}
			after, err := pktgen.Loaded()
			if err != nil {
				t.Fatal(err)
			}
			if len(after) > len(before) {
				t.Errorf("%d sfc_ programs loaded after the runs, %d before", len(after), len(before))
			}
		})
	}
}
