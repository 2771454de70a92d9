package rtt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	goruntime "runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Doer runs fn inside a node's network namespace (probe.Node satisfies it): the sockets fn
// creates belong to the node.
type Doer interface {
	Do(fn func() error) error
}

// floodRelease is how long a flood (Rate Max) waits for a reply before it sends the next echo
// anyway: ping -f's 10 ms.
const floodRelease = 10 * time.Millisecond

const (
	// spinUnder is the wait below which the probe's thread watches the clock instead of
	// sleeping: going to sleep and waking up again costs more than that here.
	spinUnder = 20 * time.Microsecond
	// maxBatch bounds the echoes sent in one call when the probe is behind its schedule, and
	// the replies or timestamps read in one call.
	maxBatch = 64
	// maxTries bounds the attempts to send one echo while the socket's buffer is full.
	maxTries = 10_000
	// parkAbove is the wait above which the probe's goroutine parks on Go's poller (see park),
	// until parkLead before the due time. Measured on loopback (2 s per rate, this VM): at
	// 10 pps parking cost 0.5-0.65 % of a core against 1.4-1.5 % in ppoll, at 100 pps
	// 3.3-4.0 % against 2.1-2.4 %: a wake-up through Go's poller and scheduler costs more
	// than the preemptions it saves, unless the wait is long.
	parkAbove = 30 * time.Millisecond
	parkLead  = 1500 * time.Microsecond
)

// Measure sends cfg.Count echoes (or as many as fit in cfg.Duration) at cfg.Rate from inside
// src to dst, and returns every echo's timestamps. For UDP, something must echo at dst (see
// StartResponder). It returns an error only when the probe cannot run (no socket, a send that
// fails other than with a full buffer); lost echoes are data.
//
// One locked thread does everything: it sleeps until the next echo is due or a reply or
// timestamp is queued (ppoll with no timer slack), sends the echoes due (one sendmmsg when it
// is behind), and reads what is queued (recvmmsg, replies and the error queue's TX timestamps
// separately). So an echo costs one wake-up at most, and on a veth path, where the whole round
// trip runs inside the send call, none: the reply and its timestamps are read right after it.
//
// Equivalent to (icmp, Rate 1000): ping -n -i 0.001 -s SIZE-8 -c COUNT DST, with
// SO_TIMESTAMPING in place of ping's SO_TIMESTAMP.
func Measure(ctx context.Context, src Doer, dst netip.AddrPort, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var s *sock
	if err := src.Do(func() (err error) { s, err = openSocket(cfg.Protocol, dst); return err }); err != nil {
		return nil, fmt.Errorf("measure rtt to %s: %w", dst, err)
	}
	defer s.Close()
	w, err := newWaker()
	if err != nil {
		return nil, fmt.Errorf("measure rtt to %s: %w", dst, err)
	}
	defer w.Close()
	m := newMeasurement(cfg, s, w)
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	wall0 := time.Now()

	stop := context.AfterFunc(ctx, w.fire)
	defer stop()
	var rerr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		rerr = m.run(ctx)
	}()
	<-done

	var ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	r := m.result()
	r.Wall = time.Since(wall0)
	r.CPUUser = time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano())
	r.CPU = r.CPUUser + time.Duration(ru1.Stime.Nano()-ru0.Stime.Nano())
	if rerr != nil {
		return r, fmt.Errorf("measure rtt to %s: %w", dst, rerr)
	}
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	return r, nil
}

// waker wakes the probe's thread from its wait when the context ends: an eventfd beside the
// socket in its ppoll set, and the deadline of the socket's copy a long wait parks on.
type waker struct {
	mu     sync.Mutex
	fd     int
	closed bool
	fired  bool
	cur    *os.File // the copy a long wait parks on (see park)
}

func newWaker() (*waker, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("create wake-up event: %w", err)
	}
	return &waker{fd: fd}, nil
}

// fire makes the event readable (until Close).
func (w *waker) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fired = true
	if w.cur != nil {
		_ = w.cur.SetReadDeadline(time.Now())
	}
	if !w.closed {
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1)
		_, _ = unix.Write(w.fd, one[:])
	}
}

// watch returns a copy of fd registered with Go's poller, for one long wait; nil once fired.
func (w *waker) watch(fd int) *os.File {
	nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(nfd), "rtt-wait") // non-blocking: registered with the poller
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fired {
		f.Close()
		return nil
	}
	w.cur = f
	return f
}

// unwatch ends a long wait: the copy leaves the poller and is closed.
func (w *waker) unwatch(f *os.File) {
	w.mu.Lock()
	w.cur = nil
	w.mu.Unlock()
	f.Close()
}

