package vm_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/probe/ndr/send"
	"github.com/sfclab/sfclab/probe/rtt/echo"
	"github.com/sfclab/sfclab/runtime/vm"
)

// vmsrcLab (a busybox VM source, a namespace forwarder and server) under a lab name of its own.
var cancelLab = strings.Replace(vmsrcLab, "name: vmsrc-rn", "name: t-gocancel", 1)

// TestVMSourceCancelled runs the rtt probe's echoes (ICMP, 200/s, 100,000 of them: over
// eight minutes) and an ndr trial (5 minutes) from a VM source and cancels each once the
// server's interface counts them arriving: the host's call returns at once, and the packets
// reaching the server stop soon after (the guest stopped sending), not at the run's bound. The
// agent then still runs a short rtt to the end.
func TestVMSourceCancelled(t *testing.T) {
	requireVM(t)
	t.Parallel() // beside the package's other VM tests (vm_test.go)
	labtest.Exclusive(t)
	l := labtest.Deploy(t, cancelLab)
	client, ok := l.Node(t, "client").(*vm.Node)
	if !ok {
		t.Fatalf("client is a %T, not a VM node", l.Node(t, "client"))
	}
	srv := l.P.Node("server")
	dst := srv.Interfaces[0].Address.Addr()
	// received is how many packets the server's interface took (the host's kernel counts them).
	received := func() uint64 {
		ns, err := netdev.OpenNS(srv.Netns)
		if err != nil {
			t.Fatal(err)
		}
		defer ns.Close()
		links, err := ns.Links()
		if err != nil {
			t.Fatal(err)
		}
		for _, li := range links {
			if li.Name == srv.Interfaces[0].Name {
				return li.Stats.RxPackets
			}
		}
		t.Fatalf("no %s in the server's namespace", srv.Interfaces[0].Name)
		return 0
	}
	// rise is how many packets reached the server in the next 2 s.
	rise := func() uint64 {
		a := received()
		time.Sleep(2 * time.Second)
		return received() - a
	}
	// cancelled starts run, waits for its packets to reach the server, cancels it and checks
	// that the call returns and the packets stop: generous bounds, a loaded host's TCG guest.
	cancelled := func(what string, run func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		errc := make(chan error, 1)
		go func() { errc <- run(ctx) }()
		var sending uint64
		for end := time.Now().Add(90 * time.Second); sending < 50; {
			if sending = rise(); time.Now().After(end) {
				cancel()
				t.Fatalf("%s: %d packets reached the server in 2 s after 90 s: the guest is not sending (%v)", what, sending, <-errc)
			}
		}
		cancel()
		t0 := time.Now()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s cancelled: %v; want the context's error", what, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the call did not return within 30 s of its cancel", what)
		}
		returned := time.Since(t0)
		for end := time.Now().Add(60 * time.Second); ; {
			late := rise()
			if late <= sending/10 {
				t.Logf("%s: %d packets/2 s reached the server while sending, %d/2 s after the cancel; the call returned %s after it, the packets stopped within %s",
					what, sending, late, returned.Round(time.Millisecond), time.Since(t0).Round(100*time.Millisecond))
				return
			}
			if time.Now().After(end) {
				t.Fatalf("%s: %d packets/2 s still reach the server 60 s after the cancel (%d while sending): the guest did not stop", what, late, sending)
			}
		}
	}

	cancelled("rtt (ICMP, 100000 echoes at 200/s)", func(ctx context.Context) error {
		_, err := client.Echo(ctx, netip.AddrPortFrom(dst, 0), echo.Config{Protocol: echo.ProtoICMP, Rate: 200, Count: echo.MaxGuestCount, PathEnd: echo.PathEndSocket})
		return err
	})
	s, err := client.OpenSender(context.Background(), netip.AddrPortFrom(dst, 5201), []string{"64"})
	if err != nil {
		t.Fatal(err)
	}
	cancelled("ndr trial (5 min at 1000 pps)", func(ctx context.Context) error {
		_, err := s.Send(ctx, send.Trial{Frame: "64", ID: 1, Rate: 1000, Duration: send.MaxTrial})
		return err
	})
	if err := s.Close(); err != nil {
		t.Error(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := client.Echo(ctx, netip.AddrPortFrom(dst, 0), echo.Config{Protocol: echo.ProtoICMP, Rate: 100, Count: 10, PathEnd: echo.PathEndSocket})
	if err != nil || res.Sent != 10 || res.Received != 10 {
		t.Errorf("rtt after the cancelled runs: %+v, %v; want 10 echoes sent and answered", res, err)
	}
}
