package vm_test

import (
	"bytes"
	"github.com/sfclab/sfclab/internal/benchtest"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/internal/labtest"
	httpprobe "github.com/sfclab/sfclab/probe/http"
	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/results/metric"
	"github.com/sfclab/sfclab/runtime/vm"
	"github.com/sfclab/sfclab/runtime/vm/accel"
)

// A VM source in front of a namespace forwarder and a namespace http-server.
const vmHTTPSourceLab = `
name: vmhttpsrc-c
endpoints:
  client: {kind: client, vm: {cpus: 1, memory: 512}}
  web: {kind: http-server, http: {objects: [1k]}}
functions:
  fwd: {kind: forwarder}
chains:
  - {name: c, from: client, to: web, hops: [fwd]}
`

var _ httpprobe.Guest = (*vm.Node)(nil)

// TestBenchHTTPVMSource runs the http probe from a VM source through the bench runner: its
// load generator (package load, the code that runs in a namespace source's stack) runs in the
// guest through the agent and returns every request's time; the samples are stamped with the
// host's time (inside the trial, whatever the guest's clock says), and the report marks the
// figures TCG under TCG.
func TestBenchHTTPVMSource(t *testing.T) {
	requireVM(t)
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	const requests = 20
	outcome, store, rep := runBench(t, []benchScenario{{"vm-http-client", vmHTTPSourceLab, ""}},
		"  http: {requests: 20, objects: [1k], concurrency: [1, 2]}\n", nil)
	trials, _ := store.Trials()
	if outcome.Failed != 0 || len(trials) != 1 || trials[0].Status != results.TrialOK {
		benchtest.LogKeptLogs(t, outcome.Dir)
		t.Fatalf("outcome %+v, trials %+v; want 1 passed", outcome, trials)
	}
	tr := trials[0]
	t.Logf("trial: %.1f s (deploy, probes, destroy)", tr.Ended.Sub(tr.Started).Seconds())
	samples, _ := store.Samples()
	times := map[string]int{} // concurrency -> answered requests
	finished := map[string]float64{}
	for _, x := range samples {
		if x.Probe != httpprobe.Name {
			continue
		}
		c := x.Labels["concurrency"]
		switch x.Metric {
		case metric.HTTPRequestTime.Metric:
			times[c]++
			if !(x.Value > 0) {
				t.Errorf("concurrency %s: request_time %v; want > 0", c, x.Value)
			}
			// The guest's clock dated the request's end; the sample carries the host's time.
			if x.Time.Before(tr.Started) || x.Time.After(tr.Ended) {
				t.Errorf("concurrency %s: request_time sample at %s, outside the trial (%s to %s): a guest's clock", c, x.Time, tr.Started, tr.Ended)
			}
		case metric.HTTPRequests.Metric:
			finished[c] = x.Value
		case metric.HTTPErrors.Metric:
			if x.Value != 0 {
				t.Errorf("concurrency %s: %v errors (first: %s)", c, x.Value, x.Labels["first_error"])
			}
		case metric.HTTPRPS.Metric:
			t.Logf("concurrency %s: %.0f requests/s from the guest", c, x.Value)
		}
	}
	for _, c := range []string{"1", "2"} {
		if times[c] != requests || finished[c] != requests {
			t.Errorf("concurrency %s: %d request times, %v finished; want %d each", c, times[c], finished[c], requests)
		}
	}
	if accel.Host().Emulated() {
		if !rep.Emulated("vm-http-client") {
			t.Errorf("the source ran under TCG, but the report does not mark it %q", report.EmulatedMark)
		}
		var md bytes.Buffer
		if err := rep.Markdown(&md); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(md.String(), "vm-http-client ("+report.EmulatedMark+")") {
			t.Errorf("the report's http figures are not marked %q", report.EmulatedMark)
		}
	}
}
