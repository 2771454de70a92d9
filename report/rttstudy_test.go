package report

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/stats"
)

// TestKendallBinary: the O(n log n) tau-b of a two-valued x equals stats.KendallTauB's, ties
// in y included.
func TestKendallBinary(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{5, 40, 300} {
		for _, levels := range []int{3, 50, 1 << 20} {
			x := make([]bool, n)
			xf := make([]float64, n)
			y := make([]float64, n)
			for i := range n {
				x[i] = rng.IntN(3) == 0
				if x[i] {
					xf[i] = 1
				}
				y[i] = float64(rng.IntN(levels)) + 0.3*xf[i]*float64(rng.IntN(2))
			}
			x[0], xf[0], x[1], xf[1] = true, 1, false, 0
			want, err := stats.KendallTauB(xf, y)
			if err != nil {
				t.Fatal(err)
			}
			gotN, tau, p := kendallBinary(x, y)
			if gotN != n || math.Abs(tau-want.Statistic) > 1e-12 || math.Abs(p-want.PValue) > 1e-9 {
				t.Errorf("n %d, %d levels: tau %g p %g, want %g %g", n, levels, tau, p, want.Statistic, want.PValue)
			}
		}
	}
	if n, _, _ := kendallBinary([]bool{true, true, true}, []float64{1, 2, 3}); n != 0 {
		t.Error("constant x gave a correlation")
	}
}

// studyInput: two drivers, cells of 8 and 32 cpu background nodes on the sender's host, two
// trials of 200 echoes; macvlan's echoes are 0.1 ns slower than veth's, and its host CPU
// 0.01 points higher: differences nobody would call meaningful.
func studyInput() Input {
	in := Input{Run: results.Run{Experiment: "d", Complete: true}}
	for _, driver := range []string{"veth", "macvlan"} {
		shift := map[string]float64{"veth": 0, "macvlan": 1e-7}[driver]
		for _, count := range []int{8, 32} {
			sc := driver + ".bg-cpu-sender-" + strconv.Itoa(count)
			in.Scenarios = append(in.Scenarios, sc)
			for trial := 1; trial <= 2; trial++ {
				for _, s := range rttSamples(sc, count, "cpu", 200, 0.030, 0) {
					s.Trial = trial
					if s.Metric == "path" {
						seq, _ := strconv.Atoi(s.Labels["seq"])
						s.Value = 0.030 + 0.002*float64((seq*37+trial*11)%17) + shift
					}
					in.Samples = append(in.Samples, s)
				}
				for _, m := range []string{"host_usr", "host_sys", "host_soft"} {
					v := 1 + 0.1*float64(trial) + float64(count)/100
					if m == "host_usr" {
						v += shift * 1e5
					}
					in.Samples = append(in.Samples, results.Sample{Scenario: sc, Trial: trial, Probe: "cpu", Metric: m, Unit: "%", Value: v,
						Labels: map[string]string{"host": "sender", "cores": "0"}})
				}
			}
		}
	}
	return in
}

// TestRTTStudyTable3: study D's Wilcoxon tests its way (echoes paired by position) find the
// 0.1 ns difference "significant"; ours, on one value per cell, cannot with two cells, and
// both are reported side by side for RTT and for CPU.
func TestRTTStudyTable3(t *testing.T) {
	r, err := Build(studyInput())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]RTTStudyTest{}
	for _, x := range r.RTTStudyTests {
		got[x.Metric] = x
	}
	rtt, cpu := got["RTT"], got["CPU"]
	if rtt.Side != "sender" || rtt.StudyN != 800 || !(rtt.StudyP < 1e-6) || rtt.OurN != 2 || !(rtt.OurP > 0.05) {
		t.Errorf("RTT row %+v: want 800 echo pairs with p < 1e-6 the study's way, 2 cells with p > 0.05 ours", rtt)
	}
	if cpu.Figure != "busy % of host sender" || cpu.StudyN != 4 || cpu.OurN != 2 || !(cpu.OurP > 0.05) {
		t.Errorf("CPU row %+v: want 4 trial pairs, 2 cells", cpu)
	}
	corr := map[string]RTTStudyCorr{}
	for _, x := range r.RTTStudyCorrs {
		corr[x.Metric+" "+x.Tech] = x
	}
	if c := corr["RTT macvlan"]; c.StudyN != 1600 || c.OurN != 8 || !(c.StudyTau > 0) || c.Figure != FigurePath {
		t.Errorf("Fig. 12 RTT macvlan %+v: want 1600 echoes, 8 trials, tau > 0", c)
	}
	if c := corr["CPU veth"]; c.StudyN != 8 || !(c.StudyTau < 0) || c.OurTau != c.StudyTau {
		t.Errorf("Fig. 12 CPU veth %+v: want 8 readings, tau < 0, both ways equal", c)
	}
	md := renderMarkdown(t, r)
	for _, want := range []string{"Study D's Table 3 as the study computed it", "Study D's Fig. 12 as the study computed it", "| sender | RTT | path | macvlan | veth |", "| sender | CPU | busy % of host sender | macvlan | veth |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
}

