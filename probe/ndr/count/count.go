// Package count is the ndr probe's receiver: it counts the datagrams of each trial on a bound
// UDP socket with recvmmsg(2). It imports nothing of sfclab, so that a VM guest's agent
// (runtime/vm, linked alone into sfclab-guest) counts a VM destination's datagrams with the
// same code as the probe runs in a namespace, without linking the probes' and results'
// packages (as tcprtt/exchange does for tcprtt).
package count

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MinPayload is the smallest datagram counted: the trial id (4 bytes, big endian) and the
// sequence number (8 bytes) the sender writes first in each.
const MinPayload = 12

// batch is how many datagrams one recvmmsg call reads.
const batch = 64

type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
	_   [4]byte
}

// Receiver counts the datagrams of every trial on a bound UDP socket with recvmmsg(2).
type Receiver struct {
	fd     int
	mu     sync.Mutex
	counts map[uint32]*atomic.Uint64
	err    error
	wg     sync.WaitGroup
	stop   atomic.Bool
}

// NewReceiver starts counting on fd (bound, with a receive timeout so that Close returns).
func NewReceiver(fd int) *Receiver {
	r := &Receiver{fd: fd, counts: map[uint32]*atomic.Uint64{}}
	r.wg.Add(1)
	go r.loop()
	return r
}

func (r *Receiver) counter(trial uint32) *atomic.Uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.counts[trial]
	if c == nil {
		c = new(atomic.Uint64)
		r.counts[trial] = c
	}
	return c
}

func (r *Receiver) loop() {
	defer r.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	bufs := make([][]byte, batch)
	iov := make([]unix.Iovec, batch)
	msgs := make([]mmsghdr, batch)
	for i := range bufs {
		bufs[i] = make([]byte, 64) // only the header is read; the rest is truncated
		iov[i].Base = &bufs[i][0]
		iov[i].SetLen(len(bufs[i]))
		msgs[i].hdr.Iov = &iov[i]
		msgs[i].hdr.Iovlen = 1
	}
	var last uint32
	var c *atomic.Uint64
	for !r.stop.Load() {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(r.fd), uintptr(unsafe.Pointer(&msgs[0])), batch, unix.MSG_WAITFORONE, 0, 0)
		if errno == unix.EAGAIN || errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			r.err = fmt.Errorf("recvmmsg: %w", errno)
			return
		}
		for i := 0; i < int(n); i++ {
			if msgs[i].n < MinPayload {
				continue
			}
			id := binary.BigEndian.Uint32(bufs[i][0:4])
			if c == nil || id != last {
				c, last = r.counter(id), id
			}
			c.Add(1)
		}
	}
}

// Count is how many datagrams of a trial arrived so far.
func (r *Receiver) Count(trial uint32) uint64 { return r.counter(trial).Load() }

// Settled is the count of trial once it stopped growing: when no datagram of the trial came
// for quiet, or at the latest when bound passed (the count then, which a caller may compare
// with Count later). A receiver far behind its sender (a guest's emulated CPU) still has the
// trial's datagrams in its socket after the sender's drain: they are counted, not lost.
func (r *Receiver) Settled(ctx context.Context, trial uint32, quiet, bound time.Duration) uint64 {
	c := r.counter(trial)
	end := time.Now().Add(bound)
	last, since := c.Load(), time.Now()
	step := max(min(quiet/5, 20*time.Millisecond), time.Millisecond)
	for time.Since(since) < quiet && time.Now().Before(end) && ctx.Err() == nil {
		time.Sleep(step)
		if n := c.Load(); n != last {
			last, since = n, time.Now()
		}
	}
	return c.Load()
}

// Close stops counting and closes the socket.
func (r *Receiver) Close() error {
	r.stop.Store(true)
	r.wg.Wait()
	return errors.Join(r.err, unix.Close(r.fd))
}

// Bind opens a UDP (IPv4) socket bound to port on all addresses of the calling thread's
// network namespace, with a big receive buffer (so that the receiver is not where datagrams
// are lost) and a receive timeout (so that a Receiver on it closes).
func Bind(port uint16) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open udp socket: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000})
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: int(port)}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind 0.0.0.0:%d: %w", port, err)
	}
	return fd, nil
}

// RcvbufErrors reads the UDP receive buffer errors of the calling thread's network namespace
// (in a guest: its kernel's).
//
// Equivalent to: ip netns exec NS nstat -az UdpRcvbufErrors
func RcvbufErrors() (uint64, error) {
	data, err := os.ReadFile("/proc/thread-self/net/snmp")
	if err != nil {
		return 0, err
	}
	return ParseRcvbufErrors(string(data))
}

// ParseRcvbufErrors returns the RcvbufErrors of /proc/net/snmp's Udp lines.
func ParseRcvbufErrors(snmp string) (uint64, error) {
	var head []string
	for _, line := range strings.Split(snmp, "\n") {
		if !strings.HasPrefix(line, "Udp: ") {
			continue
		}
		f := strings.Fields(line)
		if head == nil {
			head = f
			continue
		}
		for i, h := range head {
			if h == "RcvbufErrors" && i < len(f) {
				return strconv.ParseUint(f[i], 10, 64)
			}
		}
	}
	return 0, errors.New("no UdpRcvbufErrors in /proc/net/snmp")
}

// Reading is what a receiver in a guest reports of a trial.
type Reading struct {
	// Received is the trial's datagrams counted (settled: see Receiver.Settled).
	Received uint64 `json:"received"`
	// RcvbufErrors is the guest kernel's UdpRcvbufErrors when it was read.
	RcvbufErrors uint64 `json:"rcvbuf_errors"`
}

// Guest is a destination node whose network stack Go code cannot enter (a VM guest): its
// agent runs the receiver.
type Guest interface {
	// ListenCount starts a Receiver on port (IPv4, all addresses) in the node.
	ListenCount(ctx context.Context, port uint16) (Counter, error)
}

// Counter is a Receiver in a guest.
type Counter interface {
	// Read returns the trial's count once settled for quiet (0: at once), and the guest's
	// UdpRcvbufErrors after it.
	Read(ctx context.Context, trial uint32, quiet time.Duration) (Reading, error)
	// Close stops the receiver and closes its socket.
	Close() error
}
