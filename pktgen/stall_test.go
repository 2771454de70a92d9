package pktgen

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStallWatch: a watched thread that sleeps and wakes on a CPU where another thread of
// this process spins waits for its CPU now and then; the watch sees those waits, names the
// watched thread, counts every wait over a threshold of 0 and none over one of an hour after
// Reset.
func TestStallWatch(t *testing.T) {
	setupRoot(t)
	tidc := make(chan int)
	var stop atomic.Bool
	pin := func() {
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(0)
		_ = unix.SchedSetaffinity(0, &set)
	}
	spin := func() {
		pin()
		defer runtime.UnlockOSThread()
		for !stop.Load() {
		}
	}
	sleeper := func() {
		pin()
		defer runtime.UnlockOSThread()
		tidc <- unix.Gettid()
		for !stop.Load() {
			_ = unix.Nanosleep(&unix.Timespec{Nsec: 200e3}, nil)
		}
	}
	go spin()
	go sleeper()
	tid := <-tidc
	defer stop.Store(true)
	w, err := NewStallWatch([]int{tid})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	read := func(threshold time.Duration) Stall {
		if err := w.Reset(threshold); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		s, err := w.Read()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := read(0)
	t.Logf("threshold 0: %+v", s)
	if s.Max <= 0 || s.Thread != tid || s.Over == 0 || s.Max > 10*time.Second {
		t.Errorf("threshold 0: %+v, want waits of thread %d seen", s, tid)
	}
	if s := read(time.Hour); s.Over != 0 || s.Thread != tid && s.Max > 0 {
		t.Errorf("threshold 1h: %+v, want none over it", s)
	}
}
