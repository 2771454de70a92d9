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

// TestNDRSectionAtLeast: a search that lost nothing at its max rate, or below a rate its
// generator could not hold, is a lower bound, shown as "≥", never as a drop point; the
// lowest losing rate and receiver drops are shown.
func TestNDRSectionAtLeast(t *testing.T) {
	l := func(bound, stopped string) map[string]string {
		m := map[string]string{"frame": "64", "trials": "3", "ndr_converged": "false", "pdr_converged": "false", "pdr_loss": "0.1%",
			"ndr_bound": bound, "pdr_bound": bound, "ndr_hi_pps": "0", "receiver_drops": "17", "inconsistent_trials": "1"}
		if stopped != "" {
			m["stopped"] = stopped
		}
		return m
	}
	var samples []results.Sample
	scs := []struct{ name, bound, stopped string }{{"atmax", "at least", ""}, {"found", "found", ""},
		{"short", "found", "no loss below 800.0 kpps, which the generator could not hold"}}
	for _, sc := range scs {
		for _, m := range []string{"ndr_pps", "pdr_pps"} {
			samples = append(samples, results.Sample{Experiment: "e", Scenario: sc.name, Trial: 1, Probe: ndrProbe, Metric: m, Value: 1e6, Unit: "pps", Labels: l(sc.bound, sc.stopped)})
		}
	}
	r, err := Build(Input{Run: results.Run{Experiment: "e", Complete: true}, Samples: samples,
		Trials: []results.Trial{{Scenario: "atmax", Trial: 1, Status: "ok"}, {Scenario: "found", Trial: 1, Status: "ok"}, {Scenario: "short", Trial: 1, Status: "ok"}}})
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	if err := r.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| atmax | 64 | 1 | ≥ 1000.0 (no loss at the max rate) |", "| found | 64 | 1 | 1000.0 (not converged) |", "| 1 | 17 |",
		"| short | 64 | 1 | ≥ 1000.0 (no loss below 800.0 kpps, which the generator could not hold) |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}

// TestNDRGeneratorTable: the generator's method, the receiver, the sender's and the receiving
// side's CPUs, the ceiling and a clamp are in the report; a socket-path search says why the
// XDP generator could not run, and a search recorded without these labels gets no row.
func TestNDRGeneratorTable(t *testing.T) {
	label := func(samples []results.Sample, kv map[string]string) []results.Sample {
		for _, s := range samples {
			for k, v := range kv {
				s.Labels[k] = v
			}
		}
		return samples
	}
	ceiling := func(scenario string, v float64) results.Sample {
		return results.Sample{Experiment: "e", Scenario: scenario, Trial: 1, Probe: ndrProbe, Metric: "generator_ceiling_pps", Value: v, Unit: "pps",
			Labels: map[string]string{"frame": "64"}}
	}
	xdp := map[string]string{"generator": "xdp", "receiver": "xdp-counter", "sender_cpu": "0", "receive_cpu": "1",
		"placement": "sender on CPU 0, next node's receive processing (threaded NAPI on eth0, SCHED_FIFO) on CPU 1", "max_rate_clamped_from": "3000000"}
	sock := map[string]string{"generator": "sendmmsg", "receiver": "recvmmsg", "fallback_reason": "frame size 9000 above 1518 bytes (one page per frame)"}
	var samples []results.Sample
	samples = append(samples, label(append(ndrSamples("fwd", [][2]float64{{400e3, 50}, {199e3, 0}}, false), ceiling("fwd", 2.5e6)), xdp)...)
	samples = append(samples, label(append(ndrSamples("jumbo", [][2]float64{{104e3, 0}}, true), ceiling("jumbo", 380e3)), sock)...)
	samples = append(samples, ndrSamples("old", [][2]float64{{104e3, 0}}, true)...)
	r, err := Build(Input{Run: results.Run{Experiment: "e", Complete: true}, Samples: samples})
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	if err := r.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	for _, want := range []string{
		"| fwd | 64 | 1 | xdp | xdp-counter | 0 | 1 | 2500.0 | from 3000000 pps | sender on CPU 0, next node's receive processing (threaded NAPI on eth0, SCHED_FIFO) on CPU 1 |",
		"| jumbo | 64 | 1 | sendmmsg | recvmmsg | — | — | 380.0 | no | the xdp generator could not run: frame size 9000 above 1518 bytes (one page per frame) |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "| old | 64 | 1 | ") != 1 {
		t.Errorf("a search without generator labels has a generator row:\n%s", out)
	}
}

// TestNDRDisturbedNote: a search whose trials were re-run because the chain's receiving side
// was held off its CPU says so in the generator table's note; one with none re-run (or not
// watched) adds nothing.
func TestNDRDisturbedNote(t *testing.T) {
	for _, tc := range []struct {
		label, want string
		shown       bool
	}{
		{"2, 1 kept as loss", "disturbed trials re-run: 2, 1 kept as loss", true},
		{"0, 0 kept as loss", "disturbed trials re-run", false},
		{"", "disturbed trials re-run", false},
	} {
		samples := ndrSamples("base", [][2]float64{{400e3, 50}, {199e3, 0}}, false)
		for i := range samples {
			switch samples[i].Metric {
			case "ndr_pps":
				if tc.label != "" {
					samples[i].Labels["disturbed_trials"] = tc.label
				}
			case "generator_max_pps":
				samples = append(samples, results.Sample{Experiment: "e", Scenario: "base", Trial: 1, Probe: ndrProbe, Metric: "generator_ceiling_pps", Value: 1e6, Unit: "pps",
					Labels: map[string]string{"frame": "64", "generator": "xdp", "receiver": "xdp-counter", "sender_cpu": "0", "receive_cpu": "1"}})
			}
		}
		r, err := Build(Input{Run: results.Run{Experiment: "e", Complete: true}, Samples: samples,
			Trials: []results.Trial{{Scenario: "base", Trial: 1, Status: "ok"}}})
		if err != nil {
			t.Fatal(err)
		}
		var md strings.Builder
		if err := r.Markdown(&md); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(md.String(), tc.want); got != tc.shown {
			t.Errorf("label %q: %q shown %v, want %v:\n%s", tc.label, tc.want, got, tc.shown, md.String())
		}
	}
}

// TestNDRLimitText: a search with no drop point says why; a guest sender's back-pressure
// does not blame the chain alone (its calibration went into its own guest, not through its
// emulated NIC), a host sender's does.
func TestNDRLimitText(t *testing.T) {
	for _, tc := range []struct {
		reason, sender, want, not string
	}{
		{"back-pressure", "", "the chain slowed the sender", "guest"},
		{"back-pressure", "sendmmsg in the guest (its agent)", "its virtual NIC or the chain", "the chain slowed the sender"},
		{"generator", "", "generator-limited", "back-pressure"},
		{"generator", "sendmmsg in the guest (its agent)", "generator-limited", "back-pressure"},
	} {
		got := NDRRow{Limited: true, Reason: tc.reason, Sender: tc.sender}.ndrText()
		if !strings.Contains(got, tc.want) || strings.Contains(got, tc.not) {
			t.Errorf("reason %q, sender %q: %q; want %q and not %q", tc.reason, tc.sender, got, tc.want, tc.not)
		}
	}
}
