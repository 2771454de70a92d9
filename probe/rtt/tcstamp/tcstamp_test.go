package tcstamp

import "testing"

// TestRoundSecond pins the rounding that lines TAI stamps up with the wall clock: readings a
// few microseconds either side of a whole-second offset give exactly that offset.
func TestRoundSecond(t *testing.T) {
	for _, tc := range []struct{ in, want int64 }{
		{0, 0},
		{7_000, 0},
		{-7_000, 0},
		{-37_000_000_000 + 12_345, -37_000_000_000},
		{-37_000_000_000 - 12_345, -37_000_000_000},
		{37_000_000_000 + 499_999_999, 37_000_000_000},
		{499_999_999, 0},
		{500_000_000, 1_000_000_000},
	} {
		if got := roundSecond(tc.in); got != tc.want {
			t.Errorf("roundSecond(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestClockOffset checks the offset against the clocks themselves: CLOCK_TAI plus the offset
// reads the wall clock within the time between two readings.
func TestClockOffset(t *testing.T) {
	off := clockOffset()
	if off%1_000_000_000 != 0 {
		t.Fatalf("offset %d ns is not whole seconds", off)
	}
	if off > 0 || off < -100_000_000_000 {
		t.Errorf("offset %d ns: CLOCK_REALTIME - CLOCK_TAI must be 0 or minus the TAI-UTC seconds", off)
	}
}
