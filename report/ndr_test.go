package report

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/results"
)

func ndrSamples(scenario string, path [][2]float64, limited bool) []results.Sample {
	var out []results.Sample
	add := func(metric string, v float64, l map[string]string) {
		l["frame"] = "64"
		out = append(out, results.Sample{Experiment: "e", Scenario: scenario, Trial: 1, Probe: ndrProbe, Metric: metric, Value: v, Unit: "pps", Labels: l})
	}
	for i, st := range path {
		l := map[string]string{"iteration": strconv.Itoa(i + 1), "pass_ndr": strconv.FormatBool(st[1] == 0)}
		add("trial_offered_pps", st[0], l)
		add("trial_loss", st[1], map[string]string{"iteration": strconv.Itoa(i + 1), "pass_ndr": strconv.FormatBool(st[1] == 0)})
	}
	res := map[string]string{"trials": strconv.Itoa(len(path)), "ndr_converged": "true", "pdr_converged": "true", "pdr_loss": "0.1%"}
	add("generator_calibrated_pps", 400e3, map[string]string{})
	if limited {
		add("generator_max_pps", 104e3, map[string]string{"limited": "true", "reason": "back-pressure", "trials": "1"})
		return out
	}
	add("ndr_pps", 198e3, res)
	add("ndr_bps", 198e3*512, map[string]string{"trials": "3", "ndr_converged": "true", "pdr_converged": "true"})
	add("pdr_pps", 199e3, res)
	add("generator_max_pps", 400e3, map[string]string{"trials": "3"})
	return out
}

func TestNDRSection(t *testing.T) {
	samples := append(ndrSamples("base", [][2]float64{{400e3, 50}, {199e3, 0}, {201e3, 0.5}}, false),
		ndrSamples("shaped", [][2]float64{{104e3, 0}}, true)...)
	r, err := Build(Input{Run: results.Run{Experiment: "e", Complete: true}, Samples: samples,
		Trials: []results.Trial{{Scenario: "base", Trial: 1, Status: "ok"}, {Scenario: "shaped", Trial: 1, Status: "ok"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.NDR) != 2 || len(r.NDR[0].Path) != 3 || r.NDR[0].NDR != 198e3 || !r.NDR[1].Limited {
		t.Fatalf("ndr rows %+v", r.NDR)
	}
	var md strings.Builder
	if err := r.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"No-drop rate", "| base | 64 | 1 | 198.0 |", "not found: back-pressure"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if strings.Contains(md.String(), "not used") {
		t.Errorf("ndr samples reported as not used:\n%s", md.String())
	}
	cs, err := r.charts()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range cs {
		found = found || c.name == "ndr-path"
	}
	if !found {
		t.Error("no ndr-path chart")
	}
}
