package ndr

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sfclab/sfclab/probe/ndr/count"
	"golang.org/x/sys/unix"
)

// Header sizes that turn an Ethernet frame size (with FCS, as RFC 2544 counts it) into a UDP
// payload: 14 Ethernet + 4 FCS + 20 IPv4 + 8 UDP.
const frameOverhead = 14 + 4 + 20 + 8

// minPayload holds the trial id (4 bytes) and the sequence number (8 bytes).
const minPayload = count.MinPayload

// batch is how many datagrams one sendmmsg/recvmmsg call moves.
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

// meanFrame is the average frame size of a cycle.
func meanFrame(cycle []int) float64 {
	t := 0
	for _, f := range cycle {
		t += f
	}
	return float64(t) / float64(len(cycle))
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
// trial id, and returns how many the kernel took.
func (s *Sender) Send(trial uint32, pps float64, d time.Duration) (uint64, time.Duration, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var sent uint64
	start := time.Now()
	end := start.Add(d)
	k := 0
	for {
		now := time.Now()
		if !now.Before(end) {
			break
		}
		n := batch
		if pps > 0 {
			due := uint64(pps * now.Sub(start).Seconds())
			if due <= sent {
				wait := time.Duration(float64(batch) / pps * float64(time.Second) / 2)
				if wait > 200*time.Microsecond {
					time.Sleep(min(wait, time.Millisecond))
				}
				continue
			}
			n = int(min(uint64(batch), due-sent))
		}
		for i := 0; i < n; i++ {
			size := max(PayloadSize(s.cycle[k%len(s.cycle)]), minPayload)
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
			refused.Add(1)
			sent++
			continue
		case errno == unix.EAGAIN || errno == unix.ECONNREFUSED:
			continue // not sent (an ICMP error from an earlier datagram), not counted
		case errno != 0:
			return sent, time.Since(start), fmt.Errorf("sendmmsg: %w", errno)
		}
		sent += uint64(r)
	}
	return sent, time.Since(start), nil
}

// refused counts datagrams a local queue refused with ENOBUFS (for tests and diagnostics).
var refused atomic.Uint64

// Receiver counts the datagrams of every trial on a bound UDP socket with recvmmsg(2)
// (package count, which a VM guest's agent runs too).
type Receiver = count.Receiver

// NewReceiver starts counting on fd (bound, with a receive timeout so that Close returns).
func NewReceiver(fd int) *Receiver { return count.NewReceiver(fd) }

// udpSocket opens a UDP socket in the calling thread's network namespace: bound to bind
// (receiver) or connected to dst (sender).
func udpSocket(bind, dst netip.AddrPort) (int, error) {
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

// udpRcvbufErrors reads the UDP receive buffer errors of the calling thread's namespace.
func udpRcvbufErrors() (uint64, error) { return count.RcvbufErrors() }

func closeFD(fd int) { _ = unix.Close(fd) }

// calibrate measures how fast the sender can send when no chain is in the way: unpaced, for
// 300 ms per frame size, into a socket of its own node that nobody reads.
func calibrate(src interface{ Do(func() error) error }, frames []string) (map[string]float64, error) {
	out := map[string]float64{}
	var sink, fd int
	err := src.Do(func() (err error) {
		if sink, err = udpSocket(netip.MustParseAddrPort("127.0.0.1:0"), netip.AddrPort{}); err != nil {
			return err
		}
		sa, err := unix.Getsockname(sink)
		if err != nil {
			return err
		}
		port := uint16(sa.(*unix.SockaddrInet4).Port)
		fd, err = udpSocket(netip.AddrPort{}, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("calibrate ndr sender: %w", err)
	}
	defer closeFD(sink)
	defer closeFD(fd)
	for _, f := range frames {
		cycle, err := Frames(f)
		if err != nil {
			return nil, err
		}
		sent, took, err := NewSender(fd, cycle).Send(0, 0, 300*time.Millisecond)
		if err != nil {
			return nil, fmt.Errorf("calibrate ndr sender: %w", err)
		}
		out[f] = float64(sent) / took.Seconds()
	}
	return out, nil
}
