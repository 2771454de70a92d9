package report

import (
	"fmt"
	"image/color"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/results"
)

// hexColour is c as vgsvg writes it in a chart's SVG.
func hexColour(c color.NRGBA) string { return fmt.Sprintf("#%02X%02X%02X", c.R, c.G, c.B) }

// chartSVGs renders r's charts and returns their SVGs by name.
func chartSVGs(t *testing.T, r *Report) map[string]string {
	t.Helper()
	cs, err := r.charts()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range cs {
		out[c.name] = string(c.svg)
	}
	return out
}

// TestSeriesStyle: a key gets one style however often it is asked for, and the first
// len(seriesPalette)*len(seriesDashes) keys get different ones, none in the TCG colour.
func TestSeriesStyle(t *testing.T) {
	r := &Report{}
	seen := map[string]string{}
	n := len(seriesPalette) * len(seriesDashes)
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("s%d", i)
		st := r.seriesStyle(key)
		if st.colour == tcgColour {
			t.Errorf("%s has the TCG colour", key)
		}
		id := fmt.Sprint(st.colour, st.dashes)
		if other, ok := seen[id]; ok {
			t.Errorf("%s and %s share the style %s", key, other, id)
		}
		seen[id] = key
	}
	if a, b := r.seriesStyle("s3"), r.seriesStyle("s3"); a.colour != b.colour || fmt.Sprint(a.dashes) != fmt.Sprint(b.dashes) {
		t.Errorf("s3 styled %v, then %v", a, b)
	}
}

// TestTCGSeriesColourAcrossFigures: a scenario whose VMs ran under TCG is drawn in the TCG
// colour (the throughput chart's orange) in every study figure, whether the figure also has
// scenarios on a real CPU (study C's Table I) or only TCG ones (Table II). Before, the colour
// was the series' place: orange beside a plain series, blue alone.
func TestTCGSeriesColourAcrossFigures(t *testing.T) {
	in := sampleInput()
	in.Run.Env[EnvVMAccel] = "tcg: PVM host"
	in.Published.Figures = []Figure{
		{Name: "all", Metric: MetricThroughput, Scenarios: []string{"baseline", "fw", "fw-lb"}, Title: "all three"},
		{Name: "fw", Metric: MetricThroughput, Scenarios: []string{"fw"}, Title: "fw alone"},
	}
	for trial := 1; trial <= 3; trial++ {
		for _, sc := range in.Scenarios {
			rt := "netns"
			if sc == "fw" {
				rt = "vm"
			}
			in.Samples = append(in.Samples, results.Sample{Experiment: exp, Scenario: sc, Trial: trial, Probe: "deploy", Metric: "deploy_time",
				Unit: "s", Value: 1, Time: t0, Labels: map[string]string{"runtime": rt}})
		}
	}
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	svgs := chartSVGs(t, r)
	tcg, plain := hexColour(tcgColour), hexColour(palette[0])
	for _, name := range []string{"study-all", "study-fw", "throughput"} {
		if !strings.Contains(svgs[name], tcg) {
			t.Errorf("%s: fw (TCG) is not drawn in %s", name, tcg)
		}
	}
	if !strings.Contains(svgs["study-all"], plain) {
		t.Errorf("study-all: baseline and fw-lb are not drawn in %s", plain)
	}
	if strings.Contains(svgs["study-fw"], plain) {
		t.Errorf("study-fw: fw (TCG) alone is drawn in %s, the colour of the plain series elsewhere", plain)
	}
	if !strings.Contains(svgs["study-fw"], "this run, "+EmulatedMark) {
		t.Error("study-fw: the legend lacks the TCG mark")
	}
}

// TestSeriesColourByNameAcrossCharts: a series named by a node or a scenario has one colour
// in every chart of the report: v6 in Fig. 6's flows chart (its 6th line) and in tap-local's
// (its 1st; before, each took the colour of its place), and a TCG scenario's CDF line and
// legend are marked.
func TestSeriesColourByNameAcrossCharts(t *testing.T) {
	in := flowsInput()
	in.Run.Env[EnvVMAccel] = "tcg: PVM host"
	for trial := 1; trial <= 2; trial++ {
		for s := 1; s <= 3; s++ {
			in.Samples = append(in.Samples, results.Sample{Scenario: "tap-local", Trial: trial, Probe: "flows", Metric: "egress_rate", Unit: "bit/s", Value: 10e6, Time: t0,
				Labels: map[string]string{"node": "v6", "host": "comp04", "t": fmt.Sprint(s)}})
		}
	}
	for _, sc := range in.Scenarios {
		rt := "netns"
		if sc == "c2" {
			rt = "vm"
		}
		for trial := 1; trial <= 2; trial++ {
			in.Samples = append(in.Samples,
				results.Sample{Scenario: sc, Trial: trial, Probe: "deploy", Metric: "deploy_time", Unit: "s", Value: 1, Time: t0, Labels: map[string]string{"runtime": rt}})
			if sc == "c0" || sc == "c2" {
				for k := 1; k <= 5; k++ {
					in.Samples = append(in.Samples, results.Sample{Scenario: sc, Trial: trial, Probe: "tcprtt", Metric: "rtt", Unit: "ms", Value: 0.1 * float64(k), Time: t0})
				}
			}
		}
	}
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	svgs := chartSVGs(t, r)
	v6 := hexColour(r.seriesStyle("node:v6").colour)
	if v6 == hexColour(seriesPalette[0]) {
		t.Fatalf("v6 has the first colour, which tap-local's first line had before")
	}
	for _, name := range []string{"flows-fig6", "flows-tap-local"} {
		if !strings.Contains(svgs[name], v6) {
			t.Errorf("%s: v6 is not drawn in its colour %s", name, v6)
		}
	}
	cdf := svgs[chartName(MetricTCPRTT)]
	c2 := hexColour(r.seriesStyle("c2").colour)
	if !strings.Contains(cdf, c2) || !strings.Contains(cdf, "c2 (TCG) (n=10)") || !strings.Contains(cdf, "(TCG): VMs under TCG, "+EmulatedMark) {
		t.Errorf("TCP RTT CDF: c2 (TCG) in %s with the mark in its legend and title expected", c2)
	}
	// The caption under each chart (HTML) says what the short mark means where the chart's
	// legend has it (the CDF here), as the chart's own title does.
	cs, _ := r.charts()
	captioned := 0
	for _, c := range cs {
		if !strings.Contains(string(c.svg), "(TCG): VMs under TCG") {
			continue
		}
		captioned++
		if !strings.Contains(c.title, EmulatedMark) {
			t.Errorf("chart %s: its legend marks TCG entries, its caption %q does not say so", c.name, c.title)
		}
	}
	if captioned == 0 {
		t.Error("no chart with TCG entries in its legend; the TCP RTT CDF has c2's")
	}
}
