package studies

import (
	"bytes"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/results"
)

// TestOpenStackSFCModesMatch checks that every case of study C's modes table compares like
// with like: each scenario it names is in the experiment, the four columns send S's traffic
// through the same functions in the same order, the routed four-host lab puts every node on
// the host the transparent lab does (so both cross hosts at the same hops), and the one-host
// columns put every node on one host or none.
func TestOpenStackSFCModesMatch(t *testing.T) {
	st, err := Get(OpenStackSFC)
	if err != nil {
		t.Fatal(err)
	}
	e, _, err := st.Load(Full, "")
	if err != nil {
		t.Fatal(err)
	}
	m := st.Published.Modes
	want := []string{"transparent, 4 hosts", "routed, 4 hosts", "transparent, 1 host", "routed, 1 host"}
	if !slices.Equal(m.Columns, want) {
		t.Fatalf("columns %q, want %q (the checks below index them)", m.Columns, want)
	}
	hostOf := func(p *plan.Plan, node string) string {
		if h := p.HostOf(node); h != nil {
			return h.Name
		}
		return ""
	}
	for _, row := range m.Rows {
		t.Run(row.Case, func(t *testing.T) {
			if len(row.Scenarios) != len(m.Columns) {
				t.Fatalf("%d scenarios for %d columns", len(row.Scenarios), len(m.Columns))
			}
			var ref []string
			for i, name := range row.Scenarios {
				if name == "" {
					continue
				}
				s := e.Scenario(name)
				if s == nil {
					t.Fatalf("column %q: no scenario %q in %s", m.Columns[i], name, st.Experiment)
				}
				c, err := s.Plan.ProbeChain(s.Chain)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if ref == nil {
					ref = c.Path
				} else if !slices.Equal(c.Path, ref) {
					t.Errorf("%s goes %v, %s goes %v", name, c.Path, row.Scenarios[0], ref)
				}
				hosts := map[string]bool{}
				for _, n := range c.Path {
					hosts[hostOf(s.Plan, n)] = true
				}
				switch i {
				case 0:
					if len(hosts) < 2 {
						t.Errorf("%s: every node on one host %v", name, hosts)
					}
				case 1:
					four := e.Scenario(row.Scenarios[0]).Plan
					if got, want := len(s.Plan.AllHosts()), len(four.AllHosts()); got != want {
						t.Errorf("%s has %d hosts, %s %d", name, got, row.Scenarios[0], want)
					}
					for _, n := range c.Path {
						if got, want := hostOf(s.Plan, n), hostOf(four, n); got != want || got == "" {
							t.Errorf("%s: %s on host %q, in %s on %q", name, n, got, row.Scenarios[0], want)
						}
					}
				default:
					if len(hosts) != 1 {
						t.Errorf("%s: nodes on hosts %v, want one", name, hosts)
					}
				}
			}
		})
	}
}

var htmlSampleC = flag.String("html-sample-c", "", "also write the HTML report of a synthetic study C run with VM functions under TCG to this file")

// studyCVMRun is a synthetic run of study C's data plane with --vm under TCG: its 35
// scenarios (those of the modes table, Fig. 6 and the taps), every one but C0's four on
// runtime vm, three repetitions; Fig. 6's v4 carries the three flows, the taps get all.
func studyCVMRun() report.Input {
	pub := Published(OpenStackSFC)
	in := runC3(nil, 1, 1)
	in.Run.Env = map[string]string{report.EnvVMAccel: "tcg: PVM host", "cores": "2"}
	in.Scenarios = nil
	thr := map[string]int{}
	for _, row := range pub.Modes.Rows {
		for k, sc := range row.Scenarios {
			if sc != "" {
				in.Scenarios = append(in.Scenarios, sc)
				thr[sc] = k
			}
		}
	}
	in.Scenarios = append(in.Scenarios, "fig6", "tap-local", "tap-remote")
	in.Trials = nil
	for _, sc := range in.Scenarios {
		rt := "vm"
		if strings.HasPrefix(sc, "c0") {
			rt = "netns"
		}
		for trial := 1; trial <= 3; trial++ {
			in.Trials = append(in.Trials, results.Trial{Experiment: "c", Scenario: sc, Trial: trial, Status: results.TrialOK, Started: in.Run.Started, Ended: in.Run.Started})
			in.Samples = append(in.Samples, results.Sample{Experiment: "c", Scenario: sc, Trial: trial, Probe: "deploy", Metric: "deploy_time", Unit: "s", Value: 5,
				Time: in.Run.Started, Labels: map[string]string{"runtime": rt}})
			if k, ok := thr[sc]; ok {
				// Throughput falls along the chain and is higher on one host, a little apart per trial.
				n := 0.0
				if len(sc) > 1 && sc[0] == 'c' && sc[1] >= '0' && sc[1] <= '9' {
					n = float64(sc[1] - '0')
				}
				g := (12 - 1.5*n + 2*float64(k)) * (1 + 0.01*float64(trial))
				in.Samples = append(in.Samples, results.Sample{Experiment: "c", Scenario: sc, Trial: trial, Probe: "iperf3", Metric: "throughput", Unit: "bit/s", Value: g * 1e9,
					Time: in.Run.Started, Labels: map[string]string{"side": "receiver", "protocol": "tcp", "streams": "1"}})
			}
		}
	}
	return in
}

// TestOpenStackSFCModesFitAPage renders study C's modes table from a run with VM functions
// under TCG (every figure but C0's marked): it is split per placement, and no Markdown row is
// wider than 110 characters (the one table of four modes and two ratios, the full mark in
// every cell, was over 300: twice a 1280-pixel page in HTML).
func TestOpenStackSFCModesFitAPage(t *testing.T) {
	const maxRow = 110
	in := studyCVMRun()
	pub := in.Published
	r, err := report.Build(in)
	if err != nil {
		t.Fatal(err)
	}
	var md, page bytes.Buffer
	if err := r.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	if *htmlSampleC != "" {
		if err := r.HTML(&page); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*htmlSampleC, page.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", *htmlSampleC)
	}
	_, sec, ok := strings.Cut(md.String(), "\n## "+pub.Modes.Title+"\n")
	if !ok {
		t.Fatalf("no modes section:\n%s", md.String())
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	tables, rows := 0, 0
	for _, l := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(l, "|") {
			continue
		}
		if strings.HasPrefix(l, "| case |") {
			tables++
		}
		rows++
		if n := len([]rune(l)); n > maxRow {
			t.Errorf("modes row of %d characters, want at most %d: %s", n, maxRow, l)
		}
	}
	// Two tables: four hosts (9 cases), one host (7); each a header and separator line too.
	if tables != 2 || rows != 9+7+4 {
		t.Errorf("%d tables, %d table lines in the modes section, want 2 and 20:\n%s", tables, rows, sec)
	}
	if !strings.Contains(sec, report.EmulatedMark) {
		t.Errorf("the modes section does not spell out the TCG mark:\n%s", sec)
	}
}
