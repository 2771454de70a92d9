// Package tcstamp times the rtt probe's echoes where they leave and reach the sender's own
// interface, the same two kernel points for every attachment driver: tc (tcx) programs at the
// interface's egress (dev_queue_xmit, before the qdisc) and ingress (__netif_receive_skb_core,
// whichever way the reply came in). The socket's software timestamps land at different points
// per driver — a veth's reply is stamped again when it crosses into the sender's namespace
// (netif_rx of the veth), a macvlan's keeps the stamp its lower device gave it on the host, a
// bpf_redirect_peer'd reply keeps the one from the host's first hop, and macvlan gives no
// driver TX stamp at all — so a "path" from those stamps ends at a different place per driver.
//
// The programs are attached by tcx links owned by this process: Close detaches them, and so
// does the process's exit, a crash included (nothing is pinned). They need Linux 6.6+ (tcx);
// on an older kernel Attach fails and says so.
package tcstamp

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Slots is how many echoes' stamps the programs hold: an echo's slot is its sequence number
// modulo Slots, so in a longer run only the last Slots echoes keep theirs.
const Slots = 1 << 18

// ErrUnsupported is returned when the kernel cannot attach the programs (no tcx).
var ErrUnsupported = errors.New("tc stamps need tcx (Linux 6.6 or later) and CAP_BPF/CAP_NET_ADMIN")

// Stamps are the programs attached to one interface for one run.
type Stamps struct {
	objs    tcstampObjects
	links   []link.Link
	offset  int64 // CLOCK_REALTIME - CLOCK_TAI at Attach (ns, whole seconds)
	Ifindex int
	Ifname  string
}

// Stamp is one echo's times at the interface, in ns since the epoch (the programs' TAI
// clock moved onto the wall clock by the whole-second offset taken at Attach, so that they line up with
// the socket's and user space's stamps; a difference of two is exact either way). 0: not seen.
type Stamp struct {
	Out, In int64
	// ID is the run id the echo carried.
	ID uint32
	// Dups counts further replies.
	Dups uint32
}

// Route returns the interface the current network namespace sends to dst by (its index and
// name). Call it where Attach will be called.
func Route(dst netip.Addr) (int, string, error) {
	routes, err := netlink.RouteGet(dst.AsSlice())
	if err != nil || len(routes) == 0 {
		return 0, "", fmt.Errorf("find the interface to %s: %v", dst, err)
	}
	l, err := netlink.LinkByIndex(routes[0].LinkIndex)
	if err != nil {
		return 0, "", fmt.Errorf("find the interface to %s: %w", dst, err)
	}
	return routes[0].LinkIndex, l.Attrs().Name, nil
}

// Attach loads the programs and attaches them at egress and ingress of ifindex in the
// current network namespace (call it on a thread in the sender's), ahead of any other tcx
// program there, for an echo's UDP port port (ICMP needs none).
func Attach(ifindex int, ifname string, port uint16) (*Stamps, error) {
	spec, err := loadTcstamp()
	if err != nil {
		return nil, fmt.Errorf("load tc stamps: %w", err)
	}
	if err := spec.Variables["udp_port"].Set(port); err != nil {
		return nil, fmt.Errorf("load tc stamps: %w", err)
	}
	s := &Stamps{Ifindex: ifindex, Ifname: ifname}
	if err := spec.LoadAndAssign(&s.objs, nil); err != nil {
		return nil, fmt.Errorf("load tc stamps: %w", err)
	}
	for _, a := range []struct {
		prog *ebpf.Program
		at   ebpf.AttachType
	}{{s.objs.TcstampOut, ebpf.AttachTCXEgress}, {s.objs.TcstampIn, ebpf.AttachTCXIngress}} {
		l, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: a.prog, Attach: a.at, Anchor: link.Head()})
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("attach tc stamps to %s: %w (%w)", ifname, err, ErrUnsupported)
		}
		s.links = append(s.links, l)
	}
	s.offset = clockOffset()
	return s, nil
}

// clockOffset is CLOCK_REALTIME - CLOCK_TAI. The two differ by whole seconds (the TAI-UTC
// offset the system was told, 0 where nobody set it), so the difference of two readings is
// rounded to the second: a preemption between the readings cannot skew it, and NTP, which
// slews both clocks alike, cannot make it drift during a run (a monotonic clock would).
func clockOffset() int64 {
	var r, tai unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_REALTIME, &r)
	_ = unix.ClockGettime(unix.CLOCK_TAI, &tai)
	return roundSecond(r.Nano() - tai.Nano())
}

// roundSecond rounds d (ns) to the nearest whole second.
func roundSecond(d int64) int64 {
	const s = int64(1e9)
	if d < 0 {
		return -roundSecond(-d)
	}
	return (d + s/2) / s * s
}

// Read returns the stamps of echoes 0..n-1 (index: sequence number) whose slot still holds
// them; the others are zero.
func (s *Stamps) Read(n int) ([]Stamp, error) {
	out := make([]Stamp, n)
	var key uint32
	var v tcstampStamp
	for seq := max(0, n-Slots); seq < n; seq++ {
		key = uint32(seq) & (Slots - 1)
		if err := s.objs.Stamps.Lookup(&key, &v); err != nil {
			return nil, fmt.Errorf("read tc stamps: %w", err)
		}
		if v.Seq != uint64(seq) || v.Out == 0 {
			continue
		}
		st := Stamp{Out: int64(v.Out) + s.offset, ID: v.Id, Dups: v.Dups}
		if v.In != 0 {
			st.In = int64(v.In) + s.offset
		}
		out[seq] = st
	}
	return out, nil
}

// Close detaches the programs and frees them.
func (s *Stamps) Close() error {
	var errs []error
	for _, l := range s.links {
		errs = append(errs, l.Close())
	}
	s.links = nil
	errs = append(errs, s.objs.Close())
	return errors.Join(errs...)
}
