package vm_test

import (
	"bytes"
	"github.com/sfclab/sfclab/internal/benchtest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/internal/labtest"
	httpprobe "github.com/sfclab/sfclab/probe/http"
	"github.com/sfclab/sfclab/probe/ndr"
	"github.com/sfclab/sfclab/probe/rtt"
	"github.com/sfclab/sfclab/probe/rtt/echo"
	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/results/metric"
	"github.com/sfclab/sfclab/runtime/vm"
	"github.com/sfclab/sfclab/runtime/vm/accel"
)

// A VM source (the busybox image) in front of a namespace forwarder and a namespace server.
const vmsrcLab = `
name: vmsrc-rn
endpoints:
  client: {kind: client, vm: {cpus: 1, memory: 512}}
  server: {kind: server}
functions:
  fwd: {kind: forwarder}
chains:
  - {name: c, from: client, to: server, hops: [fwd]}
`

// The same with the Debian image, whose root gets apache2-utils for http's ab: true, and an
// http-server destination.
const vmsrcABLab = `
name: vmsrc-ab
endpoints:
  client: {kind: client, vm: {cpus: 1, memory: 512, image: debian}}
  web: {kind: http-server, http: {objects: [1k]}}
functions:
  fwd: {kind: forwarder}
chains:
  - {name: c, from: client, to: web, hops: [fwd]}
`

// TestBenchRTTNDRVMSource runs rtt (UDP, then ICMP) and ndr from a VM source through the
// bench runner: the guest's agent sends the echoes (package echo, every timestamp the
// guest's clock) and the search's datagrams (package send, sendmmsg), and the namespace
// server answers and counts as for a namespace source. Every echo must come back, every rtt
// sample say clock=guest, the ndr search find a rate with no loss, its labels name the
// guest's sender and why the XDP generator did not run, and the report mark the figures TCG.
func TestBenchRTTNDRVMSource(t *testing.T) {
	requireVM(t)
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	outcome, store, rep := runBench(t, []benchScenario{
		{"vmsrc-udp", vmsrcLab, "{rtt: {protocol: udp, rate: [100], count: 30}, ndr: {trial: 300ms, drain: 200ms, max_trials: 6, max_rate: 10kpps, precision: 10%}}"},
		{"vmsrc-icmp", vmsrcLab, "{rtt: {protocol: icmp, rate: [100], count: 20}}"}},
		"  ping: {count: 3}\n", nil)
	trialsPassed(t, outcome, store, 2)
	samples, _ := store.Samples()
	for _, c := range []struct {
		scenario, proto string
		n               float64
	}{{"vmsrc-udp", echo.ProtoUDP, 30}, {"vmsrc-icmp", echo.ProtoICMP, 20}} {
		var rtts []float64
		var sent, received float64 = -1, -1
		for _, x := range samples {
			if x.Scenario != c.scenario || x.Probe != rtt.Name {
				continue
			}
			if x.Labels["clock"] != rtt.GuestClock {
				t.Errorf("%s: rtt %s sample without clock=%s: %v", c.scenario, x.Metric, rtt.GuestClock, x.Labels)
			}
			switch x.Metric {
			case metric.RTTRoundTrip.Metric:
				rtts = append(rtts, x.Value)
			case "sent":
				sent = x.Value
			case "received":
				received = x.Value
			case "cpu_self":
				t.Errorf("%s: a cpu_self sample from a guest source (the guest agent's CPU is not sfclab's)", c.scenario)
			case "path_end":
				if x.Labels["end"] != echo.PathEndSocket || !strings.Contains(x.Labels["note"], "VM guest") {
					t.Errorf("%s: path_end labels %v; want end socket and why not tc", c.scenario, x.Labels)
				}
			}
		}
		if float64(len(rtts)) != c.n || sent != c.n || received != c.n || slices.ContainsFunc(rtts, func(v float64) bool { return !(v > 0) }) {
			t.Errorf("%s: rtt %s: %d round trips, sent %v, received %v; want %v each, every one > 0", c.scenario, c.proto, len(rtts), sent, received, c.n)
		}
		t.Logf("%s: rtt %s from the guest: %d echoes, median %.3f ms (the guest's clock)", c.scenario, c.proto, len(rtts), median(rtts))
	}
	var ndrPPS, calibrated float64 = -1, -1
	var labels map[string]string
	trialsSeen := 0
	for _, x := range samples {
		if x.Scenario != "vmsrc-udp" || x.Probe != ndr.Name {
			continue
		}
		switch x.Metric {
		case "trial_offered_pps":
			trialsSeen++
			t.Logf("ndr trial %s: offered %.0f pps from the guest (its clock)", x.Labels["iteration"], x.Value)
		case "generator_calibrated_pps":
			calibrated = x.Value
		case "trial_loss":
			if x.Value < 0 {
				t.Errorf("ndr trial %s counted more than was sent: loss %v %%", x.Labels["iteration"], x.Value)
			}
		case "ndr_pps":
			ndrPPS, labels = x.Value, x.Labels
		}
	}
	if trialsSeen == 0 || !(ndrPPS > 0) {
		t.Fatalf("ndr from the guest: %d trials, NDR %v; want a search with a loss-free rate", trialsSeen, ndrPPS)
	}
	if labels["sender"] != ndr.GuestSender || labels["generator"] != ndr.GenSendmmsg || labels["receiver"] != "recvmmsg" ||
		!strings.Contains(labels["fallback_reason"], "the source is a VM guest") {
		t.Errorf("ndr labels %v; want the guest's sendmmsg sender, the namespace's receiver, the XDP generator's absence said", labels)
	}
	t.Logf("ndr from the guest: %d trials, NDR %.0f pps (%s); the sender calibrated in the guest at %.0f pps of 64 B frames (%s)",
		trialsSeen, ndrPPS, labels["ndr_bound"], calibrated, accel.Host())
	checkTCGMarked(t, rep, "vmsrc-udp", "vmsrc-icmp")
}

