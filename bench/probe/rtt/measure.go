package rtt

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

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

// Measure sends cfg.Count echoes (or as many as fit in cfg.Duration) at cfg.Rate from inside
// src to dst, and returns every echo's timestamps. For UDP, something must echo at dst (see
// StartResponder). It returns an error only when the probe cannot run (no socket, a send that
// fails other than with a full buffer); lost echoes are data.
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
	n := cfg.Count
	m := &measurement{cfg: cfg, s: s, id: rand.Uint32(),
		sent: make([]int64, n), txK: make([]int64, n), txS: make([]int64, n), rxK: make([]int64, n), rxU: make([]int64, n)}
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	wall0 := time.Now()

	stop := context.AfterFunc(ctx, func() { _ = s.file.SetReadDeadline(time.Now()) })
	defer stop()
	var wg sync.WaitGroup
	var rerr, serr error
	wg.Go(func() {
		if rerr = pin(cfg.CPUs); rerr == nil {
			rerr = m.receive()
		}
	})
	var sw sync.WaitGroup
	sw.Go(func() {
		if serr = pin(cfg.CPUs); serr == nil {
			serr = m.sendAll(ctx)
		}
	})
	sw.Wait()
	// The receiver ends when every echo came back, or Timeout after the last send.
	m.senderDone.Store(true)
	if m.received.Load()+m.errors.Load() >= m.nsent.Load() {
		_ = s.file.SetReadDeadline(time.Now())
	} else {
		_ = s.file.SetReadDeadline(time.Now().Add(cfg.Timeout))
	}
	wg.Wait()
	m.drainTX()

	var ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	r := m.result()
	r.Wall = time.Since(wall0)
	r.CPUUser = time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano())
	r.CPU = r.CPUUser + time.Duration(ru1.Stime.Nano()-ru0.Stime.Nano())
	if serr != nil {
		return r, fmt.Errorf("measure rtt to %s: %w", dst, serr)
	}
	if rerr != nil {
		return r, fmt.Errorf("measure rtt to %s: %w", dst, rerr)
	}
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	return r, nil
}

// measurement is one run's state. The sender alone writes sent and nsent; the receiver alone
// writes txK, rxK, rxU and the counters; both are read once both have ended.
type measurement struct {
	cfg Config
	s   *sock
	id  uint32

	sent, txK, rxK, rxU []int64 // ns since the epoch, 0 = none; index = sequence number
	txS                 []int64 // device-layer (SCHED) TX stamps, used where the driver gives none

	nsent      atomic.Int64
	received   atomic.Int64 // first copies only
	errors     atomic.Int64
	senderDone atomic.Bool

	dups, reordered, txStamps int64
	maxSeq                    int64
	first, last               int64 // first and last send, ns
	retries                   int64
}

// sendAll sends the echoes, each at its due time start + seq/rate (late ones go at once, so
// the schedule does not drift), until Count are sent, Duration has passed or ctx ends.
func (m *measurement) sendAll(ctx context.Context) error {
	msg := message(m.cfg.Protocol, m.cfg.Size)
	flood := m.cfg.Rate == Max
	var interval float64
	if !flood {
		interval = float64(time.Second) / m.cfg.Rate
	}
	p, err := newPacer(time.Duration(interval), m.cfg.Busy)
	if err != nil {
		return err
	}
	defer p.Close()
	var end time.Duration
	if m.cfg.Duration > 0 {
		end = m.cfg.Duration
	}
	for seq := 0; seq < m.cfg.Count; seq++ {
		if flood {
			m.waitWindow(int64(seq))
		} else {
			p.waitUntil(time.Duration(float64(seq) * interval))
		}
		if ctx.Err() != nil || (end > 0 && p.elapsed() > end) {
			break
		}
		encode(msg, m.cfg.Protocol, m.id, uint64(seq))
		for tries := 0; ; tries++ {
			t := time.Now().UnixNano()
			err := m.s.send(msg)
			if err == nil {
				m.sent[seq] = t
				break
			}
			if !errAgain(err) || tries > 10000 {
				m.nsent.Store(int64(seq))
				return fmt.Errorf("send echo %d: %w", seq, err)
			}
			m.retries++
			p.waitUntil(p.elapsed() + 10*time.Microsecond)
		}
		if seq == 0 {
			m.first = m.sent[0]
		}
		m.last = m.sent[seq]
		m.nsent.Store(int64(seq + 1))
	}
	return nil
}

