package load

import (
	"context"
	"net/netip"
	"time"
)

// Spec is one run of the load generator: Requests GETs of URL (through Proxy when it is
// valid), Concurrency at a time. It travels to a guest's agent as JSON.
type Spec struct {
	URL   string         `json:"url"`
	Proxy netip.AddrPort `json:"proxy"`
	// Size is the object's length in bytes: a body of another length is an error.
	Size        int64 `json:"size"`
	Requests    int   `json:"requests"`
	Concurrency int   `json:"concurrency"`
	KeepAlive   bool  `json:"keepalive,omitempty"`
	// Timeout bounds each request, connect to end of answer; Deadline the whole run (the
	// caller's context may end it sooner).
	Timeout  time.Duration `json:"timeout"`
	Deadline time.Duration `json:"deadline"`
	// DeadAfter is how many requests must fail at the connection level, with none answered,
	// before the run stops as a dead chain.
	DeadAfter int64 `json:"dead_after"`
}

// Timing is one answered request: its time (ms, connect to end of answer) and when it ended
// (by the clock of the machine that ran it).
type Timing struct {
	MS float64   `json:"ms"`
	At time.Time `json:"at"`
}

// Result is what a run did.
type Result struct {
	// Total is the wall time from the first request to the last finished one (ab's "Time
	// taken for tests"), by the clock of the machine that ran it.
	Total time.Duration `json:"total"`
	// Finished counts requests answered or failed, Errors those without a complete answer,
	// Non2xx the answers outside 200-299, Bytes the body bytes received.
	Finished int64    `json:"finished"`
	Errors   int64    `json:"errors"`
	Non2xx   int64    `json:"non2xx"`
	Bytes    int64    `json:"bytes"`
	Answers  int64    `json:"answers"`
	Times    []Timing `json:"times,omitempty"`
	Phases   []Phases `json:"phases,omitempty"`
	// Dead is set when the first DeadAfter requests all failed without an answer.
	Dead bool `json:"dead,omitempty"`
	// FirstErr is the first request's error (nil in a Result decoded from JSON: FirstError
	// holds its text).
	FirstErr   error  `json:"-"`
	FirstError string `json:"first_error,omitempty"`
}

// Run runs s's requests on one thread inside enter (which runs its function in the source's
// network stack: a namespace entered, or as is in a guest) and collects their outcomes. An
// error is returned only when the run could not be made; one that ctx ended returns what was
// done.
func Run(ctx context.Context, s Spec, enter func(func() error) error) (*Result, error) {
	req, addr, err := request(s.URL, s.Proxy, s.KeepAlive)
	if err != nil {
		return nil, err
	}
	if s.Deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Deadline)
		defer cancel()
	}
	res := &Result{Times: make([]Timing, 0, s.Requests)}
	var start, last time.Time
	cl := &client{req: req, addr: addr, size: s.Size, keepAlive: s.KeepAlive, timeout: s.Timeout,
		n: int64(s.Requests), done: func(o outcome) bool {
			res.Finished++
			res.Bytes += o.bytes
			last = o.end
			if o.status != 0 {
				res.Answers++
				if o.status < 200 || o.status > 299 {
					res.Non2xx++
				}
			}
			if o.err != nil {
				res.Errors++
				if res.FirstErr == nil {
					res.FirstErr, res.FirstError = o.err, o.err.Error()
				}
				if res.Answers == 0 && res.Errors >= s.DeadAfter {
					res.Dead = true
					return false
				}
				return true
			}
			res.Times = append(res.Times, Timing{MS: float64(o.end.Sub(o.start).Nanoseconds()) / 1e6, At: o.end})
			if ph, ok := o.phases(); ok {
				res.Phases = append(res.Phases, ph)
			}
			return true
		}}
	err = enter(func() error {
		start = time.Now()
		return cl.run(ctx, s.Concurrency)
	})
	if err != nil && ctx.Err() == nil {
		return nil, err
	}
	if !last.IsZero() {
		res.Total = last.Sub(start)
	} else {
		res.Total = time.Since(start)
	}
	return res, nil
}
