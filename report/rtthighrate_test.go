package report

import (
	"strings"
	"testing"

	"github.com/sfclab/sfclab/results"
)

// highRateSamples is one high-rate cell: the rtt probe asked for 1 Mpps and achieved
// achieved, with the labels of its xdp method (or, with fallback, the socket path's).
func highRateSamples(scenario string, achieved float64, extra map[string]string) []results.Sample {
	labels := func(kv ...string) map[string]string {
		l := map[string]string{"rate": "1000000", "protocol": "udp", "size": "26", "method": "xdp-reflector"}
		for k, v := range extra {
			l[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	s := func(metric, unit string, v float64, l map[string]string) results.Sample {
		return results.Sample{Scenario: scenario, Trial: 1, Probe: "rtt", Metric: metric, Unit: unit, Value: v, Labels: l}
	}
	return []results.Sample{
		s("rtt", "ms", 0.01, labels("seq", "1")), s("path", "ms", 0.01, labels("seq", "1", "tx_stamp", "xdp")),
		s("path_end", "count", 1, labels("end", "xdp")), s("generator_ceiling", "pps", 2.5e6, labels()),
		s("rate_requested", "pps", 1e6, labels("rate_reached", "false")), s("rate_achieved", "pps", achieved, labels("rate_reached", "false")),
		s("loss", "%", 0, labels()),
	}
}

// TestHighRateCells: a 1 Mpps cell below 0.95 of its request is marked in the table and named
// in the verdict, one at 0.99 is not; the method, the generator's ceiling, a clamp and a
// fallback's reason are in the table.
func TestHighRateCells(t *testing.T) {
	var samples []results.Sample
	samples = append(samples, highRateSamples("veth", 0.99e6, nil)...)
	samples = append(samples, highRateSamples("macvlan", 0.4e6, map[string]string{"method": "socket", "fallback_reason": "the source's interface macv0 is a macvlan, not a veth"})...)
	samples = append(samples, highRateSamples("ebpf", 0.94e6, map[string]string{"rate_clamped_from": "3000000"})...)
	r, err := Build(Input{Run: results.Run{Experiment: "t", Complete: true}, Samples: samples})
	if err != nil {
		t.Fatal(err)
	}
	short := map[string]bool{}
	for _, row := range r.RTT {
		if !row.HighRate() {
			t.Errorf("%s: not a high-rate cell", row.Scenario)
		}
		short[row.Scenario] = row.Short()
	}
	if want := map[string]bool{"veth": false, "macvlan": true, "ebpf": true}; len(short) != 3 || short["veth"] != want["veth"] || !short["macvlan"] || !short["ebpf"] {
		t.Errorf("short cells %v, want %v", short, want)
	}
	md := renderMarkdown(t, r)
	out := md.String()
	for _, want := range []string{"| veth | 1000000 | 990000 | 0.990 | xdp-reflector | 2500000 |  |",
		"| macvlan | 1000000 | 400000 | 0.400 | socket | 2500000 | BELOW 0.95 of the request; xdp could not run: the source's interface macv0 is a macvlan, not a veth |",
		"| ebpf | 1000000 | 940000 | 0.940 | xdp-reflector | 2500000 | BELOW 0.95 of the request; clamped from 3000000 pps to the generator's ceiling |",
		"High-rate cells: 2 of 3 below 0.95 of the requested rate: macvlan (400000 of 1000000 pps), ebpf (940000 of 1000000 pps).",
		"timed at the sender's interface too, at its XDP hooks"} {
		if !strings.Contains(out, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	if got, want := r.highRateBrief(), "High-rate cells: 2 of 3 below 0.95 of the requested rate (achieved 400000-940000 pps of 1000000)"; !strings.HasPrefix(got, want) {
		t.Errorf("first screen line %q, want it to start %q", got, want)
	}
	// None below: the verdict says so, the first screen says nothing.
	r, err = Build(Input{Run: results.Run{Experiment: "t", Complete: true}, Samples: highRateSamples("veth", 0.99e6, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.highRateText(); got != "High-rate cells: all 1 achieved at least 0.95 of the requested rate." {
		t.Errorf("verdict line %q", got)
	}
	if got := r.highRateBrief(); got != "" {
		t.Errorf("first screen line %q for cells that reached their rate", got)
	}
}
