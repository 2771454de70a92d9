package report

import (
	"strings"
	"testing"

	"github.com/sfclab/sfclab/results"
)

// TestRTTNDRTCGMark: rtt and ndr figures of a scenario that ran VMs under TCG (a VM
// destination answering rtt's echoes, counting ndr's search) carry the mark in their tables,
// those of a namespace scenario do not.
func TestRTTNDRTCGMark(t *testing.T) {
	var samples []results.Sample
	for _, sc := range []struct{ name, runtime string }{{"vm-server", "netns/vm"}, {"netns", "netns"}} {
		for _, rt := range strings.Split(sc.runtime, "/") {
			samples = append(samples, results.Sample{Scenario: sc.name, Trial: 1, Probe: "deploy", Metric: MetricDeployTime, Value: 2, Unit: "s",
				Labels: map[string]string{"nodes": "3", "runtime": rt}})
		}
		samples = append(samples, rttSamples(sc.name, 0, "cpu", 20, 0.5, 0.01)...)
		samples = append(samples, ndrSamples(sc.name, [][2]float64{{40e3, 20}, {20e3, 0}, {30e3, 5}}, false)...)
	}
	r, err := Build(Input{Run: results.Run{Experiment: "e", Complete: true, Env: map[string]string{EnvVMAccel: "tcg: no KVM"}}, Samples: samples,
		Trials: []results.Trial{{Scenario: "vm-server", Trial: 1, Status: "ok"}, {Scenario: "netns", Trial: 1, Status: "ok"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Emulated("vm-server") || r.Emulated("netns") {
		t.Fatalf("Emulated: vm-server %v, netns %v", r.Emulated("vm-server"), r.Emulated("netns"))
	}
	var md strings.Builder
	if err := r.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	marked := "vm-server (" + EmulatedMark + ")"
	for _, sec := range []section{r.rttSection(), r.ndrSection()} {
		var cells []string
		for _, b := range sec.blocks {
			if b.table == nil {
				continue
			}
			for _, row := range b.table.rows {
				cells = append(cells, row[0])
			}
		}
		if !contains(cells, marked) || !contains(cells, "netns") || contains(cells, "vm-server") {
			t.Errorf("%s: scenario cells %q; want %q and netns", sec.title, cells, marked)
		}
	}
}

func contains(v []string, s string) bool {
	for _, x := range v {
		if x == s {
			return true
		}
	}
	return false
}
