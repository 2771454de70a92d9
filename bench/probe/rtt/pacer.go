package rtt

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// spinBelow is the interval below which the pacer spins the last spinFor before a due time
// instead of trusting its timer's wake-up alone (a few µs late): at 1 Kpps spinning would cost
// more CPU than the probe's whole work.
const (
	spinBelow = 200 * time.Microsecond
	spinFor   = 15 * time.Microsecond
)

// pacer waits until due times measured from its start. It parks the goroutine on a timerfd
// through Go's poller — an hrtimer with no slack, and no blocking system call, which would make
// the runtime hand the thread's P over and its monitor wake every 20 µs (measured: 6x the CPU
// at 1 Kpps) — and spins the last few microseconds.
//
// Equivalent to: timerfd_create(CLOCK_MONOTONIC) + timerfd_settime(TFD_TIMER_ABSTIME) + read.
type pacer struct {
	spin      time.Duration
	start     time.Time
	startMono int64    // CLOCK_MONOTONIC at start, ns
	fd        int      // the timerfd (never tfd.Fd(): that makes the file blocking)
	tfd       *os.File // the same, registered with Go's poller
	buf       [8]byte
}

func newPacer(interval time.Duration, busy bool) (*pacer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("create pacing timer: %w", err)
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("read monotonic clock: %w", err)
	}
	spin := time.Duration(0)
	if interval < spinBelow {
		spin = spinFor
	}
	if busy {
		spin = interval + time.Hour // never sleeps
	}
	return &pacer{spin: spin, start: time.Now(), startMono: ts.Nano(), fd: fd, tfd: os.NewFile(uintptr(fd), "rtt-pacer")}, nil
}

// elapsed is the time since the pacer started.
func (p *pacer) elapsed() time.Duration { return time.Since(p.start) }

// waitUntil returns at due (since start), or at once when due has passed.
func (p *pacer) waitUntil(due time.Duration) {
	if due-p.elapsed() > 2*p.spin {
		spec := unix.ItimerSpec{Value: unix.NsecToTimespec(p.startMono + int64(due-p.spin))}
		if unix.TimerfdSettime(p.fd, unix.TFD_TIMER_ABSTIME, &spec, nil) == nil {
			_, _ = p.tfd.Read(p.buf[:])
		}
	}
	for p.elapsed() < due {
	}
}

// Close releases the timer.
func (p *pacer) Close() error { return p.tfd.Close() }
