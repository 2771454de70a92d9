package rtt

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	ebpflink "github.com/cilium/ebpf/link"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/rtt/echo"
	"github.com/sfclab/sfclab/probe/rtt/tcstamp"
)

// twoHostsLab is study D's testbed (experiments/labs/rtt2-*.yaml) with the sender and the
// responder attached by driver.
func twoHostsLab(driver string) string {
	return `
name: t-pe-` + map[string]string{"veth": "veth", "macvlan": "macv", "ebpf-redirect": "ebpf"}[driver] + `
hosts:
  - {name: sender, cpus: "0", link: {rate: 10gbit}}
  - {name: responder, cpus: "1", link: {rate: 10gbit}}
endpoints:
  sender: {kind: client, host: sender, driver: ` + driver + `}
  responder: {kind: server, host: responder, driver: ` + driver + `}
chains:
  - {name: echo, from: sender, to: responder}
`
}

// tcxCount is how many tcx programs are attached to the sender's interface towards dst.
func tcxCount(t *testing.T, n Doer, dst netip.Addr) int {
	t.Helper()
	count := 0
	err := n.Do(func() error {
		idx, _, err := tcstamp.Route(dst)
		if err != nil {
			return err
		}
		for _, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			res, err := ebpflink.QueryPrograms(ebpflink.QueryOptions{Target: idx, Attach: at})
			if err != nil {
				return err
			}
			count += len(res.Programs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return count
}

// TestPathEndPerDriver: for veth, macvlan and ebpf-redirect on two emulated hosts, the path
// runs from the echo leaving the sender's interface to the reply reaching it (tc egress to tc
// ingress), inside the application's round trip for every echo; the socket's timestamps, which
// each driver takes at its own point, are logged against those points (docs/experiment-file.md
// has the figures); the programs are gone from the interface after the run, and after a run
// cut short.
func TestPathEndPerDriver(t *testing.T) {
	labtest.RequireRoot(t)
	labtest.Exclusive(t)
	for _, driver := range []string{"veth", "macvlan", "ebpf-redirect"} {
		t.Run(driver, func(t *testing.T) {
			l := labtest.Deploy(t, twoHostsLab(driver))
			p := l.P
			n := l.Node(t, "sender")
			dst := probe.DestinationAddr(p, p.Chains[0])
			target := netip.AddrPortFrom(dst, 0)
			if err := Warm(context.Background(), n, target, Config{}); err != nil {
				t.Fatal(err)
			}
			before := tcxCount(t, n, dst)
			r, err := measurePathEnd(context.Background(), n, target, Config{Count: 500, Rate: 1000, PathEnd: echo.PathEndTC})
			if errors.Is(err, tcstamp.ErrUnsupported) {
				t.Skipf("SKIPPED LOUDLY: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.PathEnd != echo.PathEndTC {
				t.Fatalf("path end %q (%s), want tc", r.PathEnd, r.PathEndNote)
			}
			stamped := 0
			var path, sock, txOff, rxOff []time.Duration
			for _, pk := range r.Packets {
				if pk.Lost() || !pk.Stamped() {
					continue
				}
				stamped++
				// The clocks' offset is read once per run: allow a microsecond.
				if pk.WireOut < pk.Sent-1000 || pk.WireIn <= pk.WireOut || pk.WireIn > pk.Recv+1000 {
					t.Fatalf("echo %d: sent %d, tc out %d, tc in %d, read %d: not in order", pk.Seq, pk.Sent, pk.WireOut, pk.WireIn, pk.Recv)
				}
				path = append(path, pk.Path())
				if pk.SocketStamped() {
					sock = append(sock, pk.SocketPath())
					txOff = append(txOff, time.Duration(pk.TXKernel-pk.WireOut))
					rxOff = append(rxOff, time.Duration(pk.RXKernel-pk.WireIn))
				}
			}
			if stamped < r.Received*95/100 || r.Received < 450 {
				t.Fatalf("%d of %d replies have tc stamps (%d sent)", stamped, r.Received, r.Sent)
			}
			t.Logf("%s: tc path median %s; socket path median %s; socket TX stamp - tc egress %s, socket RX stamp - tc ingress %s (medians over %d echoes; %d with a device-layer TX stamp)",
				driver, echo.Median(path), echo.Median(sock), echo.Median(txOff), echo.Median(rxOff), len(sock), r.TXSched)
			if got := tcxCount(t, n, dst); got != before {
				t.Errorf("%d tcx programs on the interface after the run, %d before", got, before)
			}
			// A run cut short detaches them too.
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			_, _ = measurePathEnd(ctx, n, target, Config{Count: 10000, Rate: 1000})
			if got := tcxCount(t, n, dst); got != before {
				t.Errorf("%d tcx programs on the interface after a cancelled run, %d before", got, before)
			}
		})
	}
}