// waitWindow holds a flood until fewer than Window echoes are outstanding, or floodRelease
// passed: ping -f's rule.
func (m *measurement) waitWindow(seq int64) {
	if seq == 0 {
		return
	}
	deadline := time.Now().Add(floodRelease)
	for seq-m.received.Load()-m.errors.Load() >= int64(m.cfg.Window) && time.Now().Before(deadline) {
		goruntime.Gosched()
	}
}

// receive reads replies and TX timestamps until the socket's read deadline, or until every
// echo sent came back once the sender is done.
func (m *measurement) receive() error {
	buf := make([]byte, 65536)
	oob := make([]byte, 512)
	n := int64(len(m.sent))
	err := m.s.raw.Read(func(fd uintptr) bool {
		for {
			nr, oobn, _, _, err := unix.Recvmsg(int(fd), buf, oob, unix.MSG_DONTWAIT)
			if err != nil {
				break
			}
			now := time.Now().UnixNano()
			kind, seq := parse(buf[:nr], m.cfg.Protocol, m.id)
			switch {
			case kind == replyError:
				m.errors.Add(1)
			case kind == replyEcho && int64(seq) < n:
				if m.rxU[seq] != 0 {
					m.dups++
					continue
				}
				m.rxU[seq], m.rxK[seq] = now, rxStamp(oob[:oobn])
				if int64(seq) < m.maxSeq {
					m.reordered++
				}
				m.maxSeq = max(m.maxSeq, int64(seq))
				m.received.Add(1)
			}
		}
		m.readTX(int(fd))
		return m.senderDone.Load() && m.received.Load()+m.errors.Load() >= m.nsent.Load()
	})
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("receive echoes: %w", err)
	}
	return nil
}

// readTX reads every TX timestamp queued on the socket's error queue.
func (m *measurement) readTX(fd int) {
	buf := make([]byte, 64)
	oob := make([]byte, 512)
	for {
		_, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
		if err != nil {
			return
		}
		key, ns, sched, ok := txStamp(oob[:oobn])
		if !ok || int(key) >= len(m.txK) {
			continue
		}
		if sched {
			m.txS[key] = ns
		} else if m.txK[key] == 0 {
			m.txK[key] = ns
			m.txStamps++
		}
	}
}

// drainTX reads TX timestamps still queued after the receiver ended, waiting up to 20 ms for
// those of the last echoes (only when the driver gives TX stamps at all).
func (m *measurement) drainTX() {
	deadline := time.Now().Add(20 * time.Millisecond)
	for {
		_ = m.s.raw.Control(func(fd uintptr) { m.readTX(int(fd)) })
		if m.txStamps >= m.nsent.Load() || m.txStamps == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// result gathers the timestamps into a Result.
func (m *measurement) result() *Result {
	sent := int(m.nsent.Load())
	r := &Result{Protocol: m.cfg.Protocol, Size: m.cfg.Size, Requested: m.cfg.Rate,
		Sent: sent, Received: int(m.received.Load()), Duplicates: int(m.dups), Reordered: int(m.reordered),
		Errors: int(m.errors.Load()), TXStamps: int(m.txStamps), Retries: int(m.retries),
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

// pin locks the calling goroutine to its thread and confines the thread to cores (none: no
// change). The thread is not unlocked: it ends with the goroutine, so no other goroutine ever
// runs on a confined thread.
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
