package report

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/results"
)

// TestHTTPTCGNoChange: study B's HTTP figures of a VM scenario are set against the native
// baseline only when the VM had a real CPU (KVM). Under TCG the scenario's change is not
// computed, and no table, verdict line, headline or figure gives one: the HTTP tables say
// "not comparable (TCG)", the verdict says why. With KVM the same data is compared.
func TestHTTPTCGNoChange(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	totals := map[string][]float64{"native-nocache": {1.0, 1.1}, "kvm-nocache": {3.0, 3.2}, "native-cache": {0.5, 0.6}}
	runtimes := map[string]string{"native-nocache": "netns", "kvm-nocache": "vm", "native-cache": "netns"}
	build := func(t *testing.T, vmAccel string) *Report {
		in := Input{Run: results.Run{Experiment: "b", Study: "http-proxy", Started: t0, Ended: t0.Add(time.Hour), Complete: true,
			Env: map[string]string{EnvVMAccel: vmAccel}}, Baseline: "native-nocache",
			Scenarios: []string{"native-nocache", "kvm-nocache", "native-cache"},
			Published: &Published{HTTPRequests: 100, HTTPBaselines: map[string]string{"kvm-cache": "native-cache"}, HTTP: []PublishedHTTP{
				{Scenario: "native-nocache", Object: "1k", Concurrency: 1, Seconds: 10},
				{Scenario: "kvm-nocache", Object: "1k", Concurrency: 1, Seconds: 15},
				{Scenario: "native-cache", Object: "1k", Concurrency: 1, Seconds: 5},
				{Scenario: "kvm-cache", Object: "1k", Concurrency: 1, Seconds: 8},
			}}}
		for _, sc := range in.Scenarios {
			for i, v := range totals[sc] {
				trial := i + 1
				in.Trials = append(in.Trials, results.Trial{Experiment: "b", Scenario: sc, Trial: trial, Status: results.TrialOK, Started: t0, Ended: t0})
				labels := map[string]string{"object": "1k", "concurrency": "1", "via": "proxy", "keepalive": "false"}
				add := func(probe, metric, unit string, v float64, l map[string]string) {
					in.Samples = append(in.Samples, results.Sample{Experiment: "b", Scenario: sc, Trial: trial, Probe: probe, Metric: metric, Unit: unit, Value: v, Time: t0, Labels: l})
				}
				add("deploy", MetricDeployTime, "s", 0.3, map[string]string{"runtime": runtimes[sc], "nodes": "3"})
				add("http", "total_time", "s", v, labels)
				add("http", "requests", "count", 100, labels)
			}
		}
		r, err := Build(in)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tt := range []struct {
		name     string
		accel    string
		compared bool
	}{
		{"kvm: compared", "kvm: vmx", true},
		{"tcg: not compared", "tcg: no usable KVM", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := build(t, tt.accel)
			var kvm *HTTPRow
			for i := range r.HTTP {
				if r.HTTP[i].Scenario == "kvm-nocache" {
					kvm = &r.HTTP[i]
				}
			}
			if kvm == nil || kvm.TotalTime.N != 2 {
				t.Fatalf("no measured HTTP row of kvm-nocache: %+v", r.HTTP)
			}
			if got := !math.IsNaN(kvm.Change); got != tt.compared {
				t.Errorf("kvm-nocache's change %v: computed %v, want %v", kvm.Change, got, tt.compared)
			}
			var md strings.Builder
			if err := r.Markdown(&md); err != nil {
				t.Fatal(err)
			}
			out := md.String()
			verdict := section2(out, "## Verdict")
			// The change is (3.1 - 1.05) / 1.05 = +195.2 %.
			for _, s := range []string{"+195.2 %", "HTTP total time +195.2 % against native-nocache"} {
				if got := strings.Contains(out, s); got != tt.compared {
					t.Errorf("report contains %q: %v, want %v", s, got, tt.compared)
				}
			}
			says := "HTTP total time not set against native-nocache (not comparable (TCG))"
			if got := strings.Contains(verdict, says); got == tt.compared {
				t.Errorf("verdict says %q: %v, want %v:\n%s", says, got, !tt.compared, verdict)
			}
			if got := strings.Contains(section2(out, "## HTTP load"), "| "+notComparable+" |"); got == tt.compared {
				t.Errorf("HTTP load table says %q: %v, want %v", notComparable, got, !tt.compared)
			}
			if got := strings.Contains(section2(out, "### Published vs measured (HTTP)"), "| "+notComparable+" |"); got == tt.compared {
				t.Errorf("published vs measured (HTTP) says %q: %v, want %v", notComparable, got, !tt.compared)
			}
			// The headline's range is of platforms only: native-cache's change is the cache's.
			headline := strings.Contains(verdict, "Published vs measured (HTTP, 1 cells measured by both)")
			if headline != tt.compared {
				t.Errorf("verdict's published-vs-measured headline over kvm-nocache's cell: %v, want %v", headline, tt.compared)
			}
			if strings.Contains(verdict, "2 cells measured by both") {
				t.Errorf("the headline counts native-cache, the baseline of kvm-cache, as a platform:\n%s", verdict)
			}
			figure := false
			for _, f := range r.defaultFigures() {
				figure = figure || f.Metric == FigureHTTPChange
			}
			if figure != tt.compared {
				t.Errorf("an HTTP change figure drawn: %v, want %v", figure, tt.compared)
			}
		})
	}
}

// section2 is the part of a Markdown report from the heading head to the next heading of
// the same or a higher level.
func section2(md, head string) string {
	i := strings.Index(md, head+"\n")
	if i < 0 {
		return ""
	}
	rest := md[i+len(head)+1:]
	level := strings.Count(strings.Fields(head)[0], "#")
	for _, l := range strings.SplitAfter(rest, "\n") {
		if h := strings.Fields(l); len(h) > 0 && strings.Trim(h[0], "#") == "" && len(h[0]) <= level {
			return rest[:strings.Index(rest, l)]
		}
	}
	return rest
}
