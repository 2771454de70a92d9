package studies

import (
	"context"
	"github.com/sfclab/sfclab/internal/benchtest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/bench"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/internal/testroot"
	"github.com/sfclab/sfclab/journal"
	nsrt "github.com/sfclab/sfclab/runtime/netns"
)

// TestOpenStackSFCQuickSubset runs a light slice of `reproduce openstack-sfc --quick` for
// real: C0 on four hosts, transparent and routed, C2 routed on one host, Fig. 6 shrunk to
// flows of 1, 2 and 3 s sampled every 500 ms, and the tap on another host than the hop
// before it, one repetition, about seven seconds of traffic. The report must show v4 carrying the sum of the three flows, the tap
// getting its copies across hosts, the modes table with C0's transparent over routed ratio on
// four hosts, and the time-series chart.
func TestOpenStackSFCQuickSubset(t *testing.T) {
	testroot.Require(t, "study C's quick path deploys four emulated hosts with VXLAN and eBPF steering")
	st, err := Get(OpenStackSFC)
	if err != nil {
		t.Fatal(err)
	}
	e, inputs, err := st.Load(Quick, "")
	if err != nil {
		t.Fatal(err)
	}
	keep := map[string]bool{"c0": true, "c0-routed-4hosts": true, "c2-routed": true, "fig6": true, "tap-remote": true}
	var scenarios []*experiment.Scenario
	for _, s := range e.Scenarios {
		if keep[s.Name] {
			scenarios = append(scenarios, s)
		}
	}
	e.Scenarios, e.Repetitions, e.Warmup.Duration = scenarios, 1, 0
	e.Probes.Iperf3.Duration.Duration = time.Second
	fig6 := e.Scenario("fig6").Probes.Flows
	fig6.Interval.Duration = 500 * time.Millisecond
	for i := range fig6.Flows {
		fig6.Flows[i].Duration.Duration = time.Duration(i+1) * time.Second // sfp3 1 s, sfp2 2 s, sfp1 3 s, as the study's 30, 60, 90 s
	}
	if d := e.Scenario("tap-remote").Probes.Flows.Flows[0].Duration.Duration; d != time.Second {
		t.Errorf("quick tap flow lasts %s, want 1s", d)
	}

	dir := t.TempDir()
	r := &bench.Runner{Deployer: &deploy.Deployer{Journal: journal.Journal{Root: t.TempDir()}}, Version: "test", Log: t.Logf}
	out, err := r.Run(context.Background(), e, dir, bench.Files(inputs))
	if err != nil {
		t.Fatal(err)
	}
	if out.Failed > 0 {
		benchtest.LogKeptLogs(t, dir)
		t.Errorf("%d trials failed", out.Failed)
	}
	for _, s := range e.Scenarios {
		if left, _ := (nsrt.Runtime{}).Leftovers(context.Background(), s.Plan.Lab); len(left) > 0 {
			t.Errorf("lab %s left %v", s.Plan.Lab, left)
		}
	}
	var names []string
	for _, s := range e.Scenarios {
		names = append(names, s.Name)
	}
	rep, err := bench.WriteReport(dir, st.Published, names, e.Baseline)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	// The modes table is one table per placement: C2 ran only routed on one host, so its
	// four-host row has no figure and no ratio, and its one-host row the routed figure alone.
	for _, want := range []string{"## Steering check", "## Tap", "## Steering modes and placement", "| C2 | not measured | not measured | — |", "quick smoke run"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if oneHost := regexp.MustCompile(`\| C2 \| not measured \| [0-9]+\.[0-9]{2} [^|]*\| — \|`); !oneHost.Match(md) {
		t.Errorf("report lacks the one-host row of C2 with only its routed figure (%s)", oneHost)
	}
	if _, err := os.Stat(filepath.Join(dir, "flows-fig6.svg")); err != nil {
		t.Errorf("no Fig. 6 chart: %v", err)
	}
	// v4 carries the sum of v1, v2 and v3 in every window (the claim's check, within 10 %).
	for _, c := range st.Published.Claims {
		res := c.Check(rep)
		t.Logf("claim %q: %s (%s)", c.Text, res.Outcome, res.Evidence)
		if strings.HasPrefix(c.Text, "v4") && res.Outcome != "holds" {
			t.Errorf("v4 does not carry the sum: %s", res.Evidence)
		}
	}
	if len(rep.Taps) != 1 || rep.Taps[0].Ratio < 0.9 || rep.Taps[0].Host == rep.Taps[0].PrevHost {
		t.Errorf("tap on another host: %+v", rep.Taps)
	}
	if thr := meanThroughput(rep, "c0"); !(thr > 0) {
		t.Errorf("c0 throughput %v", thr)
	}
	if q, ok := rep.ModeRatio("c0", "c0-routed-4hosts"); !ok || !(q.Value > 0) {
		t.Errorf("c0 over c0-routed-4hosts: %+v, %v", q, ok)
	} else {
		t.Logf("C0 on four hosts, transparent over routed: %s", q.Text())
	}
}