// Close releases the event; fire does nothing after it.
func (w *waker) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	return unix.Close(w.fd)
}

// measurement is one run's state, owned by the probe's thread (run) until it ends.
type measurement struct {
	cfg    Config
	s      *sock
	w      *waker
	id     uint32
	msgLen int // bytes of one echo message as sent (ICMP header + payload, or UDP payload)

	sent, txK, rxK, rxU []int64 // ns since the epoch, 0 = none; index = sequence number
	txS                 []int64 // device-layer (SCHED) TX stamps, used where the driver gives none

	tx, rx, errq *batch
	pfd          []unix.PollFd // the socket, the waker
	ts           unix.Timespec
	rawWait      bool // see ppoll
	sched        bool // the socket still asks for device-layer TX stamps

	nsent, received, errors   int64
	dups, reordered, txStamps int64
	maxSeq                    int64
	first, last               int64 // first and last send, ns
	retries                   int64
}

func newMeasurement(cfg Config, s *sock, w *waker) *measurement {
	n, wake := cfg.Count, w.fd
	m := &measurement{cfg: cfg, s: s, w: w, id: rand.Uint32(), msgLen: len(message(cfg.Protocol, cfg.Size)),
		sent: make([]int64, n), txK: make([]int64, n), txS: make([]int64, n), rxK: make([]int64, n), rxU: make([]int64, n),
		pfd:   []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}, {Fd: int32(wake), Events: unix.POLLIN}},
		sched: true}
	b := min(n, maxBatch)
	if cfg.Rate == Max {
		b = min(b, cfg.Window)
	}
	m.tx = newBatch(b, m.msgLen, 0)
	if s.name != nil {
		m.tx.setName(unsafe.Pointer(s.name), unix.SizeofSockaddrInet4)
	}
	// A raw ICMP socket reads the IPv4 header (up to 60 bytes) in front of the message; an
	// ICMP error about an echo quotes its IPv4 header (up to 60 bytes) and 8 bytes of it.
	m.rx = newBatch(maxBatch/4, m.msgLen+128, 256)
	m.errq = newBatch(maxBatch/2, 1, 256)
	return m
}

// run sends the echoes, each due at start + seq/rate (late ones go at once, in one call, so
// the schedule does not drift), until Count are sent, Duration has passed or ctx ends; it
// reads replies and timestamps as they come, and until every echo came back or Timeout after
// the last send.
func (m *measurement) run(ctx context.Context) error {
	// Locked and never unlocked: the thread ends with this goroutine, and its timer slack and
	// core affinity with it.
	goruntime.LockOSThread()
	if err := pin(m.cfg.CPUs); err != nil {
		return err
	}
	// No timer slack on this thread: ppoll's wake-up would otherwise come up to 50 µs late
	// (the default slack), all of a 20 kpps interval.
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	m.rawWait = goruntime.GOMAXPROCS(0) > 1

	cfg := m.cfg
	n := cfg.Count
	flood := cfg.Rate == Max
	var interval float64 // ns
	if !flood {
		interval = float64(time.Second) / cfg.Rate
	}
	start := time.Now()
	var lastSend time.Duration
	doneAt := time.Duration(-1) // when sending ended
	seq, tries := 0, 0
	for ctx.Err() == nil {
		el := time.Since(start)
		if doneAt < 0 {
			k := 0
			switch {
			case seq >= n || (cfg.Duration > 0 && el > cfg.Duration):
				doneAt = el
			case flood:
				out := seq - int(m.received+m.errors)
				if out < cfg.Window {
					k = cfg.Window - out
				} else if seq == 0 || el-lastSend >= floodRelease {
					k = 1
				}
			default:
				k = min(int(float64(el)/interval)+1, n) - seq
			}
			if k = min(k, n-seq, len(m.tx.msgs)); k > 0 {
				sent, err := m.send(seq, k)
				switch {
				case err == nil:
					seq += sent
					lastSend, tries = el, 0
				case !errAgain(err) || tries >= maxTries:
					m.nsent = int64(seq)
					return fmt.Errorf("send echo %d: %w", seq, err)
				default: // the socket's buffer is full: read, wait a little, again
					m.retries++
					tries++
					m.drain(true, true)
					m.wait(start, time.Since(start)+10*time.Microsecond)
					continue
				}
				m.nsent = int64(seq)
				// On a veth path the round trip ran inside the send call: the reply and the
				// timestamps are queued now.
				m.drain(true, true)
				continue
			}
		}
		if doneAt >= 0 && (m.received+m.errors >= int64(seq) || el-doneAt >= cfg.Timeout) {
			break
		}
		var until time.Duration
		switch {
		case doneAt >= 0:
			until = doneAt + cfg.Timeout
		case flood:
			until = lastSend + floodRelease
		default:
			until = time.Duration(float64(seq) * interval)
			if cfg.Duration > 0 {
				until = min(until, cfg.Duration+time.Nanosecond)
			}
		}
		m.wait(start, until)
	}
	m.nsent = int64(seq)
	m.drainTX()
	return nil
}

