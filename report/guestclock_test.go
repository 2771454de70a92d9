package report

import (
	"strings"
	"testing"

	"github.com/sfclab/sfclab/probe/ndr"
	"github.com/sfclab/sfclab/probe/rtt"
	"github.com/sfclab/sfclab/results"
)

// TestGuestClockConst keeps the report's clock label equal to the rtt probe's.
func TestGuestClockConst(t *testing.T) {
	if GuestClock != rtt.GuestClock {
		t.Errorf("report.GuestClock %q, probe/rtt.GuestClock %q", GuestClock, rtt.GuestClock)
	}
}

// TestGuestTimedFigures: rtt cells whose samples carry clock: guest (a VM guest source, timed
// by the guest kernel's socket stamps) and NDR searches whose samples carry a sender label (a
// guest's sendmmsg sender) are said to be so where the report shows them: a note under the
// rtt table and a verdict line naming the cells, a note under the NDR table, the generator table's note's note and the scenario's verdict line. A host-timed cell and a host sender
// are named in none of them.
func TestGuestTimedFigures(t *testing.T) {
	var samples []results.Sample
	for _, sc := range []string{"vm-src", "ns-src"} {
		for _, x := range rttSamples(sc, 0, "cpu", 20, 0.5, 0.01) {
			if sc == "vm-src" {
				x.Labels = with(x.Labels, "clock", rtt.GuestClock)
			}
			samples = append(samples, x)
		}
		for _, x := range ndrSamples(sc, [][2]float64{{40e3, 20}, {20e3, 0}, {30e3, 5}}, false) {
			if sc == "vm-src" && x.Metric != "trial_offered_pps" && x.Metric != "trial_loss" {
				x.Labels = with(x.Labels, "sender", ndr.GuestSender) // on the result samples, as the probe labels them
			}
			samples = append(samples, x)
		}
		samples = append(samples, results.Sample{Scenario: sc, Trial: 1, Probe: ndrProbe, Metric: "generator_ceiling_pps", Value: 50e3, Unit: "pps",
			Labels: map[string]string{"frame": "64", "generator": "sendmmsg", "receiver": "recvmmsg"}})
	}
	r, err := Build(Input{Run: results.Run{Experiment: "e", Complete: true}, Samples: samples,
		Trials: []results.Trial{{Scenario: "vm-src", Trial: 1, Status: "ok"}, {Scenario: "ns-src", Trial: 1, Status: "ok"}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.RTT[0].Clock != GuestClock || r.RTT[1].Clock != "" || r.NDR[0].Sender != ndr.GuestSender || r.NDR[1].Sender != "" {
		t.Fatalf("clock %q, %q; sender %q, %q", r.RTT[0].Clock, r.RTT[1].Clock, r.NDR[0].Sender, r.NDR[1].Sender)
	}
	md := renderMarkdown(t, r).String()
	for _, want := range []string{
		"Timed by the guest's clock (clock: guest): vm-src at 1000. The source of these cells is a VM guest",
		"- Timed by a VM guest's clock (its socket's stamps, the guest's virtual NIC inside the path): vm-src at 1000 ",
		"Sent from a VM guest (sender: " + ndr.GuestSender + "): vm-src. ",
		"| vm-src | 64 | 1 | sendmmsg | recvmmsg | — | — | 50.0 | no | sender: " + ndr.GuestSender + " (guest's clock, its virtual NIC before the chain) |",
		"| ns-src | 64 | 1 | sendmmsg | recvmmsg | — | — | 50.0 | no | — |",
		"(the no-drop rate section has each search's path and its generator; sent from a VM guest (" + ndr.GuestSender + "), its virtual NIC before the chain).",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	for _, l := range strings.Split(md, "\n") {
		if strings.Contains(l, "ns-src") && (strings.Contains(l, "guest's clock") || strings.Contains(l, "from a VM guest")) {
			t.Errorf("ns-src (host-timed, host sender) is said to be a guest's: %s", l)
		}
	}
}
