package vm_test

import (
	"bytes"
	"context"
	"fmt"
	"github.com/sfclab/sfclab/internal/benchtest"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/bench"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/iperf3"
	"github.com/sfclab/sfclab/probe/ndr"
	"github.com/sfclab/sfclab/probe/ndr/count"
	"github.com/sfclab/sfclab/probe/ndr/send"
	"github.com/sfclab/sfclab/probe/rtt"
	"github.com/sfclab/sfclab/probe/rtt/echo"
	"github.com/sfclab/sfclab/probe/tcprtt"
	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/results/metric"
	"github.com/sfclab/sfclab/runtime/vm"
	"github.com/sfclab/sfclab/runtime/vm/accel"
)

// Labs whose chain ends are VMs: the iperf3 server in a guest (behind a VM forwarder), and
// the iperf3 client (and ping) in a guest (in front of a namespace forwarder).
const (
	vmServerLab = `
name: vmprobe-srv
endpoints:
  client: {kind: client}
  server: {kind: server, vm: {cpus: 1, memory: 512}}
functions:
  fwd: {kind: forwarder, vm: {cpus: 1, memory: 512}}
chains:
  - {name: c, from: client, to: server, hops: [fwd]}
`
	// vmICMPLab is vmServerLab with a namespace forwarder: one guest, the destination.
	vmICMPLab = `
name: vmprobe-icmp
endpoints:
  client: {kind: client}
  server: {kind: server, vm: {cpus: 1, memory: 512}}
functions:
  fwd: {kind: forwarder}
chains:
  - {name: c, from: client, to: server, hops: [fwd]}
`
	vmClientLab = `
name: vmprobe-cli
endpoints:
  client: {kind: client, vm: {cpus: 1, memory: 512}}
  server: {kind: server}
functions:
  fwd: {kind: forwarder}
chains:
  - {name: c, from: client, to: server, hops: [fwd]}
`
)

// benchScenario is a scenario of runBench's experiment and its lab file; probes, when set, are
// the scenario's own (a YAML flow mapping, instead of the experiment's).
type benchScenario struct{ name, lab, probes string }

// trialsPassed fails t unless the run's outcome has no failure and its store want trials, every
// one ok; it logs each trial's time (deploy, probes, destroy) and, when one failed, the end of
// every log the failed trials kept (benchtest.LogKeptLogs).
func trialsPassed(t *testing.T, outcome *bench.Outcome, store *results.Store, want int) {
	t.Helper()
	trials, _ := store.Trials()
	for _, tr := range trials {
		if tr.Status != results.TrialOK {
			t.Errorf("trial %s/%d: %s: %s", tr.Scenario, tr.Trial, tr.Status, tr.Error)
		}
		t.Logf("trial %s/%d: %.1f s (deploy, probes, destroy)", tr.Scenario, tr.Trial, tr.Ended.Sub(tr.Started).Seconds())
	}
	if outcome.Failed != 0 || len(trials) != want {
		benchtest.LogKeptLogs(t, outcome.Dir)
		t.Fatalf("outcome %+v, %d trials; want %d passed", outcome, len(trials), want)
	}
}