// send sends echoes seq..seq+k-1 in one call and returns how many left. Their send time is
// the user-space time just before the call.
func (m *measurement) send(seq, k int) (int, error) {
	for i := range k {
		encode(m.tx.bufs[i][:m.msgLen], m.cfg.Protocol, m.id, uint64(seq+i))
	}
	t := time.Now().UnixNano()
	sent, err := m.tx.send(m.s.fd, k)
	if err != nil {
		return 0, err
	}
	for i := range sent {
		m.sent[seq+i] = t
	}
	if seq == 0 {
		m.first = t
	}
	m.last = t
	return sent, nil
}

// wait returns at until (since start), or earlier when a reply, a timestamp or the end of the
// context arrives; what arrived is read. Short waits, and every wait when Busy, watch the
// clock instead of sleeping.
func (m *measurement) wait(start time.Time, until time.Duration) {
	d := until - time.Since(start)
	if d <= 0 {
		return
	}
	if d > parkAbove && !m.cfg.Busy {
		if m.park(d - parkLead) {
			return
		}
		if d = until - time.Since(start); d <= 0 {
			return
		}
	}
	if m.cfg.Busy {
		m.ts = unix.Timespec{} // look, do not sleep
	} else if d < spinUnder {
		for time.Since(start) < until {
		}
		return
	} else {
		m.ts = unix.NsecToTimespec(int64(d))
	}
	m.pfd[0].Revents, m.pfd[1].Revents = 0, 0
	if n, err := m.ppoll(m.pfd, &m.ts); err != nil || n == 0 {
		return // EINTR: the caller looks again
	}
	if ev := m.pfd[0].Revents; ev != 0 {
		// POLLERR: a timestamp on the error queue, or a socket error (which the data read
		// consumes).
		m.drain(true, ev&unix.POLLERR != 0)
	}
}

// park waits up to d for a reply or timestamp, parked on Go's poller (a copy of the socket
// registered for this wait only: registered all along, every reply would wake the poller's
// thread), and reads what came; it reports whether anything did. Parked, the goroutine leaves
// its P, so the runtime neither preempts it every 10 ms nor keeps its monitor awake, which a
// thread sleeping in ppoll for a long wait costs (see parkAbove). The poller's timer is only
// as precise as a millisecond, so a wait parks until parkLead before the due time and sleeps
// the rest in ppoll.
func (m *measurement) park(d time.Duration) bool {
	f := m.w.watch(m.s.fd)
	if f == nil {
		return false
	}
	defer m.w.unwatch(f)
	rc, err := f.SyscallConn()
	if err != nil || f.SetReadDeadline(time.Now().Add(d)) != nil {
		return false
	}
	got := false
	_ = rc.Read(func(uintptr) bool { // ends at the deadline too (os.ErrDeadlineExceeded)
		got = m.drain(true, true) > 0
		return got
	})
	return got
}

