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

// TestHostCPU: per-host samples of two trials become one row per scenario and host, with the
// busy share summarized over trials, and a table in the rtt section; none is an ignored note.
func TestHostCPU(t *testing.T) {
	samples := rttSamples("veth.bg-0", 0, "", 5, 0.02, 0.001)
	host := func(trial int, h, metric, unit string, v float64) results.Sample {
		return results.Sample{Scenario: "veth.bg-0", Trial: trial, Probe: "cpu", Metric: metric, Unit: unit, Value: v,
			Labels: map[string]string{"host": h, "cores": map[string]string{"sender": "0", "responder": "1"}[h]}}
	}
	for trial, usr := range map[int]float64{1: 10, 2: 20} {
		for _, h := range []string{"responder", "sender"} {
			samples = append(samples, host(trial, h, "host_usr", "%", usr), host(trial, h, "host_sys", "%", 5),
				host(trial, h, "host_soft", "%", 1), host(trial, h, "host_nodes_user", "cores", 0.1), host(trial, h, "host_nodes_system", "cores", 0.05))
		}
	}
	r, err := Build(Input{Run: results.Run{Experiment: "t", Complete: true}, Samples: samples})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.HostCPU) != 2 || r.HostCPU[0].Host != "responder" || r.HostCPU[1].Cores != "0" {
		t.Fatalf("rows %+v", r.HostCPU)
	}
	x := r.HostCPU[1]
	if x.Usr != 15 || x.Sys != 5 || x.Soft != 1 || x.Busy.N != 2 || x.Busy.Min != 16 || x.Busy.Max != 26 || x.NodesUser != 0.1 {
		t.Errorf("sender row %+v", x)
	}
	var md bytes.Buffer
	if err := r.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CPU per emulated host", "| veth.bg-0 | sender | 0 | 15.00 | 5.00 | 1.00 | 16.00 | 21.00 | 26.00 |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	for _, n := range r.Notes {
		if strings.Contains(n, "host_") {
			t.Errorf("note about host samples: %s", n)
		}
	}
}
