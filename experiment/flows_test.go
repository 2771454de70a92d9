package experiment

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// flowsGood is a study C-like experiment: iperf3 for most scenarios, one on one host, and a
// scenario with its own flows probe.
const flowsGood = `name: c
scenarios:
  - {name: c2, lab: LABDIR/t-c2.yaml}
  - {name: c2-1host, lab: LABDIR/t-c2.yaml, single_host: true}
  - name: fig6
    lab: LABDIR/t-fig6.yaml
    probes:
      flows: {interval: 500ms, flows: [{chain: sfp3, bitrate: 1M, duration: 3s}, {chain: sfp1, bitrate: 3M, duration: 9s}]}
probes:
  iperf3: {duration: 2s}
`

func studyCLabs(t *testing.T) string {
	abs, err := filepath.Abs("../experiments/labs/study-c")
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func TestLoadFlowsAndSingleHost(t *testing.T) {
	e, err := Load(write(t, strings.ReplaceAll(flowsGood, "LABDIR", studyCLabs(t))))
	if err != nil {
		t.Fatal(err)
	}
	one := e.Scenario("c2-1host").Plan.Transparent
	if len(one.Hosts) != 1 || one.Node("v6").Host != "contr01" || one.Node("d").Host != "contr01" {
		t.Errorf("single_host: hosts %d, v6 on %s, d on %s", len(one.Hosts), one.Node("v6").Host, one.Node("d").Host)
	}
	if four := e.Scenario("c2").Plan.Transparent; len(four.Hosts) != 4 || four.Node("v6").Host != "comp04" {
		t.Errorf("c2 not on four hosts")
	}
	fig6 := e.Scenario("fig6")
	if pr := e.ProbesOf(fig6); pr.Iperf3 != nil || pr.Flows == nil || pr.Flows.Interval.Duration != 500*time.Millisecond {
		t.Errorf("fig6 probes = %+v", pr)
	}
	if pr := e.ProbesOf(e.Scenario("c2")); pr.Iperf3 == nil || pr.Iperf3.Duration.Duration != 2*time.Second {
		t.Errorf("c2 probes = %+v", pr)
	}
	c := e.ProbesOf(fig6).Flows.Config()
	if len(c.Flows) != 2 || c.Flows[1].Chain != "sfp1" || c.Flows[1].Duration != 9*time.Second {
		t.Errorf("flows config = %+v", c)
	}
}

func TestLoadFlowsBad(t *testing.T) {
	for _, tt := range []struct{ name, from, to, want string }{
		{"unknown chain", "chain: sfp3,", "chain: sfp9,", `no such port chain`},
		{"same port twice", "chain: sfp1,", "chain: sfp3,", "both use destination port 5203"},
		{"short flow", "duration: 3s", "duration: 500ms", "must be 1s-1h"},
		{"no chain", "{chain: sfp3, ", "{", "every flow needs chain"},
		{"flows on a chain without one port", "lab: LABDIR/t-fig6.yaml\n    probes:\n      flows: {interval: 500ms, flows: [{chain: sfp3, bitrate: 1M, duration: 3s}, {chain: sfp1,",
			"lab: LABDIR/t-c2.yaml\n    probes:\n      flows: {interval: 500ms, flows: [{chain: c2, bitrate: 1M, duration: 3s}, {chain: c3,", "one destination port"},
		{"single host of a routed lab", "LABDIR/t-c2.yaml, single_host", "LABDIR/r-c2.yaml, single_host", "has no emulated hosts"},
		{"empty probes", "probes:\n      flows: {interval: 500ms, flows: [{chain: sfp3, bitrate: 1M, duration: 3s}, {chain: sfp1, bitrate: 3M, duration: 9s}]}", "probes: {cpu: false}", "probes: is empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			text := strings.Replace(flowsGood, tt.from, tt.to, 1)
			if text == flowsGood {
				t.Fatalf("%q not in the experiment", tt.from)
			}
			_, err := Load(write(t, strings.ReplaceAll(text, "LABDIR", studyCLabs(t))))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
