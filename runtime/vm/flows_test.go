package vm_test

import (
	"context"
	"errors"
	"github.com/sfclab/sfclab/internal/benchtest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/flows"
	"github.com/sfclab/sfclab/probe/iperf3"
	"github.com/sfclab/sfclab/probe/ndr"
	"github.com/sfclab/sfclab/probe/ndr/count"
	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/results/metric"
	"github.com/sfclab/sfclab/runtime/vm/accel"
	"golang.org/x/sys/unix"
)

// vmFlowsLab has two TCP chains from a namespace client to a VM server, each with its own
// destination port (the flows probe's servers): one through a VM forwarder, one through a
// namespace forwarder. TCP: a routed lab steers by the classifier alone, and an iperf3 UDP
// test's control connection is TCP to the same port.
const vmFlowsLab = `
name: vmflows-srv
endpoints:
  client: {kind: client}
  server: {kind: server, vm: {cpus: 1, memory: 512}}
functions:
  vfwd: {kind: forwarder, vm: {cpus: 1, memory: 512}}
  nfwd: {kind: forwarder}
chains:
  - {name: a, from: client, to: server, hops: [vfwd], classifier: {protocol: tcp, destination_port: 5301}}
  - {name: b, from: client, to: server, hops: [nfwd], classifier: {protocol: tcp, destination_port: 5302}}
`

// vmFlowsClientLab has a TCP chain from a VM client to a namespace server through a
// namespace forwarder: the flows probe's client runs in the guest.
const vmFlowsClientLab = `
name: vmflows-cli
endpoints:
  client: {kind: client, vm: {cpus: 1, memory: 512}}
  server: {kind: server}
functions:
  nfwd: {kind: forwarder}
chains:
  - {name: a, from: client, to: server, hops: [nfwd], classifier: {protocol: tcp, destination_port: 5301}}
`

// TestBenchFlowsVMServer runs the flows probe through the bench runner with its iperf3
// servers in a VM destination (started, found listening and stopped through the guest's
// agent, as iperf3's), and with its client in a VM source (run through the agent, as
// iperf3's): the trials pass, each flow has its receiver's throughput, the forwarders' egress
// counters moved, and the figures are marked TCG under TCG.
func TestBenchFlowsVMServer(t *testing.T) {
	requireVM(t)
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	outcome, store, rep := runBench(t, []benchScenario{{"vm-flows", vmFlowsLab, ""},
		{"vm-flows-client", vmFlowsClientLab, "{flows: {interval: 500ms, flows: [{chain: a, protocol: tcp, duration: 2s}]}}"}},
		"  flows: {interval: 500ms, flows: [{chain: a, protocol: tcp, duration: 2s}, {chain: b, protocol: tcp, duration: 2s}]}\n", nil)
	trials, _ := store.Trials()
	for _, tr := range trials {
		if tr.Status != results.TrialOK {
			t.Errorf("trial %s/%d: %s: %s", tr.Scenario, tr.Trial, tr.Status, tr.Error)
		}
		t.Logf("trial %s/%d took %.1f s (deploy, probes, destroy)", tr.Scenario, tr.Trial, tr.Ended.Sub(tr.Started).Seconds())
	}
	if outcome.Failed != 0 || len(trials) != 2 {
		benchtest.LogKeptLogs(t, outcome.Dir)
		t.Fatalf("outcome %+v, %d trials; want 2 passed", outcome, len(trials))
	}
	samples, _ := store.Samples()
	received := map[string]float64{}
	egress := map[string]float64{}
	var clientReceived, clientEgress float64
	for _, x := range samples {
		switch {
		case x.Probe == flows.Name && x.Scenario == "vm-flows-client":
			if x.Metric == metric.FlowsThroughput.Metric && x.Labels["side"] == "receiver" && x.Labels["flow"] == "a" {
				clientReceived = x.Value
			}
			if x.Metric == metric.FlowsEgressBytes.Metric && x.Labels["node"] == "nfwd" {
				clientEgress = x.Value
			}
		case x.Probe != flows.Name || x.Scenario != "vm-flows":
		case x.Metric == metric.FlowsThroughput.Metric && x.Labels["side"] == "receiver":
			received[x.Labels["flow"]] = x.Value
		case x.Metric == metric.FlowsEgressBytes.Metric:
			egress[x.Labels["node"]] = x.Value
		}
	}
	mark := ""
	if rep.Emulated("vm-flows") {
		mark = " (" + report.EmulatedMark + ")"
	}
	for _, f := range []string{"a", "b"} {
		if received[f] <= 0 {
			t.Errorf("flow %s: no receiver throughput (%v)", f, received)
		}
	}
	for _, n := range []string{"vfwd", "nfwd"} {
		if egress[n] <= 0 {
			t.Errorf("forwarder %s: no egress bytes counted (%v)", n, egress)
		}
	}
	t.Logf("TCP flows to a VM server, 2 s at once: received a (VM forwarder) %.3f Gbit/s, b (namespace forwarder) %.3f Gbit/s; egress bytes vfwd %.0f, nfwd %.0f%s",
		received["a"]/1e9, received["b"]/1e9, egress["vfwd"], egress["nfwd"], mark)
	if accel.Host().Emulated() && !rep.Emulated("vm-flows") {
		t.Errorf("vm-flows ran VMs under TCG, but the report does not mark it %q", report.EmulatedMark)
	}
	if clientReceived <= 0 || clientEgress <= 0 {
		t.Errorf("flow from a VM client: receiver throughput %v, forwarder egress bytes %v; want both above 0", clientReceived, clientEgress)
	}
	t.Logf("TCP flow from a VM client, 2 s: received %.3f Gbit/s; egress bytes nfwd %.0f", clientReceived/1e9, clientEgress)
	if accel.Host().Emulated() && !rep.Emulated("vm-flows-client") {
		t.Errorf("vm-flows-client ran VMs under TCG, but the report does not mark it %q", report.EmulatedMark)
	}
}