// runBench writes the labs and an experiment of one scenario per lab into a directory, loads
// it as sfclab bench does and runs it with the bench runner (deploy, probes, CPU windows,
// destroy per trial); it returns the run's results and report. during, when set, runs beside
// the run with the journal, to act on a trial once its lab is ready; opts change the
// runner's deployer (withImageRoot).
func runBench(t *testing.T, scenarios []benchScenario, probes string, during func(journal.Journal), opts ...func(*deploy.Deployer)) (*bench.Outcome, *results.Store, *report.Report) {
	t.Helper()
	dir := t.TempDir()
	exp := "name: vmprobe\nrepetitions: 1\nscenarios:\n"
	for _, s := range scenarios {
		if err := os.WriteFile(filepath.Join(dir, s.name+".yaml"), []byte(s.lab), 0o644); err != nil {
			t.Fatal(err)
		}
		exp += "  - {name: " + s.name + ", lab: " + s.name + ".yaml"
		if s.probes != "" {
			exp += ", probes: " + s.probes
		}
		exp += "}\n"
	}
	exp += "probes:\n" + probes
	if err := os.WriteFile(filepath.Join(dir, "exp.yaml"), []byte(exp), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := experiment.Load(filepath.Join(dir, "exp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The labs' state is read by daemons that drop root (Apache as www-data): its directory
	// and the test's temporary directory above it must be searchable by others.
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	j := journal.Journal{Root: root}
	d := &deploy.Deployer{Journal: j}
	for _, o := range opts {
		o(d)
	}
	r := &bench.Runner{Deployer: d, Version: "test", Log: t.Logf}
	done := make(chan struct{})
	if during != nil {
		go func() { defer close(done); during(j) }()
	} else {
		close(done)
	}
	out := filepath.Join(t.TempDir(), "run")
	outcome, err := r.Run(context.Background(), e, out, nil)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range scenarios {
		assertNoVMLeft(t, labtest.Plan(t, s.lab))
	}
	store, err := results.Open(filepath.Join(out, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	run, err := store.Run()
	if err != nil {
		t.Fatal(err)
	}
	trials, err := store.Trials()
	if err != nil {
		t.Fatal(err)
	}
	samples, err := store.Samples()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := report.Build(report.Input{Run: run, Trials: trials, Samples: samples})
	if err != nil {
		t.Fatal(err)
	}
	return outcome, store, rep
}

// TestBenchIperf3VMEnds runs iperf3 with a chain end in a guest through the bench runner:
// the server in a VM destination behind a VM forwarder (started, found listening and stopped
// through the guest's agent) with tcprtt's echo server there too (served by the agent), and
// the client, ping and tcprtt's client (run by the agent) in a VM source; the figures come
// from the existing -J parser, and every one of them is marked TCG under TCG.
func TestBenchIperf3VMEnds(t *testing.T) {
	requireVM(t)
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	// The VM destination also answers rtt's UDP echoes (its agent's responder) and counts
	// ndr's search (its agent's receiver); from a VM source see TestBenchRTTNDRVMSource. The short
	// scenario vm-icmp (one VM: the destination, behind a namespace forwarder) sends rtt's
	// ICMP echoes to a guest, answered by its kernel with no server.
	outcome, store, rep := runBench(t, []benchScenario{
		{"vm-server", vmServerLab, "{iperf3: {duration: 2s}, ping: {count: 5, interval: 200ms}, tcprtt: {connects: 5, requests: 20}, " +
			"rtt: {protocol: udp, rate: [100], count: 30}, ndr: {trial: 300ms, drain: 200ms, max_trials: 6, max_rate: 20kpps, precision: 10%}}"},
		{"vm-client", vmClientLab, ""},
		{"vm-icmp", vmICMPLab, "{rtt: {protocol: icmp, rate: [100], count: 30}}"}},
		"  iperf3: {duration: 2s}\n  ping: {count: 5, interval: 200ms}\n  tcprtt: {connects: 5, requests: 20}\n", nil)
	trialsPassed(t, outcome, store, 3)
	samples, _ := store.Samples()
	for _, s := range []string{"vm-server", "vm-client"} {
		var gbps, pingSum, rttSum float64
		pings, rtts := 0, 0
		for _, x := range samples {
			switch {
			case x.Scenario != s:
			case x.Probe == iperf3.Name && x.Metric == "throughput" && x.Labels["side"] == "receiver":
				gbps = x.Value / 1e9
			case x.Probe == "ping" && x.Metric == "rtt":
				pings++
				pingSum += x.Value
			case x.Probe == tcprtt.Name && x.Metric == metric.TCPRoundTr.Metric:
				rtts++
				rttSum += x.Value
			}
		}
		if rtts != 20 {
			t.Errorf("%s: %d tcprtt request/response samples; want 20", s, rtts)
		}
		if gbps <= 0 {
			t.Errorf("%s: no iperf3 receiver throughput", s)
		}
		if pings == 0 {
			t.Errorf("%s: no ping rtt sample", s)
		}
		mark := ""
		if rep.Emulated(s) {
			mark = " (" + report.EmulatedMark + ")"
		}
		t.Logf("%s: iperf3 TCP %.2f Gbit/s; ping %d rtts, mean %.3f ms; tcprtt %d exchanges, mean %.3f ms%s",
			s, gbps, pings, pingSum/max(1, float64(pings)), rtts, rttSum/max(1, float64(rtts)), mark)
		if accel.Host().Emulated() && !rep.Emulated(s) {
			t.Errorf("%s ran VMs under TCG, but the report does not mark it %q", s, report.EmulatedMark)
		}
	}
	checkGuestRTTNDR(t, samples, "vm-server")
	checkGuestICMP(t, samples, "vm-icmp")
	var md bytes.Buffer
	if err := rep.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	if accel.Host().Emulated() && !strings.Contains(md.String(), report.EmulatedMark) {
		t.Errorf("the report does not carry %q", report.EmulatedMark)
	}
}

// checkGuestRTTNDR checks scenario s's rtt (UDP, echoed by the guest's agent) and ndr (counted
// by the guest's agent) samples: every echo came back with a round trip, and the search's
// trials counted no more than were sent, the first ones (at rates a TCG guest takes) all.
func checkGuestRTTNDR(t *testing.T, samples []results.Sample, s string) {
	t.Helper()
	var rtts []float64
	var received, sent float64 = -1, -1
	for _, x := range samples {
		if x.Scenario != s || x.Probe != rtt.Name {
			continue
		}
		switch x.Metric {
		case metric.RTTRoundTrip.Metric:
			rtts = append(rtts, x.Value)
		case "received":
			received = x.Value
		case "sent":
			sent = x.Value
		}
	}
	if len(rtts) != 30 || sent != 30 || received != 30 {
		t.Errorf("%s: rtt udp: %d round trips, sent %v, received %v; want 30 each (a guest's agent echoes them)", s, len(rtts), sent, received)
	}
	trials := map[string]map[string]float64{} // iteration -> metric -> value
	var ndrPPS float64 = -1
	var labels map[string]string
	ended := ""
	for _, x := range samples {
		if x.Scenario != s || x.Probe != ndr.Name {
			continue
		}
		switch x.Metric {
		case "trial_offered_pps", "trial_received_pps", "trial_loss":
			it := x.Labels["iteration"]
			if trials[it] == nil {
				trials[it] = map[string]float64{}
			}
			trials[it][x.Metric] = x.Value
		case "ndr_pps":
			ndrPPS, labels = x.Value, x.Labels
		case "generator_max_pps":
			ended = fmt.Sprintf("; the search ended generator-limited at %.0f pps: %v", x.Value, x.Labels)
		}
	}
	if len(trials) == 0 || ndrPPS < 0 {
		t.Fatalf("%s: ndr: %d trials (%v), ndr_pps %v%s; want a search with a result", s, len(trials), trials, ndrPPS, ended)
	}
	if labels["receiver"] != "recvmmsg in the guest (its agent)" || labels["generator"] != ndr.GenSendmmsg ||
		!strings.Contains(labels["fallback_reason"], "VM guest") {
		t.Errorf("%s: ndr labels %v; want the socket sender counted by the guest's agent, the XDP generator's absence said", s, labels)
	}
	its := slices.Collect(maps.Keys(trials))
	slices.SortFunc(its, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
	for _, it := range its {
		m := trials[it]
		t.Logf("%s: ndr trial %s: offered %.0f pps, received %.0f pps, loss %.3f %%", s, it, m["trial_offered_pps"], m["trial_received_pps"], m["trial_loss"])
	}
	for it, m := range trials {
		if m["trial_loss"] < 0 || m["trial_received_pps"] > m["trial_offered_pps"]*1.0001 {
			t.Errorf("%s: ndr trial %s counted more than was sent: %v", s, it, m)
		}
	}
	t.Logf("%s: rtt udp to the guest: 30 echoes, median %.3f ms; ndr to the guest: %d trials, NDR %.0f pps (%s), PDR bound %s",
		s, median(rtts), len(trials), ndrPPS, labels["ndr_bound"], labels["pdr_bound"])
	if ndrPPS <= 0 {
		t.Errorf("%s: ndr found no loss-free rate into the guest (NDR %v): the guest's count lost even the slowest trials", s, ndrPPS)
	}
}

// checkGuestICMP checks scenario s's rtt over ICMP to a VM destination: every echo was answered
// (by the guest's kernel) and timed.
func checkGuestICMP(t *testing.T, samples []results.Sample, s string) {
	t.Helper()
	var rtts []float64
	var received, sent float64 = -1, -1
	for _, x := range samples {
		if x.Scenario != s || x.Probe != rtt.Name || x.Labels["protocol"] != echo.ProtoICMP {
			continue
		}
		switch x.Metric {
		case metric.RTTRoundTrip.Metric:
			rtts = append(rtts, x.Value)
		case "received":
			received = x.Value
		case "sent":
			sent = x.Value
		}
	}
	if len(rtts) != 30 || sent != 30 || received != 30 || slices.ContainsFunc(rtts, func(v float64) bool { return !(v > 0) }) {
		t.Errorf("%s: rtt icmp: %d round trips, sent %v, received %v; want 30 each, every one > 0 (the guest's kernel answers)", s, len(rtts), sent, received)
	}
	t.Logf("%s: rtt icmp to the guest's kernel: %d echoes, median %.3f ms", s, len(rtts), median(rtts))
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	w := slices.Clone(v)
	slices.Sort(w)
	return w[len(w)/2]
}

// TestBenchIperf3DeadVMEnd kills the QEMU of the guest at one end of an iperf3 transfer while
// it runs (the server's guest; the client's guest): the trial fails naming the dead node, and
// nothing of the lab is left. With the server's guest dead the client on the host would wait
// out its bound (the test's duration and iperf3.ExtraTime): the trial stops its probes as
// soon as it sees the guest gone, and says so. (The client's guest takes its iperf3 with it:
// the probe may fail before the trial looks.)
func TestBenchIperf3DeadVMEnd(t *testing.T) {
	requireVM(t)
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	for _, tt := range []struct {
		name, lab, dead, watch string // watch: the namespace node whose iperf3 shows the transfer
		stopped                bool   // the trial, not the probe, ends the run
	}{
		{"server", strings.NewReplacer("vmprobe-srv", "vmprobe-dsrv", "  fwd: {kind: forwarder, vm: {cpus: 1, memory: 512}}", "  fwd: {kind: forwarder}").Replace(vmServerLab), "server", "client", true},
		{"client", strings.Replace(vmClientLab, "vmprobe-cli", "vmprobe-dcli", 1), "client", "server", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lab := labtest.Plan(t, tt.lab).Lab
			killed := make(chan bool, 1)
			outcome, store, _ := runBench(t, []benchScenario{{"dead", tt.lab, ""}}, "  iperf3: {duration: 4s}\n", func(j journal.Journal) {
				deadline := time.Now().Add(150 * time.Second) // image build and a TCG boot on a loaded host
				for time.Now().Before(deadline) {
					if st, err := j.ReadState(lab); err == nil && st.Status == journal.StatusReady {
						// Inside the transfer: the namespace end's iperf3 holds an
						// established connection before the guest is killed.
						for time.Now().Before(deadline) && !transferring(lab, tt.watch) {
							time.Sleep(50 * time.Millisecond)
						}
						time.Sleep(time.Second)
						pids := vm.QEMUPids(lab)
						for _, pid := range pids {
							_ = syscall.Kill(pid, syscall.SIGKILL)
						}
						killed <- len(pids) > 0
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
				killed <- false
			})
			if !<-killed {
				t.Fatalf("test setup: the %s guest's QEMU was never killed", tt.dead)
			}
			trials, _ := store.Trials()
			want := "node " + tt.dead + " is down: its QEMU process is not running"
			if outcome.Failed != 1 || len(trials) != 1 || !strings.Contains(trials[0].Error, want) {
				t.Fatalf("outcome %+v, trials %+v; want the trial failed with %q", outcome, trials, want)
			}
			if stopped := "the probes were stopped when it went down"; tt.stopped && !strings.Contains(trials[0].Error, stopped) {
				t.Errorf("trial error %q; want %q (the trial stops the probe when the guest dies, not the probe's own bound)", trials[0].Error, stopped)
			}
			t.Logf("failed trial recorded: %s", trials[0].Error)
			// The dead guest's console and QEMU's log outlive its lab, where the error says.
			keep := filepath.Join(outcome.Dir, bench.FailedDir, "dead-1")
			_, cerr := os.Stat(filepath.Join(keep, tt.dead+"-console.log"))
			if !strings.Contains(trials[0].Error, "its logs are kept in "+keep) || cerr != nil {
				t.Errorf("trial error %q, kept console: %v; want the dead guest's console in %s, named in the error", trials[0].Error, cerr, keep)
			}
		})
	}
}

// transferring reports whether an iperf3 in node's namespace of lab (on the host) holds an
// established TCP connection.
func transferring(lab, node string) bool {
	out, err := exec.Command("ip", "netns", "pids", plan.NetnsName(lab, node)).Output()
	if err != nil {
		return false
	}
	for _, pid := range strings.Fields(string(out)) {
		if comm, err := os.ReadFile("/proc/" + pid + "/comm"); err != nil || strings.TrimSpace(string(comm)) != "iperf3" {
			continue
		}
		for _, f := range []string{"tcp", "tcp6"} {
			tab, _ := os.ReadFile("/proc/" + pid + "/net/" + f)
			for _, l := range strings.Split(string(tab), "\n")[1:] {
				if fs := strings.Fields(l); len(fs) > 3 && fs[3] == "01" {
					return true
				}
			}
		}
	}
	return false
}

// A VM node serves tcprtt's echo server and client in its guest (runtime/vm does not import
// the probe packages: they would grow sfclab-guest).
var (
	_ count.Guest  = (*vm.Node)(nil)
	_ probe.Echoer = (*vm.Node)(nil)
	_ probe.Guest  = (*vm.Node)(nil)
	_ tcprtt.Guest = (*vm.Node)(nil)
	_ echo.Guest   = (*vm.Node)(nil) // rtt's echoes from a VM source
	_ send.Guest   = (*vm.Node)(nil) // ndr's sender in a VM source
)

// TestBenchFailedTrialKeepsGuestState: a trial that fails while its guest runs (iperf3 refused
// by a VM firewall's reject rule) keeps the guest's console and, read through its agent, the
// guest's state (kernel messages, interfaces' counters, interrupts, TCP counters) in the run's
// failed/ directory, named in the trial's error.
func TestBenchFailedTrialKeepsGuestState(t *testing.T) {
	requireVM(t)
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	lab := strings.NewReplacer("t-vmfwd", "t-vmkeep", "action: deny, protocol: tcp, port: 9999", "action: reject, protocol: tcp, port: 5201").Replace(routedLab)
	outcome, store, _ := runBench(t, []benchScenario{{"refused", lab, ""}}, "  iperf3: {duration: 1s}\n", nil)
	trials, _ := store.Trials()
	if outcome.Failed != 1 || len(trials) != 1 {
		t.Fatalf("outcome %+v, trials %+v; want the trial failed (iperf3 refused by the guest's firewall)", outcome, trials)
	}
	keep := filepath.Join(outcome.Dir, bench.FailedDir, "refused-1")
	state, err := os.ReadFile(filepath.Join(keep, "fwd-guest-state.txt"))
	_, cerr := os.Stat(filepath.Join(keep, "fwd-console.log"))
	if !strings.Contains(trials[0].Error, "its logs are kept in "+keep) || err != nil || cerr != nil {
		t.Fatalf("trial error %q; guest state: %v, console: %v; want both kept in %s, named in the error", trials[0].Error, err, cerr, keep)
	}
	for _, want := range []string{"### dmesg\n", "Linux version", "### ip -s link\n", "ingress", "egress", "### cat /proc/interrupts\n", "virtio", "### cat /proc/net/snmp\n", "Tcp:"} {
		if !strings.Contains(string(state), want) {
			t.Errorf("kept guest state lacks %q:\n%s", want, state)
		}
	}
}