// TestRTTStudyLeavesTCGOut: a technology whose scenarios ran VMs under TCG is not compared
// with one on a real CPU in Table 3 or Fig. 12 (no ratio, no test across the TCG line); two
// technologies both under TCG still are.
func TestRTTStudyLeavesTCGOut(t *testing.T) {
	for _, tt := range []struct {
		name     string
		vm       []string // drivers whose scenarios ran on runtime vm
		wantRows bool
	}{
		{"one technology under TCG", []string{"macvlan"}, false},
		{"both under TCG", []string{"veth", "macvlan"}, true},
		{"none", nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := studyInput()
			in.Run.Env = map[string]string{EnvVMAccel: "tcg: no usable /dev/kvm"}
			for _, sc := range in.Scenarios {
				rt := "netns"
				if slices.Contains(tt.vm, strings.Split(sc, ".")[0]) {
					rt = "vm"
				}
				in.Samples = append(in.Samples, results.Sample{Scenario: sc, Trial: 1, Probe: "deploy", Metric: "deploy_time", Unit: "s", Value: 1,
					Labels: map[string]string{"nodes": "3", "runtime": rt}})
			}
			r, err := Build(in)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(r.RTTStudyTests) > 0 || len(r.RTTStudyCorrs) > 0; got != tt.wantRows {
				t.Errorf("Table 3 %+v, Fig. 12 %+v; want rows %v", r.RTTStudyTests, r.RTTStudyCorrs, tt.wantRows)
			}
		})
	}
}

// TestRTTBackgroundFactors: the background nodes' driver and the network load's cap, as the
// runner labels them, split the trends and the box plots' series, and the report says which
// cap ran.
func TestRTTBackgroundFactors(t *testing.T) {
	var samples []results.Sample
	for _, cell := range []struct {
		name, bitrate, driver string
		count                 int
	}{
		{"macvlan.bg-0", "", "", 0},
		{"macvlan.bg-network-sender-8-at-max-on-same", "max", "same", 8},
		{"macvlan.bg-network-sender-8-at-max-on-ebpf-redirect", "max", "ebpf-redirect", 8},
		{"macvlan.bg-network-sender-8-at-100M-on-same", "100M", "same", 8},
		{"macvlan.bg-network-sender-8-at-100M-on-ebpf-redirect", "100M", "ebpf-redirect", 8},
	} {
		for _, s := range rttSamples(cell.name, cell.count, "network", 10, 0.03, 0.001) {
			if s.Metric == "background_nodes" && cell.count > 0 {
				s.Labels["bitrate"], s.Labels["driver"] = cell.bitrate, cell.driver
			}
			samples = append(samples, s)
		}
	}
	r, err := Build(Input{Run: results.Run{Experiment: "d", Complete: true}, Samples: samples})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.RTTTrends) != 4 {
		t.Errorf("%d trends, want one per cap and driver: %+v", len(r.RTTTrends), r.RTTTrends)
	}
	var names []string
	for _, g := range r.RTTBoxes {
		names = append(names, rttBoxName(g)+": "+strings.Join(g.Bases, ", "))
	}
	want := "rtt-box-network-sender-1000-at-max: macvlan (bg same), macvlan (bg ebpf-redirect) | rtt-box-network-sender-1000-at-100M: macvlan (bg same), macvlan (bg ebpf-redirect)"
	if strings.Join(names, " | ") != want {
		t.Errorf("boxes\n got %s\nwant %s", strings.Join(names, " | "), want)
	}
	md := renderMarkdown(t, r)
	for _, w := range []string{"Network background load in this run: unthrottled (bitrate max: iperf3 -u -b 0 per pair", "capped at 100Mbit/s per pair",
		"| macvlan | network (unthrottled), bg on ebpf-redirect | sender |"} {
		if !strings.Contains(md.String(), w) {
			t.Errorf("Markdown lacks %q", w)
		}
	}
}
