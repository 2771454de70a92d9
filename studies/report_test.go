package studies

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/results"
)

// devLiterals are figures and host facts of sfclab's development runs (docs/
// study-b-development.md); no user's report may print them.
var devLiterals = []string{"+70 %", "0.77 vs 0.44 ms", "this engine", "20.10", "this shared 2-core host",
	"Cgroup Version 1", "fuse-overlayfs storage driver, cgroup v1", "not available on this host", "1.72, 1.86"}

// TestReportStatesOnlyRecordedHostFacts builds every study's report from a run whose
// environment names an invented host: the report states that host's facts and none of the
// development host's figures.
func TestReportStatesOnlyRecordedHostFacts(t *testing.T) {
	env := map[string]string{"docker": "TEST-ENGINE 9.9.9", "docker_storage_driver": "teststore", "cgroup": "v9",
		"sriov": "test0 (3 VFs)", "kvm": "test kvm"}
	for _, name := range Names() {
		st, err := Get(name)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		r, err := report.Build(report.Input{
			Run:       results.Run{Experiment: st.Name, Study: name, Started: t0, Ended: t0.Add(time.Minute), Complete: true, Env: env},
			Published: st.Published,
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var md, page bytes.Buffer
		if err := r.Markdown(&md); err != nil {
			t.Fatal(err)
		}
		if err := r.HTML(&page); err != nil {
			t.Fatal(err)
		}
		for _, out := range []string{md.String(), page.String()} {
			for _, lit := range devLiterals {
				if strings.Contains(out, lit) {
					t.Errorf("%s: the report prints the development figure %q", name, lit)
				}
			}
			for _, want := range []string{"Docker Engine: TEST-ENGINE 9.9.9", "storage driver: teststore", "cgroup: v9", "SR-IOV: test0 (3 VFs)"} {
				if !strings.Contains(out, want) {
					t.Errorf("%s: the report does not state the recorded %q", name, want)
				}
			}
		}
	}
}
