package pktgen

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// schedResetOnFork is SCHED_FLAG_RESET_ON_FORK: a thread cloned from a real-time thread
// starts at normal priority.
const schedResetOnFork = 0x01

// realTime puts the calling thread (locked to its goroutine by the caller) under SCHED_FIFO
// at prio and returns the function that gives it back its old policy and priority. The
// caller must call restore before it unlocks the thread, on every exit path: a Go thread
// returned to the runtime's pool at real-time priority would keep it for any goroutine.
func realTime(prio int) (restore func() error, err error) {
	if prio < 1 || prio > 99 {
		return nil, fmt.Errorf("set SCHED_FIFO: priority %d: want 1 to 99", prio)
	}
	old, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return nil, fmt.Errorf("read scheduling policy: %w", err)
	}
	rt := &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(prio), Flags: schedResetOnFork}
	if err := unix.SchedSetAttr(0, rt, 0); err != nil {
		return nil, fmt.Errorf("set SCHED_FIFO %d: %w", prio, err)
	}
	return func() error {
		back := *old
		back.Size = unix.SizeofSchedAttr
		if err := unix.SchedSetAttr(0, &back, 0); err != nil {
			return fmt.Errorf("restore scheduling policy %d: %w", old.Policy, err)
		}
		return nil
	}, nil
}

// policy is the calling thread's scheduling policy and real-time priority.
func policy() (uint32, uint32, error) {
	a, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("read scheduling policy: %w", err)
	}
	return a.Policy, a.Priority, nil
}
