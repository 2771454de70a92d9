package rtt

import (
	"errors"
	"testing"
	"time"

	"github.com/sfclab/sfclab/probe/rtt/echo"
)

// TestMethodChoice: the default method is the XDP generator from echo.HighRateFrom up and the
// socket path below it and for a flood; an explicit method wins either way.
func TestMethodChoice(t *testing.T) {
	for _, c := range []struct {
		name    string
		cfg     Config
		wantXDP bool
	}{
		{"1k default", Config{Rate: 1000}, false},
		{"just below", Config{Rate: echo.HighRateFrom - 1}, false},
		{"threshold", Config{Rate: echo.HighRateFrom}, true},
		{"1M default", Config{Rate: 1e6}, true},
		{"flood default", Config{Rate: echo.Max}, false},
		{"1M socket", Config{Rate: 1e6, Method: echo.MethodSocket}, false},
		{"1k xdp", Config{Rate: 1000, Method: echo.MethodXDP}, true},
		{"flood xdp", Config{Rate: echo.Max, Method: echo.MethodXDP}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.cfg.WithDefaults().XDP(); got != c.wantXDP {
				t.Errorf("xdp() = %v, want %v", got, c.wantXDP)
			}
		})
	}
}

// TestEchoTime: a run that times a number of echoes lasts echoes x every / rate, at the
// rate it actually sends (after a clamp), at least 100 ms and at most its bound.
func TestEchoTime(t *testing.T) {
	for _, c := range []struct {
		name          string
		echoes, every int
		rate          float64
		bound, want   time.Duration
	}{
		{"1000 at 1M, every 1024th", 1000, 1024, 1e6, MaxEchoTime, 1024 * time.Millisecond},
		{"200 at 1M", 200, 1024, 1e6, MaxEchoTime, 204800 * time.Microsecond},
		{"200 clamped to 100k", 200, 1024, 100e3, MaxEchoTime, 2048 * time.Millisecond},
		{"at least 100ms", 10, 1024, 1e6, MaxEchoTime, 100 * time.Millisecond},
		{"at most the bound", 1000, 1024, 10e3, MaxEchoTime, MaxEchoTime},
		{"a shorter bound", 1000, 1024, 1e6, 500 * time.Millisecond, 500 * time.Millisecond},
		{"no rate: the bound", 1000, 1024, 0, time.Second, time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := echoTime(c.echoes, c.every, c.rate, c.bound); got != c.want {
				t.Errorf("echoTime = %s, want %s", got, c.want)
			}
		})
	}
}

// TestMethodValidate: an unknown method and a negative sample_every are refused, named.
func TestMethodValidate(t *testing.T) {
	for _, c := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{Method: echo.MethodXDP, Rate: 1e6}, true},
		{Config{Method: echo.MethodSocket}, true},
		{Config{Method: "afxdp"}, false},
		{Config{SampleEvery: -1}, false},
	} {
		err := c.cfg.Validate()
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, echo.ErrConfig)) {
			t.Errorf("%+v: %v", c.cfg, err)
		}
	}
}
