package bench

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/results"
)

const gridExp = `name: t-grid
repetitions: 1
scenarios:
  - {name: veth, lab: base.yaml}
  - {name: macvlan, lab: mv.yaml}
background: {count: [0, 4], kind: [cpu, network], host: sender, bitrate: 20M}
probes:
  rtt: {rate: [1k, max], count: 100}
`

const mvLab = "name: t-bm\nlinks: bridge\nendpoints: {client: {driver: macvlan}, server: {}}\nchains: [{from: client, to: server}]\n"

// TestBenchGrid runs the grid driver x background (count x kind) x rate with the rtt probe:
// every cell deployed once, the background nodes removed after each trial.
func TestBenchGrid(t *testing.T) {
	requireRoot(t)
	e, err := experiment.Load(writeExperiment(t, gridExp, map[string]string{"base.yaml": baseLab, "mv.yaml": mvLab}))
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Scenarios) != 6 || e.Baseline != "veth.bg-0" {
		t.Fatalf("%d scenarios, baseline %q", len(e.Scenarios), e.Baseline)
	}
	out := filepath.Join(t.TempDir(), "run")
	outcome, err := runner(t).Run(context.Background(), e, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	assertNoLabs(t, "t-bb", "t-bm")
	if outcome.Trials != 6 || outcome.Failed != 0 {
		t.Fatalf("outcome %+v", outcome)
	}
	store, err := results.Open(filepath.Join(out, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	samples, _ := store.Samples()
	store.Close()
	rtts := map[string]int{}
	bg := map[string]float64{}
	for _, s := range samples {
		if s.Probe == "rtt" && s.Metric == "rtt" {
			rtts[s.Scenario+"@"+s.Labels["rate"]]++
		}
		if s.Probe == "load" && s.Metric == "background_nodes" {
			bg[s.Scenario] = s.Value
			// Which cap ran is recorded with the network cells (the report says it).
			if want := map[bool]string{true: "20M"}[s.Labels["kind"] == "network"]; s.Labels["bitrate"] != want {
				t.Errorf("%s: background bitrate label %q, want %q", s.Scenario, s.Labels["bitrate"], want)
			}
		}
	}
	for _, sc := range []string{"veth.bg-0", "veth.bg-cpu-sender-4", "veth.bg-network-sender-4", "macvlan.bg-0", "macvlan.bg-cpu-sender-4", "macvlan.bg-network-sender-4"} {
		for _, rate := range []string{"1000", "max"} {
			if rtts[sc+"@"+rate] < 90 {
				t.Errorf("%s at rate %s: %d rtt samples of 100", sc, rate, rtts[sc+"@"+rate])
			}
		}
	}
	if bg["veth.bg-network-sender-4"] != 4 || bg["macvlan.bg-0"] != 0 {
		t.Errorf("background_nodes samples %v", bg)
	}
}