// checkTCGMarked checks that under TCG the report marks the scenarios' figures.
func checkTCGMarked(t *testing.T, rep *report.Report, scenarios ...string) {
	t.Helper()
	if !accel.Host().Emulated() {
		return
	}
	var md bytes.Buffer
	if err := rep.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, s := range scenarios {
		if !rep.Emulated(s) {
			t.Errorf("%s ran a VM under TCG, but the report does not mark it %q", s, report.EmulatedMark)
		}
		if !strings.Contains(md.String(), s+" ("+report.EmulatedMark+")") {
			t.Errorf("the report's figures of %s are not marked %q", s, report.EmulatedMark)
		}
	}
}

// TestBenchABVMSource runs http with ab: true from a VM source with the Debian image: the
// experiment gives the guest ab (its root gets apache2-utils), ab runs in the guest through
// the agent beside sfclab's client, and every request is answered. Its root is cached as the
// other Debian tests' are (debianCacheFor); a cold build takes minutes.
func TestBenchABVMSource(t *testing.T) {
	requireVM(t)
	cache := debianCachePackages(t, append(vm.DebianPackages(nil), "apache2-utils"))
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	p := labtest.Plan(t, vmsrcABLab)
	p.Node("client").VM.Programs = []string{"ab"} // as the experiment's loading does
	sets, err := vm.ProgramSets(p)
	if err != nil || len(sets) != 1 || !slices.Contains(sets[0].Packages, "apache2-utils") {
		t.Fatalf("program sets %+v, %v; want the client's Debian root with apache2-utils", sets, err)
	}
	outcome, store, rep := runBench(t, []benchScenario{{"vmsrc-ab", vmsrcABLab, ""}},
		"  http: {requests: 20, objects: [1k], concurrency: [1], ab: true}\n", nil, withImageRoot(cache))
	trials, _ := store.Trials()
	if outcome.Failed != 0 || len(trials) != 1 || trials[0].Status != results.TrialOK {
		benchtest.LogKeptLogs(t, outcome.Dir)
		t.Fatalf("outcome %+v, trials %+v; want 1 passed", outcome, trials)
	}
	t.Logf("trial: %.1f s (deploy, probes, destroy)", trials[0].Ended.Sub(trials[0].Started).Seconds())
	samples, _ := store.Samples()
	got := map[string]float64{}
	for _, x := range samples {
		if x.Probe == httpprobe.ABName {
			got[x.Metric] = x.Value
		}
	}
	if got[metric.ABRequests.Metric] != 20 || got[metric.ABErrors.Metric] != 0 || !(got[metric.ABRPS.Metric] > 0) {
		t.Errorf("ab from the guest: %v; want 20 complete requests, no error, a rate", got)
	}
	t.Logf("ab in the Debian guest: %.0f complete, %.1f requests/s, %.2f ms per request (the guest's clock)",
		got[metric.ABRequests.Metric], got[metric.ABRPS.Metric], got[metric.ABTimePerReq.Metric])
	checkTCGMarked(t, rep, "vmsrc-ab")
}

// debianCachePackages is debianCache for the Debian root of these packages.
func debianCachePackages(t *testing.T, pkgs []string) string {
	t.Helper()
	root := os.Getenv("SFCLAB_TEST_VM_CACHE")
	if root == "" {
		root = vm.DefaultImageRoot
	}
	want := slices.Compact(slices.Sorted(slices.Values(pkgs)))
	if testing.Short() {
		if ims, _ := (vm.Builder{Root: root}).List(); !slices.ContainsFunc(ims, func(im *vm.Image) bool {
			return im.Disk() != "" && slices.Equal(im.Packages, want)
		}) {
			t.Skipf("SKIPPED LOUDLY: no cached Debian guest root with %s under %s and -short (a cold build takes minutes): sfclab images build --runtime vm --lab LAB", strings.Join(want, " "), root)
		}
	}
	return root
}
