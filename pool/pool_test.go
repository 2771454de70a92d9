package pool

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestBound: never more than workers calls at once, every index once.
func TestBound(t *testing.T) {
	for _, workers := range []int{0, 1, 3, 50} {
		var now, peak atomic.Int32
		seen := make([]atomic.Int32, 20)
		err := Run(context.Background(), len(seen), workers, func(i int) error {
			if c := now.Add(1); c > peak.Load() {
				peak.Store(c)
			}
			time.Sleep(time.Millisecond)
			seen[i].Add(1)
			now.Add(-1)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if p, want := peak.Load(), int32(min(max(workers, 1), len(seen))); p > want {
			t.Errorf("workers %d: %d calls at once", workers, p)
		}
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Errorf("workers %d: index %d called %d times", workers, i, seen[i].Load())
			}
		}
	}
}

// TestErrors: Run stops starting calls after an error (or a cancelled context), All does not;
// both return every error.
func TestErrors(t *testing.T) {
	boom := errors.New("boom")
	var calls atomic.Int32
	fail := func(i int) error {
		calls.Add(1)
		if i == 0 {
			return boom
		}
		return nil
	}
	if err := Run(context.Background(), 100, 1, fail); !errors.Is(err, boom) || calls.Load() != 1 {
		t.Errorf("Run: %v after %d calls, want boom after 1", err, calls.Load())
	}
	calls.Store(0)
	if err := All(100, 1, fail); !errors.Is(err, boom) || calls.Load() != 100 {
		t.Errorf("All: %v after %d calls, want boom after 100", err, calls.Load())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls.Store(0)
	if err := Run(ctx, 10, 2, fail); !errors.Is(err, context.Canceled) || calls.Load() != 0 {
		t.Errorf("Run on a cancelled context: %v after %d calls", err, calls.Load())
	}
}
