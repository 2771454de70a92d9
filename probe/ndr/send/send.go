// Package send is the ndr probe's socket sender: paced UDP datagrams on a connected socket
// with sendmmsg(2), each carrying its trial id and sequence number, and the sender's
// calibration (how fast it sends with no chain in the way). It imports nothing of sfclab, so
// that a VM guest's agent (runtime/vm, linked alone into sfclab-guest) runs a VM source's
// sender with the same code the probe runs in a namespace, without linking the probes' and
// results' packages (as package count does for the receiver).
package send

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sfclab/sfclab/probe/ndr/count"
)

// Header sizes that turn an Ethernet frame size (with FCS, as RFC 2544 counts it) into a UDP
// payload: 14 Ethernet + 4 FCS + 20 IPv4 + 8 UDP.
const frameOverhead = 14 + 4 + 20 + 8

// batch is how many datagrams one sendmmsg call moves.
const batch = 64

// PayloadSize is the UDP payload of an Ethernet frame of the given size.
func PayloadSize(frame int) int { return frame - frameOverhead }

// IMIX is the Simple IMIX of 7 frames of 64 bytes, 4 of 570 and 1 of 1518 (average 353.8).
var IMIX = []int{64, 570, 64, 64, 1518, 64, 570, 64, 64, 570, 64, 570}

// Frames parses a frame size: a number of bytes (64-9018) or "imix"; it returns the cycle of
// frame sizes a sender repeats.
func Frames(s string) ([]int, error) {
	if strings.EqualFold(s, "imix") {
		return IMIX, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 64 || n > 9018 {
		return nil, fmt.Errorf("frame size %q: give bytes from 64 to 9018 or imix", s)
	}
	return []int{n}, nil
}

type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
	_   [4]byte
}

// Sender sends paced UDP datagrams on a connected socket with sendmmsg(2): iperf3's UDP mode
// sends one datagram per system call and could not offer more than a chain takes here.
type Sender struct {
	fd    int
	cycle []int
	bufs  [][]byte
	iov   []unix.Iovec
	msgs  []mmsghdr
}

// NewSender makes a sender on a UDP socket fd connected to the receiver; frames is the cycle
// of frame sizes it sends.
func NewSender(fd int, frames []int) *Sender {
	s := &Sender{fd: fd, cycle: frames}
	s.bufs = make([][]byte, batch)
	s.iov = make([]unix.Iovec, batch)
	s.msgs = make([]mmsghdr, batch)
	for i := range s.bufs {
		s.bufs[i] = make([]byte, 9018)
		s.iov[i].Base = &s.bufs[i][0]
		s.msgs[i].hdr.Iov = &s.iov[i]
		s.msgs[i].hdr.Iovlen = 1
	}
	return s
}

// Send offers pps datagrams per second (0: as fast as it can) for d, each stamped with the
// trial id, and returns how many the kernel took and how long it sent.
//
// The time returned is the pacing schedule's, not the loop's: a paced sender that kept up
// has sent every datagram due by its last look at the clock, so the span runs to that look
// (and to at least the last send), never to a wake-up after the trial's end. A sleep's
// overshoot past the end (a millisecond asked, several taken on a loaded host or by an
// emulated CPU's timers: 8 ms of 300 ms showed a TCG guest's sender 2.7 % short of its rate)
// would otherwise count as time it did not send in.
func (s *Sender) Send(trial uint32, pps float64, d time.Duration) (uint64, time.Duration, error) {
	return s.SendContext(context.Background(), trial, pps, d)
}

// SendContext is Send that stops when ctx ends (a guest's agent sending a trial its host
// cancelled), returning what it sent so far and ctx's error.
func (s *Sender) SendContext(ctx context.Context, trial uint32, pps float64, d time.Duration) (uint64, time.Duration, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var sent uint64
	start := time.Now()
	end := start.Add(d)
	done := ctx.Done() // nil for a context that never ends: the check below costs nothing then
	k := 0
	var caughtUp time.Time // the last look at the clock that found nothing more due
	took := func() time.Duration {
		if pps > 0 && !caughtUp.IsZero() {
			return caughtUp.Sub(start)
		}
		return time.Since(start)
	}
	for {
		now := time.Now()
		if !now.Before(end) {
			break
		}
		select {
		case <-done:
			return sent, time.Since(start), fmt.Errorf("send ndr trial %d: %w", trial, ctx.Err())
		default:
		}
		n := batch
		if pps > 0 {
			due := uint64(pps * now.Sub(start).Seconds())
			if due <= sent {
				caughtUp = now
				wait := time.Duration(float64(batch) / pps * float64(time.Second) / 2)
				if wait > 200*time.Microsecond {
					time.Sleep(min(wait, time.Millisecond, end.Sub(now)))
				}
				continue
			}
			caughtUp = time.Time{}
			n = int(min(uint64(batch), due-sent))
		}
		for i := 0; i < n; i++ {
			size := max(PayloadSize(s.cycle[k%len(s.cycle)]), count.MinPayload)
			k++
			b := s.bufs[i]
			binary.BigEndian.PutUint32(b[0:4], trial)
			binary.BigEndian.PutUint64(b[4:12], sent+uint64(i))
			s.iov[i].Len = uint64(size)
		}
		r, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(s.fd), uintptr(unsafe.Pointer(&s.msgs[0])), uintptr(n), 0, 0, 0)
		switch {
		case errno == unix.ENOBUFS:
			// A queue on the way dropped the batch's first datagram and said so: it was
			// offered to the chain and lost, so it counts as sent.
			Refused.Add(1)
			sent++
			continue
		case errno == unix.EAGAIN || errno == unix.ECONNREFUSED:
			continue // not sent (an ICMP error from an earlier datagram), not counted
		case errno != 0:
			return sent, took(), fmt.Errorf("sendmmsg: %w", errno)
		}
		sent += uint64(r)
	}
	return sent, took(), nil
}

