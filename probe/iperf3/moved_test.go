package iperf3

import (
	"errors"
	"testing"
)

// TestMoved: a test whose receiver got nothing fails (ErrNothingMoved, saying what the sender
// reported); any data received passes, however little.
func TestMoved(t *testing.T) {
	for _, c := range []struct {
		name string
		r    Result
		fail bool
	}{
		{"nothing received, nothing sent", Result{}, true},
		{"sent into a black hole", Result{SentBPS: 9.4e8, ReceivedBPS: 0}, true},
		{"slow but moving", Result{SentBPS: 1e3, ReceivedBPS: 1}, false},
		{"normal", Result{SentBPS: 9.4e9, ReceivedBPS: 9.3e9}, false},
	} {
		err := moved(c.r)
		if got := errors.Is(err, ErrNothingMoved); got != c.fail {
			t.Errorf("%s: moved = %v, want failing %v", c.name, err, c.fail)
		}
	}
}
