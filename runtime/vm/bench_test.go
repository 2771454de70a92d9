package vm_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/probe/iperf3"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/vm"
	"github.com/sfclab/sfclab/runtime/vm/accel"
)

// iperf3Once starts a one-shot iperf3 server on node server, bound to dst port 5201 (its log
// in a temporary directory), and runs a TCP client of secs seconds from node client to it,
// retrying for a bounded time while the server binds. It returns the client's JSON report
// (for iperf3.Parse) and its error; a server that does not start fails the test.
func iperf3Once(t testing.TB, ctx context.Context, client, server runtime.Node, dst, secs string) ([]byte, error) {
	t.Helper()
	if _, err := server.Daemon([]string{"iperf3", "-s", "-B", dst, "-p", "5201", "-1"}, t.TempDir()+"/iperf3.log"); err != nil {
		t.Fatal(err)
	}
	var out []byte
	var err error
	for i := range 20 { // the server binds within milliseconds; wait for it a bounded time
		if out, err = client.Output(ctx, nil, "iperf3", "-c", dst, "-p", "5201", "-t", secs, "-J"); err == nil || i == 19 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return out, err
}

// iperf3Gbps sends a TCP transfer of secs seconds from client to server of a deployed lab.
func iperf3Gbps(b testing.TB, l *labtest.Lab, secs string) float64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dst := l.P.Node("server").Interfaces[0].Address.Addr().String()
	out, err := iperf3Once(b, ctx, l.Node(b, "client"), l.Node(b, "server"), dst, secs)
	if err != nil {
		b.Fatal(err)
	}
	res, err := iperf3.Parse(out)
	if err != nil {
		b.Fatal(err)
	}
	return res.ReceivedBPS / 1e9
}

// BenchmarkVMForwarder deploys a 1-VM forwarder chain, measures TCP through it, destroys it,
// then measures the same chain with a namespace forwarder in the same run: deploy and destroy
// time of the VM lab and the throughput ratio VM/netns. Under TCG the VM figures carry the
// mark accel.TCGMark.
//
// Run: flock /tmp/sfclab-suite.lock go test -run '^$' -bench VMForwarder -benchtime 1x ./runtime/vm/
func BenchmarkVMForwarder(b *testing.B) {
	labtest.RequireRoot(b)
	if err := vm.CheckQEMU(); err != nil {
		b.Skipf("SKIPPED LOUDLY: %v", err)
	}
	b.Setenv(vm.ImageRootEnv, b.TempDir())
	useGuestAgent(b)
	labtest.Exclusive(b)
	const lab = `
name: t-vmbench
endpoints:
  client: {kind: client}
  server: {kind: server}
functions:
  fwd: {kind: forwarder, vm: {cpus: 1, memory: 512}}
chains:
  - {name: c, from: client, to: server, hops: [fwd]}
`
	netnsLab := strings.Replace(strings.Replace(lab, ", vm: {cpus: 1, memory: 512}", "", 1), "t-vmbench", "t-nsbench", 1)
	// The guest image, built once, outside the timing (a lab of another name: destroying and
	// at once re-creating a lab's cgroups under one name raced on cgroup v1 here).
	warm := labtest.Deploy(b, strings.Replace(lab, "t-vmbench", "t-vmwarm", 1))
	if err := warm.D.Destroy(context.Background(), warm.P.Lab); err != nil {
		b.Fatal(err)
	}
	var deploy, destroy time.Duration
	var vmG, nsG float64
	for range b.N {
		t0 := time.Now()
		l := labtest.Deploy(b, lab)
		deploy += time.Since(t0)
		vmG += iperf3Gbps(b, l, "5")
		t1 := time.Now()
		if err := l.D.Destroy(context.Background(), l.P.Lab); err != nil {
			b.Fatal(err)
		}
		destroy += time.Since(t1)
		ln := labtest.Deploy(b, netnsLab)
		nsG += iperf3Gbps(b, ln, "5")
		if err := ln.D.Destroy(context.Background(), ln.P.Lab); err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N)
	b.ReportMetric(deploy.Seconds()/n, "vm-deploy-s")
	b.ReportMetric(destroy.Seconds()/n, "vm-destroy-s")
	b.ReportMetric(vmG/n, "vm-Gbit/s")
	b.ReportMetric(nsG/n, "netns-Gbit/s")
	b.ReportMetric(vmG/nsG, "vm/netns")
	b.Logf("accelerator %s (%s figures: %s)", accel.Host(), "VM", accel.TCGMark)
}

// BenchmarkVMNICBackend measures TCP through a 1-VM forwarder whose ports are taps spliced to
// veths (backend tap) and through the same forwarder on macvtaps (backend macvtap), the two
// labs deployed, measured and destroyed in turn within one run, the order swapped every
// round: the mean of each and the ratio macvtap/tap. Under TCG the figures carry the mark
// accel.TCGMark; neither backend uses vhost-net here.
//
// Run: flock /tmp/sfclab-suite.lock go test -run '^$' -bench VMNICBackend -benchtime 4x ./runtime/vm/
func BenchmarkVMNICBackend(b *testing.B) {
	labtest.RequireRoot(b)
	if err := vm.CheckQEMU(); err != nil {
		b.Skipf("SKIPPED LOUDLY: %v", err)
	}
	b.Setenv(vm.ImageRootEnv, b.TempDir())
	useGuestAgent(b)
	labtest.Exclusive(b)
	const lab = `
name: t-vmbnic
endpoints:
  client: {kind: client}
  server: {kind: server}
functions:
  fwd: {kind: forwarder, vm: {cpus: 1, memory: 512, backend: BACKEND}}
chains:
  - {name: c, from: client, to: server, hops: [fwd]}
`
	backends := []string{"tap", "macvtap"}
	labOf := func(backend string) string {
		return strings.NewReplacer("BACKEND", backend, "t-vmbnic", "t-vmb"+backend).Replace(lab)
	}
	// The guest image, built once, outside the measurement.
	warm := labtest.Deploy(b, strings.Replace(labOf("tap"), "t-vmbtap", "t-vmbwarm", 1))
	if err := warm.D.Destroy(context.Background(), warm.P.Lab); err != nil {
		b.Fatal(err)
	}
	sum := map[string]float64{}
	for i := range b.N {
		order := backends
		if i%2 == 1 {
			order = []string{backends[1], backends[0]}
		}
		for _, be := range order {
			l := labtest.Deploy(b, labOf(be))
			g := iperf3Gbps(b, l, "5")
			if err := l.D.Destroy(context.Background(), l.P.Lab); err != nil {
				b.Fatal(err)
			}
			b.Logf("round %d: %s %.2f Gbit/s", i+1, be, g)
			sum[be] += g
		}
	}
	n := float64(b.N)
	b.ReportMetric(sum["tap"]/n, "tap-Gbit/s")
	b.ReportMetric(sum["macvtap"]/n, "macvtap-Gbit/s")
	b.ReportMetric(sum["macvtap"]/sum["tap"], "macvtap/tap")
	b.Logf("accelerator %s (%s)", accel.Host(), accel.TCGMark)
}