// Refused counts datagrams a local queue refused with ENOBUFS (for tests and diagnostics).
var Refused atomic.Uint64

// Socket opens a UDP socket in the calling thread's network namespace: bound to bind
// (receiver) or connected to dst (sender).
func Socket(bind, dst netip.AddrPort) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open udp socket: %w", err)
	}
	fail := func(what string, err error) (int, error) {
		unix.Close(fd)
		return -1, fmt.Errorf("%s: %w", what, err)
	}
	if bind.IsValid() {
		// A big buffer, so that the receiver is not where packets are lost.
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20)
		_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000})
		if err := unix.Bind(fd, &unix.SockaddrInet4{Port: int(bind.Port()), Addr: bind.Addr().As4()}); err != nil {
			return fail("bind "+bind.String(), err)
		}
	}
	if dst.IsValid() {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4<<20)
		if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()}); err != nil {
			return fail("connect "+dst.String(), err)
		}
	}
	return fd, nil
}

// CalibrationTime is how long Calibrate sends per frame size.
const CalibrationTime = 300 * time.Millisecond

// Calibrate measures how fast the sender can send when no chain is in the way: unpaced, for
// CalibrationTime per frame size, into a socket of its own node that nobody reads. do runs
// its argument in the sender's network stack (a node's Do; in a guest's agent, a plain call).
func Calibrate(do func(func() error) error, frames []string) (map[string]float64, error) {
	out := map[string]float64{}
	sink, fd := -1, -1
	defer func() {
		if sink >= 0 {
			unix.Close(sink)
		}
		if fd >= 0 {
			unix.Close(fd)
		}
	}()
	err := do(func() (err error) {
		if sink, err = Socket(netip.MustParseAddrPort("127.0.0.1:0"), netip.AddrPort{}); err != nil {
			return err
		}
		sa, err := unix.Getsockname(sink)
		if err != nil {
			return err
		}
		port := uint16(sa.(*unix.SockaddrInet4).Port)
		fd, err = Socket(netip.AddrPort{}, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("calibrate ndr sender: %w", err)
	}
	for _, f := range frames {
		cycle, err := Frames(f)
		if err != nil {
			return nil, err
		}
		sent, took, err := NewSender(fd, cycle).Send(0, 0, CalibrationTime)
		if err != nil {
			return nil, fmt.Errorf("calibrate ndr sender: %w", err)
		}
		out[f] = float64(sent) / took.Seconds()
	}
	return out, nil
}

// MaxTrial bounds one trial's sending time (the ndr probe's own bound on its trials).
const MaxTrial = 5 * time.Minute

// Trial is one trial's sending in a guest: Frame is the frame size (Frames), Rate the
// offered rate (packets/s, 0: unpaced), Duration how long it sends (at most MaxTrial).
type Trial struct {
	Frame    string        `json:"frame"`
	ID       uint32        `json:"id"`
	Rate     float64       `json:"rate"`
	Duration time.Duration `json:"duration"`
}

// Validate checks a trial before it is sent.
func (t Trial) Validate() error {
	if _, err := Frames(t.Frame); err != nil {
		return fmt.Errorf("ndr trial: %w", err)
	}
	if t.Rate < 0 || t.Rate > 1e9 {
		return fmt.Errorf("ndr trial: rate %g must be 0 (unpaced) to 1e9 packets/s", t.Rate)
	}
	if t.Duration <= 0 || t.Duration > MaxTrial {
		return fmt.Errorf("ndr trial: duration %s must be above 0 and at most %s", t.Duration, MaxTrial)
	}
	return nil
}

// Sent is what a trial's sender did: the datagrams the kernel took and how long it sent, by
// the clock of the stack it ran in (a guest's own, an emulated one under TCG).
type Sent struct {
	Datagrams uint64        `json:"datagrams"`
	Took      time.Duration `json:"took"`
}

// Guest is a VM guest source whose agent runs the sender (runtime/vm.Node): Open connects a
// sender to dst in the guest and calibrates it for frames there.
type Guest interface {
	OpenSender(ctx context.Context, dst netip.AddrPort, frames []string) (Remote, error)
}

// Remote is a sender in a guest: its calibration (packets/s per frame size, timed in the
// guest), one call per trial, closed when the search ends.
type Remote interface {
	Calibrated() map[string]float64
	Send(ctx context.Context, t Trial) (Sent, error)
	Close() error
}
