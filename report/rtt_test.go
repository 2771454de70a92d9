package report

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/results"
)

// rttSamples makes the rtt probe's samples of one scenario: n echoes at base+i*step ms.
func rttSamples(scenario string, count int, kind string, n int, base, step float64) []results.Sample {
	labels := func(kv ...string) map[string]string {
		l := map[string]string{"rate": "1000", "protocol": "icmp", "size": "64"}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	out := []results.Sample{{Scenario: scenario, Trial: 1, Probe: "load", Metric: "background_nodes", Value: float64(count), Unit: "count",
		Labels: map[string]string{"kind": kind, "side": "sender"}}}
	for i := range n {
		seq := strconv.Itoa(i)
		out = append(out,
			results.Sample{Scenario: scenario, Trial: 1, Probe: "rtt", Metric: "rtt", Unit: "ms", Value: base + float64(i)*step, Labels: labels("seq", seq)},
			results.Sample{Scenario: scenario, Trial: 1, Probe: "rtt", Metric: "path", Unit: "ms", Value: base / 2, Labels: labels("seq", seq)})
	}
	out = append(out,
		results.Sample{Scenario: scenario, Trial: 1, Probe: "rtt", Metric: "rate_requested", Unit: "pps", Value: 1000, Labels: labels("rate_reached", "true")},
		results.Sample{Scenario: scenario, Trial: 1, Probe: "rtt", Metric: "rate_achieved", Unit: "pps", Value: 990, Labels: labels("rate_reached", "true")},
		results.Sample{Scenario: scenario, Trial: 1, Probe: "rtt", Metric: "loss", Unit: "%", Value: 0, Labels: labels()})
	return out
}

func TestRTTSection(t *testing.T) {
	var samples []results.Sample
	// RTT grows with background nodes for veth; macvlan is half of veth in every cell.
	for _, c := range []int{0, 8, 32} {
		name := func(base string) string {
			if c == 0 {
				return base + ".bg-0"
			}
			return base + ".bg-network-sender-" + strconv.Itoa(c)
		}
		samples = append(samples, rttSamples(name("veth"), c, "network", 20, 0.02*float64(1+c), 0.001)...)
		samples = append(samples, rttSamples(name("macvlan"), c, "network", 20, 0.01*float64(1+c), 0.0005)...)
	}
	r, err := Build(Input{Run: results.Run{Experiment: "t", Complete: true}, Samples: samples})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.RTT) != 6 || r.RTT[0].RTT.N != 20 || r.RTT[0].Background != 0 || !r.RTT[0].Reached {
		t.Fatalf("rows %+v", r.RTT)
	}
	if len(r.RTTTrends) != 2 {
		t.Fatalf("trends %+v", r.RTTTrends)
	}
	for _, tr := range r.RTTTrends {
		if tr.Tau < 0.5 || tr.P > 0.001 || len(tr.Counts) != 3 || tr.N != 60 {
			t.Errorf("trend %+v: want a strong, significant positive tau over counts 0, 8, 32", tr)
		}
	}
	if len(r.RTTPairs) != 1 || r.RTTPairs[0].Pairs != 3 || r.RTTPairs[0].Ratio < 0.49 || r.RTTPairs[0].Ratio > 0.51 {
		t.Errorf("pairs %+v", r.RTTPairs)
	}
	var md bytes.Buffer
	if err := r.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Round trips (rtt probe)", "Kendall tau-b", "Wilcoxon W", "veth.bg-network-sender-32"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	for _, n := range r.Notes {
		if strings.Contains(n, "rtt") {
			t.Errorf("note about rtt samples: %s", n)
		}
	}
}
