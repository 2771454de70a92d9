package ndr

import (
	"net/netip"

	"github.com/sfclab/sfclab/probe/ndr/count"
	"github.com/sfclab/sfclab/probe/ndr/send"
	"golang.org/x/sys/unix"
)

// The socket sender is package send's (a VM guest source's agent runs the same code).

// PayloadSize is the UDP payload of an Ethernet frame of the given size.
func PayloadSize(frame int) int { return send.PayloadSize(frame) }

// IMIX is the Simple IMIX of 7 frames of 64 bytes, 4 of 570 and 1 of 1518 (average 353.8).
var IMIX = send.IMIX

// Frames parses a frame size: a number of bytes (64-9018) or "imix"; it returns the cycle of
// frame sizes a sender repeats.
func Frames(s string) ([]int, error) { return send.Frames(s) }

// meanFrame is the average frame size of a cycle.
func meanFrame(cycle []int) float64 {
	t := 0
	for _, f := range cycle {
		t += f
	}
	return float64(t) / float64(len(cycle))
}

// Sender sends paced UDP datagrams on a connected socket with sendmmsg(2) (package send).
type Sender = send.Sender

// NewSender makes a sender on a UDP socket fd connected to the receiver; frames is the cycle
// of frame sizes it sends.
func NewSender(fd int, frames []int) *Sender { return send.NewSender(fd, frames) }

// refused counts datagrams a local queue refused with ENOBUFS (for tests and diagnostics).
var refused = &send.Refused

// Receiver counts the datagrams of every trial on a bound UDP socket with recvmmsg(2)
// (package count, which a VM guest's agent runs too).
type Receiver = count.Receiver

// NewReceiver starts counting on fd (bound, with a receive timeout so that Close returns).
func NewReceiver(fd int) *Receiver { return count.NewReceiver(fd) }

// udpSocket opens a UDP socket in the calling thread's network namespace: bound to bind
// (receiver) or connected to dst (sender).
func udpSocket(bind, dst netip.AddrPort) (int, error) { return send.Socket(bind, dst) }

// udpRcvbufErrors reads the UDP receive buffer errors of the calling thread's namespace.
func udpRcvbufErrors() (uint64, error) { return count.RcvbufErrors() }

func closeFD(fd int) { _ = unix.Close(fd) }

// calibrate measures how fast the sender can send when no chain is in the way: unpaced, for
// 300 ms per frame size, into a socket of its own node that nobody reads (send.Calibrate).
func calibrate(src interface{ Do(func() error) error }, frames []string) (map[string]float64, error) {
	return send.Calibrate(src.Do, frames)
}
