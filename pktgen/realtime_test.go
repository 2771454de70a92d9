package pktgen

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRealTimeRestores: realTime puts the thread under SCHED_FIFO and restore gives back its
// old policy; priorities outside 1-99 are refused and change nothing.
func TestRealTimeRestores(t *testing.T) {
	setupRoot(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pol0, prio0, err := policy()
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []int{0, -1, 100} {
		if _, err := realTime(bad); err == nil {
			t.Errorf("priority %d accepted", bad)
		}
		if pol, _, _ := policy(); pol != pol0 {
			t.Errorf("priority %d refused, yet the policy is now %d", bad, pol)
		}
	}
	restore, err := realTime(10)
	if err != nil {
		t.Fatal(err)
	}
	pol, prio, _ := policy()
	rerr := restore()
	if pol != unix.SCHED_FIFO || prio != 10 {
		t.Errorf("under realTime(10): policy %d priority %d, want SCHED_FIFO 10", pol, prio)
	}
	if rerr != nil {
		t.Fatal(rerr)
	}
	if pol, prio, _ := policy(); pol != pol0 || prio != prio0 {
		t.Errorf("restored: policy %d priority %d, want %d %d", pol, prio, pol0, prio0)
	}
}

// TestSendRealTime: a Send with RealTime runs its thread under SCHED_FIFO while it sends
// (seen from another thread) and gives the thread its old policy back when it returns;
// without RealTime the thread never runs so, and LastRealTime says it was not asked for.
func TestSendRealTime(t *testing.T) {
	p, g, f := setup(t, []int{64}, 0, Count)
	for i, prio := range []int{10, 0} {
		trial := uint32(i + 1)
		g.RealTime = prio
		var pol0, after uint32
		var sent uint64
		var sawFIFO atomic.Bool
		err := p.Do(p.A, func() (err error) {
			if pol0, _, err = policy(); err != nil {
				return err
			}
			tid := unix.Gettid()
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if a, err := unix.SchedGetAttr(tid, 0); err == nil && a.Policy == unix.SCHED_FIFO {
						sawFIFO.Store(true)
					}
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
				}
			}()
			sent, _, err = g.Send(trial, 10e3, 300*time.Millisecond, -1)
			close(stop)
			wg.Wait()
			after, _, _ = policy()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if after != pol0 {
			t.Errorf("RealTime %d: policy %d after Send, want %d as before", prio, after, pol0)
		}
		if sawFIFO.Load() != (prio > 0) {
			t.Errorf("RealTime %d: SCHED_FIFO seen during Send: %v", prio, sawFIFO.Load())
		}
		if prio > 0 && g.LastRealTime != nil {
			t.Errorf("RealTime %d: LastRealTime %v", prio, g.LastRealTime)
		}
		if prio == 0 && !errors.Is(g.LastRealTime, ErrNoRealTime) {
			t.Errorf("RealTime 0: LastRealTime %v, want ErrNoRealTime", g.LastRealTime)
		}
		if c := settled(t, func() (Counts, error) { return f.Counts(trial) }, sent); sent == 0 || c.Packets != sent {
			t.Errorf("RealTime %d: sent %d, counted %d", prio, sent, c.Packets)
		}
	}
}
