package echo

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	goruntime "runtime"
	"slices"
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
	// txBatch is how many echoes' TX timestamps may wait on the error queue while every echo
	// sent has its reply: they are read together (one recvmmsg) instead of one read per echo.
	txBatch = 32
)

// Measure sends cfg.Count echoes (or as many as fit in cfg.Duration) at cfg.Rate from inside
// src to dst, and returns every echo's timestamps. For UDP, something must echo at dst (see
// StartResponder). It returns an error only when the probe cannot run (no socket, a send that
// fails other than with a full buffer); lost echoes are data.
//
// Each sending thread ("lane", see laneCount: one up to 50 Kpps and for a flood, more above
// on as many cores) is locked and does everything for its share of the echoes on its own
// socket: it sleeps until its next echo is due or a reply or timestamp is queued (ppoll with
// no timer slack), sends the echoes due (one sendmmsg when it is behind), and reads what is
// queued (recvmmsg, replies and the error queue's TX timestamps separately). So an echo costs
// one wake-up at most, and on a veth path, where the whole round trip runs inside the send
// call, none: the reply is read right after it. While every echo sent has its reply, the thread
// sleeps on a timer alone (clock_nanosleep, no poll set) and leaves the TX timestamps queued,
// reading them txBatch at a time (a timestamp is the kernel's, so reading it late changes
// nothing): at a low rate on a veth path an echo then costs its send, one read of its reply,
// and one timer wake-up. Lanes share the schedule
// (split) and write disjoint entries of the per-echo arrays; the result merges them in global
// sequence order.
//
// Equivalent to (icmp, Rate 1000): ping -n -i 0.001 -s SIZE-8 -c COUNT DST, with
// SO_TIMESTAMPING in place of ping's SO_TIMESTAMP.
func Measure(ctx context.Context, src Doer, dst netip.AddrPort, cfg Config) (*Result, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cores := goruntime.NumCPU()
	if len(cfg.CPUs) > 0 {
		cores = len(cfg.CPUs)
	}
	lanes := laneCount(cfg, cores)
	if ForceLanes > 0 {
		lanes = min(ForceLanes, cfg.Count)
	}
	socks := make([]*sock, 0, lanes)
	defer func() {
		for _, s := range socks {
			s.Close()
		}
	}()
	base := rand.Uint32()
	err := src.Do(func() error {
		for i := range lanes {
			s, err := openSocket(cfg.Protocol, dst)
			if err != nil {
				return err
			}
			socks = append(socks, s)
			if lanes > 1 && cfg.Protocol == ProtoICMP {
				// Every raw ICMP socket sees every reply: each lane's takes its own id's.
				if err := s.onlyEchoID(uint16(base + uint32(i))); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("measure rtt to %s: %w", dst, err)
	}
	w, err := newWaker()
	if err != nil {
		return nil, fmt.Errorf("measure rtt to %s: %w", dst, err)
	}
	defer w.Close()
	a := newArrays(cfg.Count)
	ms := make([]*measurement, lanes)
	for i := range ms {
		ms[i] = newMeasurement(cfg, socks[i], w, a, split{lane: i, lanes: lanes, n: cfg.Count}, base+uint32(i))
	}
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	wall0 := time.Now()

	// A lane that fails ends the others.
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(lctx, w.fire)
	defer stop()
	errs := make([]error, lanes)
	var ready, done sync.WaitGroup
	ready.Add(lanes)
	done.Add(lanes)
	// The schedule starts when the first lane's thread is back from the barrier: its first echo
	// is then on time (a start taken before the barrier would make it late by the wake-up, and
	// the achieved rate, taken from the first send, too high).
	var start time.Time
	var once sync.Once
	begin := make(chan struct{})
	for i, m := range ms {
		go func() {
			defer done.Done()
			err := m.setup()
			ready.Done()
			<-begin
			once.Do(func() { start = time.Now() })
			if err == nil {
				err = m.run(lctx, start)
			}
			if err != nil {
				errs[i] = err
				cancel()
			}
		}()
	}
	ready.Wait() // every lane's thread is locked and pinned
	close(begin)
	done.Wait()

	var ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	r := merge(cfg, a, ms, start.UnixNano())
	r.RunID = base
	r.Wall = time.Since(wall0)
	r.CPUUser = time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano())
	r.CPU = r.CPUUser + time.Duration(ru1.Stime.Nano()-ru0.Stime.Nano())
	if err := errors.Join(errs...); err != nil {
		return r, fmt.Errorf("measure rtt to %s: %w", dst, err)
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
	cur    []*os.File // the copies long waits park on (see park), one per lane at most
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
	for _, f := range w.cur {
		_ = f.SetReadDeadline(time.Now())
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
	w.cur = append(w.cur, f)
	return f
}

// unwatch ends a long wait: the copy leaves the poller and is closed.
func (w *waker) unwatch(f *os.File) {
	w.mu.Lock()
	w.cur = slices.DeleteFunc(w.cur, func(c *os.File) bool { return c == f })
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

// arrays are a run's per-echo timestamps (ns since the epoch, 0 = none), indexed by global
// sequence number. Lanes share them: each writes only its own echoes' entries.
type arrays struct {
	sent, txK, rxK, rxU []int64
	txS                 []int64 // device-layer (SCHED) TX stamps, used where the driver gives none
}

func newArrays(n int) *arrays {
	return &arrays{sent: make([]int64, n), txK: make([]int64, n), txS: make([]int64, n), rxK: make([]int64, n), rxU: make([]int64, n)}
}

// measurement is one lane's state, owned by its thread (run) until it ends.
type measurement struct {
	cfg    Config
	s      *sock
	w      *waker
	a      *arrays
	sp     split  // the lane's share of the schedule
	id     uint32 // the lane's run id (and, for icmp, echo id)
	msgLen int    // bytes of one echo message as sent (ICMP header + payload, or UDP payload)

	tx, rx, errq *batch
	pfd          []unix.PollFd // the socket, the waker
	ts           unix.Timespec
	rawWait      bool // see ppoll
	sched        bool // the socket still asks for device-layer TX stamps
	unread       int  // echoes sent since the error queue was last read to its end

	nsent, received, errors int64 // nsent: the lane's echoes sent (its first nsent)
	dups, txStamps          int64
	first, last             int64 // first and last send, ns
	retries                 int64
}

func newMeasurement(cfg Config, s *sock, w *waker, a *arrays, sp split, id uint32) *measurement {
	n, wake := sp.count(), w.fd
	m := &measurement{cfg: cfg, s: s, w: w, a: a, sp: sp, id: id, msgLen: len(message(cfg.Protocol, cfg.Size)),
		pfd:   []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}, {Fd: int32(wake), Events: unix.POLLIN}},
		sched: true}
	b := max(1, min(n, maxBatch))
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

// setup locks the calling goroutine to its thread for good (the thread ends with the
// goroutine, and its timer slack and core affinity with it), confines it to cfg.CPUs, and
// takes its timer slack away.
func (m *measurement) setup() error {
	goruntime.LockOSThread()
	if err := pin(m.cfg.CPUs); err != nil {
		return err
	}
	// No timer slack on this thread: ppoll's wake-up would otherwise come up to 50 µs late
	// (the default slack), all of a 20 kpps interval.
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	m.rawWait = goruntime.GOMAXPROCS(0) > 1
	return nil
}

// run sends the lane's echoes, each due at start + g/rate for its global sequence number g
// (late ones go at once, in one call, so the schedule does not drift), until they are sent,
// Duration has passed or ctx ends; it reads replies and timestamps as they come, and until
// every echo came back or Timeout after the last send. Call it after setup, on its thread.
func (m *measurement) run(ctx context.Context, start time.Time) error {
	cfg := m.cfg
	n := m.sp.count()
	flood := cfg.Rate == Max
	var interval float64 // ns
	if !flood {
		interval = float64(time.Second) / cfg.Rate
	}
	var lastSend time.Duration
	doneAt := time.Duration(-1) // when sending ended
	seq, tries := 0, 0          // seq: the lane's next echo (lane-local)
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
				k = m.sp.due(int(float64(el)/interval)+1) - seq
			}
			if k = min(k, n-seq, len(m.tx.msgs)); k > 0 {
				sent, err := m.send(seq, k)
				switch {
				case err == nil:
					seq += sent
					lastSend, tries = el, 0
				case !errAgain(err) || tries >= maxTries:
					m.nsent = int64(seq)
					return fmt.Errorf("send echo %d: %w", m.sp.global(seq), err)
				default: // the socket's buffer is full: read, wait a little, again
					m.retries++
					tries++
					m.drain(true, true)
					m.wait(start, time.Since(start)+10*time.Microsecond)
					continue
				}
				m.nsent = int64(seq)
				m.unread += sent
				// On a veth path the round trip ran inside the send call: the reply and the
				// timestamps are queued now. The timestamps are read txBatch at a time (see
				// wait), except until the driver's first one came (see readTX).
				m.drain(true, m.sched || m.unread >= txBatch)
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
			until = time.Duration(float64(m.sp.global(seq)) * interval)
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

// send sends the lane's echoes seq..seq+k-1 (lane-local) in one call and returns how many
// left. Their send time is the user-space time just before the call.
func (m *measurement) send(seq, k int) (int, error) {
	for i := range k {
		encode(m.tx.bufs[i][:m.msgLen], m.cfg.Protocol, m.id, uint64(m.sp.global(seq+i)))
	}
	t := time.Now().UnixNano()
	sent, err := m.tx.send(m.s.fd, k)
	if err != nil {
		return 0, err
	}
	for i := range sent {
		m.a.sent[m.sp.global(seq+i)] = t
	}
	if seq == 0 {
		m.first = t
	}
	m.last = t
	return sent, nil
}

// wait returns at until (since start), or earlier when a reply, a timestamp or the end of the
// context arrives while an echo is awaited (when none is, it sleeps on a timer alone, see
// sleep); what arrived is read. Short waits, and every wait when Busy, watch the clock instead
// of sleeping.
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
	if m.received+m.errors >= m.nsent && !m.cfg.Busy {
		// Every echo sent has its reply: nothing is awaited on the socket, so the thread
		// sleeps without polling it (see sleep), and the TX timestamps stay queued (a queued
		// one would make the socket ready at once).
		m.sleep(min(d, parkAbove))
		return
	}
	if m.unread > 0 {
		m.readTX() // a queued timestamp would make the socket ready at once
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
	if m.unread > 0 {
		m.readTX() // a queued timestamp would end the wait at once
	}
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

// sleep sleeps for d, or until a signal (the runtime's preemption: the caller looks again).
// Nothing wakes it earlier, not even the end of the context, which its callers therefore see
// up to d late: they sleep no longer than parkAbove. A timer sleep costs the thread less CPU
// than a ppoll wake-up at the same time (no poll table for the socket and the waker): 22.0
// against 26.3 µs per 1 ms wake-up on this VM (2,000 of each, ad hoc, 2026-11-25).
//
// Equivalent to: clock_nanosleep(CLOCK_MONOTONIC, 0, &d, NULL).
func (m *measurement) sleep(d time.Duration) {
	m.ts = unix.NsecToTimespec(int64(d))
	if !m.rawWait { // see ppoll
		_, _, _ = syscall.Syscall6(unix.SYS_CLOCK_NANOSLEEP, unix.CLOCK_MONOTONIC, 0, uintptr(unsafe.Pointer(&m.ts)), 0, 0, 0)
		return
	}
	_, _, _ = syscall.RawSyscall6(unix.SYS_CLOCK_NANOSLEEP, unix.CLOCK_MONOTONIC, 0, uintptr(unsafe.Pointer(&m.ts)), 0, 0, 0)
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
	case kind == replyEcho:
		if _, ok := m.sp.local(seq); !ok {
			return // not one of this lane's echoes (its id says it is: a corrupted reply)
		}
		if m.a.rxU[seq] != 0 {
			m.dups++
			return
		}
		m.a.rxU[seq], m.a.rxK[seq] = now, rxStamp(oob)
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
			if !ok || int(key) >= m.sp.count() {
				continue
			}
			g := m.sp.global(int(key)) // the key counts the sends on the lane's socket
			if sched {
				m.a.txS[g] = ns
				continue
			}
			if m.a.txK[g] == 0 {
				m.a.txK[g] = ns
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
			m.unread = 0
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

// merge gathers the lanes' timestamps and counts into a Result: every echo that left, in
// global sequence order. Call it after every lane's run returned. start is when echo 0 was
// due: the achieved rate is taken over the schedule's span from there, so a late first echo
// (a thread slow to wake) that the others then catch up on never shows a rate above the
// requested one.
func merge(cfg Config, a *arrays, ms []*measurement, start int64) *Result {
	r := &Result{Protocol: cfg.Protocol, Size: cfg.Size, Requested: cfg.Rate, Threads: len(ms)}
	hi := 0 // one past the highest global sequence number sent
	var first, last int64
	for _, m := range ms {
		r.Sent += int(m.nsent)
		r.Received += int(m.received)
		r.Duplicates += int(m.dups)
		r.Errors += int(m.errors)
		r.TXStamps += int(m.txStamps)
		r.Retries += int(m.retries)
		if m.nsent == 0 {
			continue
		}
		hi = max(hi, m.sp.global(int(m.nsent)-1)+1)
		if first == 0 || m.first < first {
			first = m.first
		}
		last = max(last, m.last)
	}
	r.Packets = make([]Packet, 0, r.Sent)
	for g := range hi {
		if a.sent[g] == 0 {
			continue // a lane that stopped early (Duration, an error) did not send it
		}
		p := Packet{Seq: uint64(g), Sent: a.sent[g], TXKernel: a.txK[g], RXKernel: a.rxK[g], Recv: a.rxU[g]}
		if a.txK[g] == 0 && a.txS[g] != 0 { // the driver gives no TX stamp (macvlan): the device layer's
			p.TXKernel, p.TXSched = a.txS[g], true
			r.TXSched++
		}
		r.Packets = append(r.Packets, p)
	}
	r.Reordered = reorderedCount(r.Packets)
	if start == 0 || start > first {
		start = first
	}
	if r.Sent > 1 && last > start {
		r.Achieved = float64(r.Sent-1) / (float64(last-start) / 1e9)
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
