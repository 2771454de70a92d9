package pktgen

import (
	"testing"
	"time"
)

// simCall is one call of a simulated sender: when it started and how many frames it sent.
type simCall struct {
	at time.Duration
	n  uint64
}

// simulate runs a schedule for d against a simulated clock, with no kernel: a call of n
// frames takes 15 µs + 0.18 µs per frame (as measured, docs/packet-rate.md), a wait longer
// than 60 µs sleeps and wakes late by oversleep (a shorter one spins), and at stallAt the
// sender is held off the CPU for stall. It returns the calls, the frames sent and skipped.
func simulate(s schedule, d, oversleep, stallAt, stall time.Duration) (calls []simCall, sent, skipped uint64) {
	var now time.Duration
	stalled := stall == 0
	for now < d {
		if !stalled && now >= stallAt {
			now += stall
			stalled = true
			continue
		}
		n, skip, wait := s.next(now, sent+skipped)
		skipped += skip
		if n == 0 {
			if wait > 60*time.Microsecond {
				wait += oversleep
			}
			now += max(wait, time.Microsecond)
			continue
		}
		calls = append(calls, simCall{now, n})
		sent += n
		now += 15*time.Microsecond + time.Duration(n)*180*time.Nanosecond
	}
	return calls, sent, skipped
}

// TestScheduleDoesNotBurstABacklog: a sender at 30 kpps held off 10 ms owes 300 frames. The
// uncapped schedule (the old behaviour) sends them in one call, more than a veth ring holds;
// the capped one (MaxBurst 32, MaxLag 250 µs, as the ndr probe sets it) sends no call above
// 32 frames, catches up at most its chunk and 32 frames, and counts the rest as skipped, so
// that sent and skipped together still follow the schedule.
func TestScheduleDoesNotBurstABacklog(t *testing.T) {
	const pps = 30e3
	d, stallAt, stall := 200*time.Millisecond, 50*time.Millisecond, 10*time.Millisecond
	for _, c := range []struct {
		name     string
		maxBurst int
		maxLag   time.Duration
		// wantBig says whether one call may carry the whole backlog.
		wantBig bool
	}{
		{"uncapped", 0, 0, true},
		{"capped", 32, 250 * time.Microsecond, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSchedule(pps, c.maxBurst, c.maxLag)
			calls, sent, skipped := simulate(s, d, 0, stallAt, stall)
			var biggest uint64
			var after uint64 // frames sent in the first 100 µs after the stall
			for _, k := range calls {
				biggest = max(biggest, k.n)
				if k.at >= stallAt+stall && k.at < stallAt+stall+100*time.Microsecond {
					after += k.n
				}
			}
			owed := uint64(pps * stall.Seconds())
			if c.wantBig {
				if biggest < owed || skipped != 0 {
					t.Errorf("uncapped: biggest call %d frames, skipped %d: want the backlog of %d in one call, none skipped", biggest, skipped, owed)
				}
			} else {
				if biggest > 32 {
					t.Errorf("capped: a call of %d frames, want at most 32", biggest)
				}
				// 100 µs on schedule are 3 frames.
				if limit := s.chunk + s.lag + 3; after > limit {
					t.Errorf("capped: %d frames sent in the 100 µs after the stall, want at most %d (chunk %d + lag %d + 3 on schedule)", after, limit, s.chunk, s.lag)
				}
				if skipped < owed-s.lag-s.chunk-2 || skipped > owed {
					t.Errorf("capped: skipped %d, want about the %d owed less the lag %d", skipped, owed, s.lag)
				}
			}
			// Sent and skipped follow the schedule either way: all that came due, less at
			// most the last chunk.
			if due := uint64(pps * d.Seconds()); sent+skipped > due || sent+skipped+s.chunk+1 < due {
				t.Errorf("sent %d + skipped %d, want %d due (within a chunk of %d)", sent, skipped, due, s.chunk)
			}
		})
	}
}