// ppoll waits up to ts for events on fds.
//
// It waits without telling Go's scheduler (a raw system call) when the process has another P
// for the rest of its goroutines: a thread that tells the scheduler (syscall.Syscall) loses
// its P to the runtime's monitor every 10 ms, and the monitor then polls every 20 µs for the
// next millisecond, which cost 2-3x the CPU of the wait itself (an ad-hoc program on this VM:
// 1,000 ppoll wake-ups a second, 7.9-8.3 % of a core vs 2.6-3.8 %). A raw wait keeps the P; the monitor still preempts
// the thread every 10 ms (a signal: ppoll returns EINTR), and garbage collection interrupts it
// the same way, so neither waits for the probe.
//
// Equivalent to: ppoll(fds, n, &ts, NULL).
func (m *measurement) ppoll(fds []unix.PollFd, ts *unix.Timespec) (int, error) {
	if !m.rawWait {
		return unix.Ppoll(fds, ts, nil)
	}
	r, _, e := syscall.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)),
		uintptr(unsafe.Pointer(ts)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// drain reads every reply (data) and every TX timestamp (errq) queued on the socket, and
// returns how many messages it read.
func (m *measurement) drain(data, errq bool) int {
	got := 0
	for data {
		k, _ := m.rx.recv(m.s.fd, 0) // an error (a socket error, as ICMP port unreachable) is consumed
		if k == 0 {
			break
		}
		now := time.Now().UnixNano()
		for i := range k {
			m.reply(m.rx.payload(i), m.rx.oob(i), now)
		}
		got += k
		data = k == len(m.rx.msgs)
	}
	if errq {
		got += m.readTX()
	}
	return got
}

// reply records one received datagram read at now.
func (m *measurement) reply(b, oob []byte, now int64) {
	kind, seq := parse(b, m.cfg.Protocol, m.id)
	switch {
	case kind == replyError:
		m.errors++
	case kind == replyEcho && seq < uint64(len(m.sent)):
		if m.rxU[seq] != 0 {
			m.dups++
			return
		}
		m.rxU[seq], m.rxK[seq] = now, rxStamp(oob)
		if int64(seq) < m.maxSeq {
			m.reordered++
		}
		m.maxSeq = max(m.maxSeq, int64(seq))
		m.received++
	}
}

// readTX reads every TX timestamp queued on the socket's error queue and returns how many
// messages it read.
func (m *measurement) readTX() int {
	got := 0
	for {
		k, _ := m.errq.recv(m.s.fd, unix.MSG_ERRQUEUE)
		got += k
		for i := range k {
			key, ns, sched, ok := txStamp(m.errq.oob(i))
			if !ok || int(key) >= len(m.txK) {
				continue
			}
			if sched {
				m.txS[key] = ns
				continue
			}
			if m.txK[key] == 0 {
				m.txK[key] = ns
				m.txStamps++
			}
			if m.sched {
				// The driver stamps: the device layer's stand-in is not needed, and each one
				// costs a queued message and its read. The key counter goes on (OPT_ID stays).
				if unix.SetsockoptInt(m.s.fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPING, tsFlags&^unix.SOF_TIMESTAMPING_TX_SCHED) == nil {
					m.sched = false
				}
			}
		}
		if k < len(m.errq.msgs) {
			return got
		}
	}
}

// drainTX reads TX timestamps still queued after the last reply, waiting up to 20 ms for
// those of the last echoes (only when the driver gives TX stamps at all).
func (m *measurement) drainTX() {
	deadline := time.Now().Add(20 * time.Millisecond)
	for {
		m.readTX()
		if m.txStamps >= m.nsent || m.txStamps == 0 || time.Now().After(deadline) {
			return
		}
		ts := unix.NsecToTimespec(int64(time.Millisecond))
		pfd := []unix.PollFd{{Fd: int32(m.s.fd)}} // POLLERR alone: a timestamp queued
		_, _ = m.ppoll(pfd, &ts)
	}
}

// result gathers the timestamps into a Result.
func (m *measurement) result() *Result {
	sent := int(m.nsent)
	r := &Result{Protocol: m.cfg.Protocol, Size: m.cfg.Size, Requested: m.cfg.Rate,
		Sent: sent, Received: int(m.received), Duplicates: int(m.dups), Reordered: int(m.reordered),
		Errors: int(m.errors), TXStamps: int(m.txStamps), Retries: int(m.retries),
		Packets: make([]Packet, sent)}
	for i := range sent {
		r.Packets[i] = Packet{Seq: uint64(i), Sent: m.sent[i], TXKernel: m.txK[i], RXKernel: m.rxK[i], Recv: m.rxU[i]}
		if m.txK[i] == 0 && m.txS[i] != 0 { // the driver gives no TX stamp (macvlan): the device layer's
			r.Packets[i].TXKernel, r.Packets[i].TXSched = m.txS[i], true
			r.TXSched++
		}
	}
	if sent > 1 && m.last > m.first {
		r.Achieved = float64(sent-1) / (float64(m.last-m.first) / 1e9)
	}
	return r
}

// pin confines the calling goroutine's thread to cores (none: no change), locking the
// goroutine to it. The thread is not unlocked: it ends with the goroutine, so no other
// goroutine ever runs on a confined thread.
//
// Equivalent to: taskset -p -c CORES TID
func pin(cores []int) error {
	if len(cores) == 0 {
		return nil
	}
	goruntime.LockOSThread()
	var set unix.CPUSet
	set.Zero()
	for _, c := range cores {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("confine the probe to cores %v: %w", cores, err)
	}
	return nil
}

// errAgain reports whether err means "try again later".
func errAgain(err error) bool {
	return errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.ENOBUFS)
}