// TestGuestServersStopped deploys one lab whose destination is a VM (behind namespace
// forwarders) and leaves a probe's run early, twice: the one-off servers the probe started in
// the guest, which would wait for their clients for ever, are stopped there through its agent
// (seen by pidof in the guest during the run, gone after it).
//   - iperf3: its Around fails before the client runs; the guest's netstat lines are what the
//     probe's parser reads.
//   - flows: cancelled once both flows' servers listen; the probe returns the cancellation.
func TestGuestServersStopped(t *testing.T) {
	requireVM(t)
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	lab := strings.NewReplacer("vmflows-srv", "vmflows-stop", "  vfwd: {kind: forwarder, vm: {cpus: 1, memory: 512}}", "  vfwd: {kind: forwarder}").Replace(vmFlowsLab)
	p := labtest.Plan(t, lab)
	d := &deploy.Deployer{Journal: journal.Journal{Root: t.TempDir()}, Log: t.Logf}
	t.Cleanup(func() {
		if err := d.Destroy(context.Background(), p.Lab); err != nil && !errors.Is(err, journal.ErrNotDeployed) {
			t.Errorf("destroy %s: %v", p.Lab, err)
		}
		assertNoVMLeft(t, p)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := d.Deploy(ctx, p, ""); err != nil {
		t.Fatal(err)
	}
	server, err := d.Node(p, "server")
	if err != nil {
		t.Fatal(err)
	}
	guestIperf3 := func() ([]string, error) {
		out, err := server.Output(ctx, nil, "sh", "-c", "pidof iperf3 || true")
		return strings.Fields(string(out)), err
	}
	// noneBefore fails a subtest whose guest still runs an iperf3 (a server the one before
	// left): the subtest's own check would prove nothing.
	noneBefore := func(t *testing.T) {
		t.Helper()
		if pids, err := guestIperf3(); err != nil || len(pids) > 0 {
			t.Fatalf("test setup: iperf3 in the guest before the probe ran: %v, %v", pids, err)
		}
	}

	t.Run("iperf3", func(t *testing.T) {
		noneBefore(t)
		chain, err := p.ProbeChain("a")
		if err != nil {
			t.Fatal(err)
		}
		env := probe.Env{Plan: p, Chain: chain, LogDir: t.TempDir(),
			Node: func(name string) (probe.Node, error) { return d.Node(p, name) }}
		refused := errors.New("around: the client is not run")
		var during string
		pr := iperf3.New(iperf3.Config{Duration: 2 * time.Second}).(probe.Timed).WithAround(func(func() (probe.Window, bool)) error {
			out, err := server.Output(ctx, nil, "netstat", "-tan")
			if err != nil {
				return err
			}
			t.Logf("netstat -tan in the guest:\n%s", out)
			pids, err := guestIperf3()
			if err != nil {
				return err
			}
			during = strings.Join(pids, " ")
			return refused
		})
		if err := pr.Run(ctx, env, func(results.Sample) {}); !errors.Is(err, refused) {
			t.Fatalf("run: %v; want the Around's error", err)
		}
		if during == "" {
			t.Error("no iperf3 ran in the guest while the probe ran")
		}
		after, err := guestIperf3()
		if err != nil {
			t.Fatal(err)
		}
		if len(after) > 0 {
			t.Errorf("iperf3 still runs in the guest after the probe returned: pid %v (it was %s during the run)", after, during)
		}
		t.Logf("iperf3 server in the guest: pid %s during the run, none after", during)
	})

	// ndr's receiver in the guest (its agent, count.Guest) counts exactly what the guest's
	// kernel delivered to it: its count of each trial, summed, equals the guest's own
	// Udp InDatagrams over the run (the kernel counts a datagram when a socket reads it), and
	// is never more than was sent. Sent from the namespace forwarder beside the server,
	// straight onto their segment: at a rate the guest takes, and unpaced (the guest loses
	// some: what it lost is not counted).
	t.Run("ndr-count", func(t *testing.T) {
		var dst netip.Addr
		for _, si := range p.Node("server").Interfaces {
			for _, fi := range p.Node("nfwd").Interfaces {
				if si.Segment == fi.Segment {
					dst = si.Address.Addr()
				}
			}
		}
		fwd, err := d.Node(p, "nfwd")
		if err != nil || !dst.IsValid() {
			t.Fatalf("test setup: forwarder %v, server address %v on its segment", err, dst)
		}
		const port = 5400
		rc, err := server.(count.Guest).ListenCount(ctx, port)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := rc.Close(); err != nil {
				t.Error(err)
			}
		}()
		var fd int
		if err := fwd.Do(func() (err error) {
			if fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
				return err
			}
			return unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: dst.As4()})
		}); err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		inDatagrams := func() uint64 {
			out, err := server.Output(ctx, nil, "cat", "/proc/net/snmp")
			if err != nil {
				t.Fatal(err)
			}
			var head []string
			for _, line := range strings.Split(string(out), "\n") {
				if f := strings.Fields(line); len(f) > 1 && f[0] == "Udp:" {
					if head == nil {
						head = f
						continue
					}
					if i := slices.Index(head, "InDatagrams"); i > 0 && i < len(f) {
						n, err := strconv.ParseUint(f[i], 10, 64)
						if err == nil {
							return n
						}
					}
				}
			}
			t.Fatalf("no Udp InDatagrams in the guest's /proc/net/snmp:\n%s", out)
			return 0
		}
		snd := ndr.NewSender(fd, []int{64})
		// Neighbour resolution first (trial 1, not compared).
		if _, _, err := snd.Send(1, 100, 200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if _, err := rc.Read(ctx, 1, ndr.GuestSettle); err != nil {
			t.Fatal(err)
		}
		before := inDatagrams()
		var total, sentTotal uint64
		for _, tr := range []struct {
			id  uint32
			pps float64
			d   time.Duration
		}{{2, 2000, 500 * time.Millisecond}, {3, 0, 300 * time.Millisecond}} {
			sent, took, err := snd.Send(tr.id, tr.pps, tr.d)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond)
			r, err := rc.Read(ctx, tr.id, ndr.GuestSettle)
			if err != nil {
				t.Fatal(err)
			}
			if r.Received > sent {
				t.Errorf("trial %d: %d counted of %d sent", tr.id, r.Received, sent)
			}
			if tr.pps > 0 && r.Received == 0 {
				t.Errorf("trial %d: nothing counted of %d sent at %.0f pps", tr.id, sent, tr.pps)
			}
			t.Logf("trial %d: sent %d at %.0f pps, the guest's agent counted %d (rcvbuf errors so far %d)",
				tr.id, sent, float64(sent)/took.Seconds(), r.Received, r.RcvbufErrors)
			total += r.Received
			sentTotal += sent
		}
		if after := inDatagrams(); after-before != total {
			t.Errorf("the guest's kernel delivered %d datagrams, its agent counted %d", after-before, total)
		}
		t.Logf("the agent's counts (%d of %d sent) equal the guest kernel's Udp InDatagrams delta", total, sentTotal)
	})

	t.Run("flows", func(t *testing.T) {
		noneBefore(t)
		env := probe.Env{Plan: p, LogDir: t.TempDir(),
			Node: func(name string) (probe.Node, error) { return d.Node(p, name) }}
		// Long flows: the servers would run for a minute if the probe did not stop them.
		pr := flows.New(flows.Config{Flows: []flows.Flow{{Chain: "a", Protocol: "tcp", Duration: time.Minute}, {Chain: "b", Protocol: "tcp", Duration: time.Minute}}})
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		var during []string
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			for runCtx.Err() == nil {
				if pids, err := guestIperf3(); err == nil && len(pids) >= 2 {
					during = pids
					stop()
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		}()
		err := pr.Run(runCtx, env, func(results.Sample) {})
		<-watched
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("run: %v; want it cancelled once the servers ran", err)
		}
		if len(during) < 2 {
			t.Fatalf("iperf3 in the guest during the run: %v; want both flows' servers", during)
		}
		after, err := guestIperf3()
		if err != nil {
			t.Fatal(err)
		}
		if len(after) > 0 {
			t.Errorf("iperf3 still runs in the guest after the probe returned: pids %v (they were %v during the run)", after, during)
		}
		t.Logf("flows' iperf3 servers in the guest: pids %v during the run, none after", during)
	})
}
