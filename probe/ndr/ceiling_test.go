package ndr

import (
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/results"
	"github.com/vishvananda/netlink"
)

// shaperPPS is what tbf at 100 Mbit/s lets through of 64-byte frames: it counts the 60 bytes
// a veth carries (no FCS).
const shaperPPS = 100e6 / (60 * 8)

// TestNDRCeilingOnAShapedLink: on a chain with a 100 Mbit/s link, the generator's ceiling is
// what it offers into the chain and the NDR is the shaper's.
//
//   - The source's own link shaped: the XDP generator's frames leave below the qdisc layer
//     and would never meet the shaper, so the search falls back to the socket sender with the
//     reason, and its NDR (or the most it got through, when the shaper held the socket back)
//     is at most the shaper's rate (10 % margin for tbf's 50 kB burst).
//   - The link beyond the forwarder shaped: the ceiling counts only frames that left the
//     source's interface, so every frame it stands for (ceiling times its 0.3 s trial, less
//     a sixth for timing) entered the forwarder's ingress veth, whose rx_packets count over
//     the whole search (all trials) is an upper bound of it. The program's count of
//     XDP_TX verdicts, which also holds the frames the veth refused with the forwarder's
//     ring full, gave a ceiling of 19.9 Mpps (64 B) on a 2-core host.
func TestNDRCeilingOnAShapedLink(t *testing.T) {
	for _, tc := range []struct {
		name, segment string
	}{
		{"source link shaped", "0"},
		{"link beyond the forwarder shaped", "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			labtest.Exclusive(t)
			l := labtest.Deploy(t, `
name: t-ceil-`+tc.segment+`
endpoints: {client: {}, server: {}}
functions: {f1: {kind: forwarder}}
chains: [{name: c, from: client, to: server, hops: [f1], shaping: [{segment: `+tc.segment+`, rate: 100mbit}]}]
`)
			f1 := l.Node(t, "f1")
			rx := func() uint64 {
				var n uint64
				if err := f1.Do(func() error {
					ln, err := netlink.LinkByName("ingress")
					if err == nil {
						n = ln.Attrs().Statistics.RxPackets
					}
					return err
				}); err != nil {
					t.Fatalf("read f1's ingress: %v", err)
				}
				return n
			}
			rx0 := rx()
			cfg := Config{Frames: []string{"64"}, Trial: 500 * time.Millisecond, Drain: 100 * time.Millisecond, Precision: 0.05, MaxTrials: 6}
			var ceil, ndr, gmax []results.Sample
			for _, s := range run(t, l, cfg) {
				switch s.Metric {
				case "generator_ceiling_pps":
					ceil = append(ceil, s)
				case "ndr_pps":
					ndr = append(ndr, s)
				case "generator_max_pps":
					gmax = append(gmax, s)
				}
			}
			entered := rx() - rx0
			if len(ceil) != 1 {
				t.Fatalf("%d generator_ceiling_pps samples, want 1", len(ceil))
			}
			c := ceil[0]
			t.Logf("generator %s, ceiling %.0f pps (program %s pps, refused %s), fallback %q; %d frames entered f1; ndr %v; generator max %v",
				c.Labels["generator"], c.Value, c.Labels["ceiling_program_pps"], c.Labels["ceiling_refused"], c.Labels["fallback_reason"], entered, values(ndr), values(gmax))
			switch tc.segment {
			case "0":
				if c.Labels["generator"] != GenSendmmsg || !strings.Contains(c.Labels["fallback_reason"], "tbf") {
					t.Errorf("generator %q, fallback reason %q: want sendmmsg, the reason naming the source's tbf", c.Labels["generator"], c.Labels["fallback_reason"])
				}
				// The NDR, or the most the sender got through when the shaper held it back
				// (limited, back-pressure), is the shaper's rate at most.
				for _, s := range append(ndr, gmax...) {
					if s.Value > 1.1*shaperPPS {
						t.Errorf("%s %.0f pps through a %.0f pps shaper (%v)", s.Metric, s.Value, shaperPPS, s.Labels)
					}
				}
			case "1":
				if c.Labels["generator"] != GenXDP {
					t.Skipf("SKIPPED LOUDLY: the XDP generator did not run here (%s), no ceiling of it to check", c.Labels["fallback_reason"])
				}
				if stood := c.Value * 0.25; stood > float64(entered) {
					t.Errorf("ceiling %.0f pps stands for %.0f frames in its 0.3 s trial, but only %d entered the forwarder in the whole search", c.Value, stood, entered)
				}
			}
		})
	}
}

func values(ss []results.Sample) []float64 {
	var v []float64
	for _, s := range ss {
		v = append(v, s.Value)
	}
	return v
}