// TestScheduleDoesNotLimitASteadyRate: with the same caps, a sender that is never held off
// reaches high rates in full with nothing skipped (a call may carry 200 µs of frames even
// when that is above MaxBurst), and a low rate whose sleeps wake 1 ms late skips nothing (the lag
// is at least MaxBurst frames).
func TestScheduleDoesNotLimitASteadyRate(t *testing.T) {
	for _, c := range []struct {
		pps       float64
		oversleep time.Duration
	}{
		{10e3, time.Millisecond},
		{100e3, 0},
		{1e6, 0},
		{2e6, 0},
		{4e6, 0},
		{5e6, 0},
	} {
		s := newSchedule(c.pps, 32, 250*time.Microsecond)
		d := 100 * time.Millisecond
		calls, sent, skipped := simulate(s, d, c.oversleep, 0, 0)
		if skipped != 0 {
			t.Errorf("%.0f pps: skipped %d, want 0", c.pps, skipped)
		}
		if got := float64(sent) / d.Seconds(); got < c.pps*0.99 || got > c.pps*1.001 {
			t.Errorf("%.0f pps: sent %.0f pps, want within 1 %% below", c.pps, got)
		}
		var biggest uint64
		for _, k := range calls {
			biggest = max(biggest, k.n)
		}
		if c.pps >= 1e6 && biggest < uint64(c.pps*50e-6) {
			t.Errorf("%.0f pps: biggest call %d frames, want the 50 µs chunk %d", c.pps, biggest, uint64(c.pps*50e-6))
		}
	}
}

// TestScheduleUnpaced: without a rate every call is the largest, whatever the caps.
func TestScheduleUnpaced(t *testing.T) {
	for _, s := range []schedule{newSchedule(0, 0, 0), newSchedule(0, 32, time.Millisecond)} {
		if n, skip, wait := s.next(time.Second, 123); n != maxCall || skip != 0 || wait != 0 {
			t.Errorf("unpaced: next = %d, %d, %s; want %d, 0, 0", n, skip, wait, maxCall)
		}
	}
}

// TestScheduleCallPeriod: with a call period of 1 ms (as the ndr probe sets it), a sender
// never held off makes at most about 1,000 calls per second, or one per 128 frames where the
// rate needs more, no call on schedule above 128 frames, and still keeps every rate from
// 5 kpps to 2 Mpps within 1 % with nothing skipped; without it the same rates take one
// call per 50 µs (up to 20,000 per second), each a page pool the kernel registers.
func TestScheduleCallPeriod(t *testing.T) {
	d := 200 * time.Millisecond
	for _, pps := range []float64{5e3, 30e3, 300e3, 1e6, 2e6} {
		for _, period := range []time.Duration{time.Millisecond, 0} {
			s := newSchedulePeriod(pps, 32, 250*time.Microsecond, period)
			calls, sent, skipped := simulate(s, d, 0, 0, 0)
			perSec := float64(len(calls)) / d.Seconds()
			if got := float64(sent) / d.Seconds(); skipped != 0 || got < pps*0.99 || got > pps*1.001 {
				t.Errorf("%.0f pps, period %s: sent %.0f pps, skipped %d; want within 1 %% below, none skipped", pps, period, got, skipped)
			}
			// The bound: one call per period, or per 128 frames, whichever is more often,
			// 10 % over for the sleeps' rounding.
			bound := max(1000, pps/callFrames) * 1.1
			if period > 0 {
				if perSec > bound {
					t.Errorf("%.0f pps, period %s: %.0f calls per second, want at most %.0f", pps, period, perSec, bound)
				}
				// 2 frames over: what came due during the simulated clock's last step.
				for _, k := range calls {
					if k.n > max(callFrames, uint64(pps*50e-6))+2 {
						t.Errorf("%.0f pps, period %s: a call of %d frames on schedule, want at most %d", pps, period, k.n, callFrames)
						break
					}
				}
			} else if pps >= 30e3 && perSec <= bound {
				t.Errorf("%.0f pps without a period: %.0f calls per second, the model shows no difference", pps, perSec)
			}
		}
	}
}
