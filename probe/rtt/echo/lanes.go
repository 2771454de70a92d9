package echo

import (
	"cmp"
	"math"
	"slices"
)

// A run's schedule is echo g (the global sequence number, 0..Count-1) due at start + g/rate.
// Above laneRate it is split between several sending threads ("lanes"), each on its own
// socket: on a veth path the whole round trip runs inside the send call (about 13 µs of the
// sending thread's CPU on this machine kind), so one thread cannot send much more than
// 75 Kpps, and a second one on the other core takes the other half of the round trips.
// Lane i of L sends echoes i, i+L, i+2L, ... at their global due times, so together the lanes
// keep the one schedule, and every packet keeps its global sequence number in the result.
const (
	// laneRate is the highest rate one lane is asked to carry: one thread reached 50 Kpps
	// within 1 % on this machine kind (docs/experiment-file.md), and a second thread at lower
	// rates would only cost CPU (a second timer wake-up per interval).
	laneRate = 50_000
	// maxLanes bounds the lanes of a run.
	maxLanes = 8
)

// laneCount returns how many lanes a run uses: one for a flood (its window logic is one
// thread's) and for rates up to laneRate; above, one per laneRate started, at most one per
// core the probe may use (cores) and per echo.
func laneCount(cfg Config, cores int) int {
	if cfg.Rate == Max || cfg.Rate <= laneRate {
		return 1
	}
	l := int(math.Ceil(cfg.Rate / laneRate))
	return max(1, min(l, cores, maxLanes, cfg.Count))
}

// split is one lane's share of a schedule of n echoes split between lanes lanes: the global
// sequence numbers lane, lane+lanes, lane+2*lanes, ... below n. Lane-local index j is the
// lane's j-th echo, and the number of its send on the lane's socket (the TX timestamp key).
type split struct{ lane, lanes, n int }

// count is how many echoes the lane sends.
func (s split) count() int {
	if s.lane >= s.n {
		return 0
	}
	return (s.n - s.lane + s.lanes - 1) / s.lanes
}

// global is the global sequence number of the lane's j-th echo.
func (s split) global(j int) int { return j*s.lanes + s.lane }

// local is the lane-local index of global sequence number g, and whether g is the lane's.
func (s split) local(g uint64) (int, bool) {
	if g >= uint64(s.n) || int(g%uint64(s.lanes)) != s.lane {
		return 0, false
	}
	return int(g / uint64(s.lanes)), true
}

// due is how many of the lane's echoes are due when the first d echoes of the global
// schedule are.
func (s split) due(d int) int {
	d = min(d, s.n)
	if d <= s.lane {
		return 0
	}
	return (d - s.lane + s.lanes - 1) / s.lanes
}

// reorderedCount counts the echoes in ps (in global sequence order) whose reply arrived after
// the reply of an echo that left after it: reordering on the path, whatever thread sent the
// echoes. An echo leaves at its kernel TX timestamp and its reply arrives at its kernel RX
// timestamp when every echo that came back has them, else at the user-space send and read
// times; equal times are ordered by global sequence number. With one lane echoes leave in
// sequence order, so this is "a reply arriving after a later echo's", as ping counts it; with
// several, an echo one thread sent late, behind the other thread's next one, is not counted
// when its reply is late by as much: that is the threads' order, not the path's.
func reorderedCount(ps []Packet) int {
	kernel := true
	var got []int
	for i, p := range ps {
		if p.Lost() {
			continue
		}
		got = append(got, i)
		kernel = kernel && p.Stamped()
	}
	left, arrived := func(p Packet) int64 { return p.Sent }, func(p Packet) int64 { return p.Recv }
	if kernel {
		left, arrived = func(p Packet) int64 { return p.TXKernel }, func(p Packet) int64 { return p.RXKernel }
	}
	// Rank the echoes by when they left (ps is in sequence order: a stable sort keeps it for
	// ties), then walk them in arrival order.
	slices.SortStableFunc(got, func(a, b int) int { return cmp.Compare(left(ps[a]), left(ps[b])) })
	rank := make([]int, len(ps))
	for r, i := range got {
		rank[i] = r
	}
	slices.SortStableFunc(got, func(a, b int) int {
		return cmp.Or(cmp.Compare(arrived(ps[a]), arrived(ps[b])), cmp.Compare(rank[a], rank[b]))
	})
	n, top := 0, -1
	for _, i := range got {
		if rank[i] < top {
			n++
		}
		top = max(top, rank[i])
	}
	return n
}
