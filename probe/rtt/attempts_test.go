package rtt

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/probe/rtt/echo"
)

// lossy returns a measure function whose n-th run (1-based) loses lost[n-1] of 10 echoes
// (the last entry repeats), counting its calls.
func lossy(calls *int, lost ...int) func(context.Context) (*Result, error) {
	return func(context.Context) (*Result, error) {
		*calls++
		l := lost[min(*calls, len(lost))-1]
		r := &Result{Protocol: echo.ProtoICMP, Size: 64, Requested: 1000, Achieved: 1000, Sent: 10, Received: 10 - l}
		for i := range 10 {
			p := Packet{Seq: uint64(i), Sent: 1000, TXKernel: 2000, RXKernel: 30000, Recv: 40000}
			if i < l {
				p.Recv, p.RXKernel = 0, 0
			}
			r.Packets = append(r.Packets, p)
		}
		return r, nil
	}
}

// TestMeasureAttempts: runs repeat until one gets every echo back, never more than asked.
func TestMeasureAttempts(t *testing.T) {
	for _, tt := range []struct {
		name      string
		attempts  int
		lost      []int
		wantRuns  int
		wantFinal bool // the last run complete
	}{
		{"once: no repetition asked", 0, []int{2}, 1, false},
		{"complete at once", 5, []int{0}, 1, true},
		{"complete at the third", 5, []int{3, 1, 0}, 3, true},
		{"bounded: never complete", 4, []int{1}, 4, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			runs, err := measureAttempts(context.Background(), tt.attempts, lossy(&calls, tt.lost...))
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != tt.wantRuns || calls != tt.wantRuns || runs[len(runs)-1].Complete() != tt.wantFinal {
				t.Fatalf("%d runs (%d calls), last complete %v; want %d, %v", len(runs), calls, runs[len(runs)-1].Complete(), tt.wantRuns, tt.wantFinal)
			}
			samples := AttemptSamples(tt.attempts, runs)
			var attempts, finals, rtts int
			for _, s := range samples {
				switch s.Metric {
				case "attempts":
					attempts++
					if int(s.Value) != tt.wantRuns || s.Labels["complete"] != map[bool]string{true: "true", false: "false"}[tt.wantFinal] {
						t.Errorf("attempts sample %v %v", s.Value, s.Labels)
					}
				case "rtt":
					rtts++
					if s.Labels["final"] == "true" {
						finals++
					}
				}
			}
			// Every attempt's echoes are kept; only the last run's are final.
			wantRTT := 0
			for _, r := range runs {
				wantRTT += r.Received
			}
			if rtts != wantRTT {
				t.Errorf("%d rtt samples, want every attempt's %d", rtts, wantRTT)
			}
			if tt.attempts <= 1 {
				if attempts != 0 || finals != 0 {
					t.Errorf("one run asked: want the unlabelled samples, got %d attempts samples, %d final", attempts, finals)
				}
				return
			}
			if attempts != 1 || finals != runs[len(runs)-1].Received {
				t.Errorf("%d attempts samples, %d final echoes; want 1 and %d", attempts, finals, runs[len(runs)-1].Received)
			}
		})
	}
}

// TestMeasureAttemptsError: an error ends the attempts, keeping the runs made.
func TestMeasureAttemptsError(t *testing.T) {
	calls := 0
	boom := errors.New("socket gone")
	ok := lossy(&calls, 1)
	runs, err := measureAttempts(context.Background(), 5, func(ctx context.Context) (*Result, error) {
		if calls == 2 {
			return nil, boom
		}
		return ok(ctx)
	})
	if !errors.Is(err, boom) || len(runs) != 2 {
		t.Fatalf("runs %d, err %v; want 2 and the error", len(runs), err)
	}
}

func TestAttemptsValidate(t *testing.T) {
	for _, n := range []int{0, 1, echo.MaxAttempts} {
		if err := (Config{Attempts: n}).Validate(); err != nil {
			t.Errorf("attempts %d: %v", n, err)
		}
	}
	for _, n := range []int{-1, echo.MaxAttempts + 1} {
		err := (Config{Attempts: n}).Validate()
		if !errors.Is(err, echo.ErrConfig) || !strings.Contains(err.Error(), "attempts") {
			t.Errorf("attempts %d: %v, want a configuration error naming attempts", n, err)
		}
	}
}
