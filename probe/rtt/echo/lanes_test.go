package echo

import (
	"testing"
	"time"
)

func TestLaneCount(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		cores int
		want  int
	}{
		{"1 kpps", Config{Rate: 1000, Count: 1000}, 2, 1},
		{"at laneRate", Config{Rate: laneRate, Count: 100_000}, 2, 1},
		{"just above laneRate", Config{Rate: laneRate + 1, Count: 100_000}, 2, 2},
		{"100 kpps on 2 cores", Config{Rate: 100_000, Count: 100_000}, 2, 2},
		{"100 kpps on 1 core", Config{Rate: 100_000, Count: 100_000}, 1, 1},
		{"1 Mpps on 2 cores", Config{Rate: 1e6, Count: 1e6}, 2, 2},
		{"1 Mpps on 64 cores", Config{Rate: 1e6, Count: 1e6}, 64, maxLanes},
		{"more lanes than echoes", Config{Rate: 200_000, Count: 3}, 8, 3},
		{"flood", Config{Rate: Max, Count: 1000}, 2, 1},
	}
	for _, tt := range tests {
		if got := laneCount(tt.cfg, tt.cores); got != tt.want {
			t.Errorf("%s: laneCount = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestSplit: the lanes' shares partition the schedule (every global sequence number is one
// lane's, once), local and global invert each other, and at every point of the schedule the
// lanes' due echoes add up to the global schedule's.
func TestSplit(t *testing.T) {
	tests := []struct {
		n, lanes int
		counts   []int
	}{
		{n: 10, lanes: 1, counts: []int{10}},
		{n: 10, lanes: 2, counts: []int{5, 5}},
		{n: 11, lanes: 2, counts: []int{6, 5}},
		{n: 7, lanes: 3, counts: []int{3, 2, 2}},
		{n: 2, lanes: 3, counts: []int{1, 1, 0}},
		{n: 1, lanes: 2, counts: []int{1, 0}},
	}
	for _, tt := range tests {
		owner := make([]int, tt.n)
		for i := range owner {
			owner[i] = -1
		}
		for lane := range tt.lanes {
			sp := split{lane: lane, lanes: tt.lanes, n: tt.n}
			if got := sp.count(); got != tt.counts[lane] {
				t.Errorf("n %d lanes %d: lane %d count %d, want %d", tt.n, tt.lanes, lane, got, tt.counts[lane])
			}
			for j := range sp.count() {
				g := sp.global(j)
				if g >= tt.n || owner[g] != -1 {
					t.Fatalf("n %d lanes %d: lane %d echo %d is global %d (owner %d)", tt.n, tt.lanes, lane, j, g, owner[min(g, tt.n-1)])
				}
				owner[g] = lane
				if l, ok := sp.local(uint64(g)); !ok || l != j {
					t.Errorf("n %d lanes %d: lane %d local(%d) = %d, %v; want %d", tt.n, tt.lanes, lane, g, l, ok, j)
				}
			}
			if _, ok := sp.local(uint64(tt.n)); ok {
				t.Errorf("n %d lanes %d: lane %d owns global %d, past the end", tt.n, tt.lanes, lane, tt.n)
			}
		}
		for g, o := range owner {
			if o == -1 {
				t.Errorf("n %d lanes %d: global %d is no lane's", tt.n, tt.lanes, g)
			}
			for lane := range tt.lanes {
				if _, ok := (split{lane: lane, lanes: tt.lanes, n: tt.n}).local(uint64(g)); ok != (lane == o) {
					t.Errorf("n %d lanes %d: lane %d local(%d) ok=%v, owner %d", tt.n, tt.lanes, lane, g, ok, o)
				}
			}
		}
		for d := 0; d <= tt.n+2; d++ {
			sum := 0
			for lane := range tt.lanes {
				sp := split{lane: lane, lanes: tt.lanes, n: tt.n}
				k := sp.due(d)
				sum += k
				// The lane's due echoes are exactly its global sequence numbers below d.
				if k > 0 && sp.global(k-1) >= min(d, tt.n) || k < sp.count() && sp.global(k) < min(d, tt.n) {
					t.Errorf("n %d lanes %d: lane %d due(%d) = %d", tt.n, tt.lanes, lane, d, k)
				}
			}
			if sum != min(d, tt.n) {
				t.Errorf("n %d lanes %d: due(%d) adds up to %d, want %d", tt.n, tt.lanes, d, sum, min(d, tt.n))
			}
		}
	}
}

func TestReorderedCount(t *testing.T) {
	us := int64(time.Microsecond)
	// stamped: an echo that left at tx (µs) and came back at rx (µs), kernel stamps and user
	// times alike; rx 0 = lost.
	stamped := func(tx, rx int64) Packet {
		p := Packet{Sent: tx * us, TXKernel: tx * us}
		if rx != 0 {
			p.RXKernel, p.Recv = rx*us, rx*us+us
		}
		return p
	}
	tests := []struct {
		name string
		ps   []Packet
		want int
	}{
		{"in order", []Packet{stamped(1, 5), stamped(2, 6), stamped(3, 7)}, 0},
		{"one overtaken", []Packet{stamped(1, 8), stamped(2, 6), stamped(3, 7)}, 1},
		{"two behind a fast one", []Packet{stamped(1, 5), stamped(2, 9), stamped(3, 9), stamped(4, 8)}, 2},
		{"a lost echo is no reordering", []Packet{stamped(1, 0), stamped(2, 6), stamped(3, 7)}, 0},
		// Two threads: echo 1 left after echo 2 (its thread was late) and came back after it:
		// the path kept the order.
		{"sent late by its thread", []Packet{stamped(1, 5), stamped(3, 8), stamped(2, 6), stamped(4, 9)}, 0},
		// Echoes 0 and 1 left in one sendmmsg (same user time) with distinct kernel stamps.
		{"batch, kernel order", []Packet{{Sent: 1 * us, TXKernel: 2 * us, RXKernel: 9 * us, Recv: 10 * us},
			{Sent: 1 * us, TXKernel: 3 * us, RXKernel: 8 * us, Recv: 10 * us}}, 1},
		// Without kernel stamps: user times, ties by sequence number.
		{"user times", []Packet{{Sent: 1 * us, Recv: 9 * us}, {Sent: 1 * us, Recv: 8 * us}, {Sent: 2 * us, Recv: 10 * us}}, 1},
		{"ties in order", []Packet{{Sent: 1 * us, Recv: 9 * us}, {Sent: 1 * us, Recv: 9 * us}}, 0},
		{"none came back", []Packet{stamped(1, 0)}, 0},
		{"empty", nil, 0},
	}
	for _, tt := range tests {
		if got := reorderedCount(tt.ps); got != tt.want {
			t.Errorf("%s: reorderedCount = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestMerge: two lanes' timestamps and counts become one result in global sequence order,
// with an echo a lane did not send (it stopped early) left out and the achieved rate taken
// over both lanes' sends.
func TestMerge(t *testing.T) {
	const n = 5
	a := newArrays(n)
	ms := []*measurement{
		{sp: split{lane: 0, lanes: 2, n: n}, nsent: 3, received: 2, dups: 1, txStamps: 3, first: 1000, last: 5000},
		{sp: split{lane: 1, lanes: 2, n: n}, nsent: 1, received: 1, errors: 1, txStamps: 0, retries: 2, first: 2000, last: 2000},
	}
	for g, sent := range []int64{1000, 2000, 3000, 0, 5000} { // lane 1 did not send echo 3
		a.sent[g] = sent
	}
	a.txK[0], a.txK[2], a.txK[4] = 1100, 3100, 5100
	a.txS[1] = 2050 // lane 1's driver gave no TX stamp
	a.rxK[0], a.rxK[1], a.rxK[4] = 1900, 2900, 5900
	a.rxU[0], a.rxU[1], a.rxU[4] = 2000, 3000, 6000
	r := merge(Config{Protocol: ProtoICMP, Size: 64, Rate: 1000}, a, ms, 0)
	if r.Threads != 2 || r.Sent != 4 || r.Received != 3 || r.Duplicates != 1 || r.Errors != 1 || r.TXStamps != 3 || r.TXSched != 1 || r.Retries != 2 {
		t.Errorf("counts: %+v", *r)
	}
	var seqs []uint64
	for _, p := range r.Packets {
		seqs = append(seqs, p.Seq)
	}
	if len(seqs) != 4 || seqs[0] != 0 || seqs[1] != 1 || seqs[2] != 2 || seqs[3] != 4 {
		t.Errorf("packets %v, want sequence numbers 0 1 2 4", seqs)
	}
	if p := r.Packets[1]; !p.TXSched || p.TXKernel != 2050 || p.Recv != 3000 {
		t.Errorf("echo 1: %+v", p)
	}
	// 4 echoes from 1000 to 5000 ns: 3 intervals in 4 µs.
	if want := 3 / 4e-6; r.Achieved < want*0.999 || r.Achieved > want*1.001 {
		t.Errorf("achieved %g, want %g", r.Achieved, want)
	}
}
