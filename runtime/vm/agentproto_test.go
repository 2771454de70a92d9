package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sfclab/sfclab/probe/ndr/send"
	"github.com/sfclab/sfclab/probe/rtt/echo"
)

// answers records the guest's answers as it writes them to the host (the agent's side of the
// port), by id.
type answers struct {
	w  net.Conn
	mu sync.Mutex
	by map[uint64]response
}

func (a *answers) Write(b []byte) (int, error) {
	var r response
	if json.Unmarshal(b, &r) == nil {
		a.mu.Lock()
		a.by[r.ID] = r
		a.mu.Unlock()
	}
	return a.w.Write(b)
}

func (a *answers) get(id uint64) (response, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.by[id]
	return r, ok
}

// fakeGuest connects a host client to the agent's request loop (agentServer.serve, as on a
// guest's port) over an in-memory connection; done closes when serve returns (the host
// side closed).
func fakeGuest(t *testing.T) (c *client, a *agentServer, rec *answers, done chan struct{}) {
	t.Helper()
	host, guest := net.Pipe()
	rec = &answers{w: guest, by: map[uint64]response{}}
	a = &agentServer{w: rec}
	c = &client{conn: host, pending: map[uint64]chan *response{}}
	done = make(chan struct{})
	go func() { defer close(done); a.serve(guest) }()
	go c.read()
	t.Cleanup(func() { host.Close(); guest.Close(); <-done })
	return c, a, rec, done
}

// waitFor polls cond every 20 ms for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// liveSession is the session the agent answers now.
func (a *agentServer) liveSession() *session {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	return a.live
}

// TestAgentCancel: a caller whose context ends stops waiting at once and the guest is told:
// the command it runs is killed (its answer, which nobody waits for any more, says so) and
// the agent keeps answering. A host that goes away cancels what it left running, and no
// answer of its is written to the port afterwards (the next host would read it).
func TestAgentCancel(t *testing.T) {
	c, a, rec, done := fakeGuest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.call(ctx, request{Op: "run", Argv: []string{"sleep", "600"}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("run sleep 600 with a 300 ms context: %v, want the context's error", err)
	}
	c.mu.Lock()
	id := c.next
	c.mu.Unlock()
	// Generous bounds: the command's own is ten minutes.
	if !waitFor(30*time.Second, func() bool { _, ok := rec.get(id); return ok }) {
		t.Fatal("the guest did not answer the cancelled run within 30 s: it was not cancelled")
	}
	if r, _ := rec.get(id); r.Code != 128+9 {
		t.Errorf("the cancelled run's answer %+v; want exit code 137 (killed)", r)
	}
	t.Logf("cancelled run answered by the guest %s after the call began (killed)", time.Since(start).Round(time.Millisecond))
	if s := a.liveSession(); s == nil || !waitFor(10*time.Second, func() bool { return s.running() == 0 }) {
		t.Error("the cancelled request is still registered in the agent's session")
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	if r, err := c.call(ctx2, request{Op: "run", Argv: []string{"echo", "after"}}); err != nil || strings.TrimSpace(string(r.Stdout)) != "after" {
		t.Errorf("a run after the cancelled one: %+v, %v", r, err)
	}
	// A cancel naming a request that ended, or none, is harmless.
	if err := c.send(request{ID: 99999, Op: opCancel}, time.Time{}); err != nil {
		t.Fatal(err)
	}

	// The host goes away with a command running: the guest kills it and writes no answer.
	s := a.liveSession()
	go func() { _, _ = c.call(context.Background(), request{Op: "run", Argv: []string{"sleep", "600"}}) }()
	if !waitFor(10*time.Second, func() bool { return s.running() == 1 }) {
		t.Fatal("the second sleep never ran in the agent")
	}
	c.mu.Lock()
	left := c.next
	c.mu.Unlock()
	c.conn.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent's loop did not end when the host closed its side")
	}
	if !waitFor(30*time.Second, func() bool { return s.running() == 0 }) {
		t.Fatal("the sleep the host left was not cancelled within 30 s of the host going away")
	}
	if r, ok := rec.get(left); ok {
		t.Errorf("the agent wrote an answer %+v of the session that ended", r)
	}
}

// TestAgentUndecodable: lines that do not decode reach their callers as errors at once, both
// ways, instead of being skipped: an answer of a type the host does not know (an agent of
// another build), one the guest cannot encode (a NaN), a request the guest cannot decode. A
// line with no id (the tail of a line from before the connection) is skipped.
func TestAgentUndecodable(t *testing.T) {
	// The host's side: a fake agent answering each request with noise, then a bad answer.
	host, guest := net.Pipe()
	defer host.Close()
	defer guest.Close()
	c := &client{conn: host, pending: map[uint64]chan *response{}}
	go c.read()
	go func() {
		rd := bufio.NewReader(guest)
		for {
			line, err := rd.ReadBytes('\n')
			if err != nil {
				return
			}
			var req request
			_ = json.Unmarshal(line, &req)
			_, _ = guest.Write([]byte(`ail", "code": 0}` + "\n"))
			_, _ = fmt.Fprintf(guest, "{\"id\":%d,\"code\":\"zero\"}\n", req.ID)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := c.call(ctx, request{Op: "ping"})
	if err != nil || r == nil || !strings.Contains(r.Err, "decode the guest agent's answer") {
		t.Errorf("an answer that does not decode: %+v, %v; want an error that says so", r, err)
	}
	if ctx.Err() != nil {
		t.Error("the caller waited for its context")
	}

	// The guest's side: an answer with a NaN is replaced by one that says why, with its id.
	var got response
	if err := json.Unmarshal(encodeResponse(&response{ID: 7, Calib: map[string]float64{"64": math.NaN()}}), &got); err != nil ||
		got.ID != 7 || !strings.Contains(got.Err, "encode the answer") {
		t.Errorf("an answer with a NaN encoded as %+v (%v); want id 7 and the reason", got, err)
	}
	// A request the agent cannot decode is answered with the reason.
	fc, _, rec, _ := fakeGuest(t)
	// No id: not answered.
	if _, err := fc.conn.Write([]byte(`{"op": 5}` + "\n" + `{"id": 9, "op": "run", "argv": "not a list"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if !waitFor(10*time.Second, func() bool { _, ok := rec.get(9); return ok }) {
		t.Fatal("the agent did not answer a request it could not decode")
	}
	if r, _ := rec.get(9); !strings.Contains(r.Err, `decode request "run"`) {
		t.Errorf("answer to an undecodable request: %+v", r)
	}
	if _, ok := rec.get(0); ok {
		t.Error("the agent answered a line without an id")
	}
}

// TestAgentCancelProbes: the agent's long runs of a probe stop when their context ends, long
// before their own bound: an rtt run from the guest (100,000 echoes at 1000/s: 100 s) and an
// ndr trial (5 minutes), each cancelled after half a second. In a network namespace of the
// test's own (no VM).
func TestAgentCancelProbes(t *testing.T) {
	inPrivateNet(t, func() {
		call := func(req request) (*response, time.Duration) {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			start := time.Now()
			return handle(ctx, req, Boot{}), time.Since(start)
		}
		e := agentCall(request{Op: "echo-listen", Net: "udp4", Addr: ":7"})
		if e.Err != "" {
			t.Errorf("echo-listen: %s", e.Err)
			return
		}
		defer agentCall(request{Op: "echo-close", PID: e.PID})
		run := echo.GuestRun{Dst: netip.MustParseAddrPort("127.0.0.1:7"), Cfg: echo.Config{Protocol: echo.ProtoUDP, Rate: 1000, Count: 100000, PathEnd: echo.PathEndSocket}}
		r, took := call(request{Op: "rtt", RTT: &run})
		// Generous: a minute, where the run's own bound is minutes.
		if !strings.Contains(r.Err, "context deadline exceeded") || took > time.Minute || r.RTT == nil || r.RTT.Sent >= 100000 {
			t.Errorf("rtt cancelled after 500 ms: err %q, %s, result %+v; want it stopped early with the context's error", r.Err, took, r.RTT)
		} else {
			t.Logf("rtt cancelled: answered after %s, %d echoes sent of 100000", took.Round(time.Millisecond), r.RTT.Sent)
		}

		rc := agentCall(request{Op: "count-listen", Port: 5302})
		if rc.Err != "" {
			t.Errorf("count-listen: %s", rc.Err)
			return
		}
		defer agentCall(request{Op: "count-close", PID: rc.PID})
		o := agentCall(request{Op: "send-open", Addr: "127.0.0.1:5302", Frames: []string{"64"}})
		if o.Err != "" {
			t.Errorf("send-open: %s", o.Err)
			return
		}
		defer agentCall(request{Op: "send-close", PID: o.PID})
		r, took = call(request{Op: "send-trial", PID: o.PID, Send: &send.Trial{Frame: "64", ID: 3, Rate: 1000, Duration: send.MaxTrial}})
		if !strings.Contains(r.Err, "context deadline exceeded") || took > time.Minute || r.Sent == nil || r.Sent.Took > time.Minute {
			t.Errorf("ndr trial of %s cancelled after 500 ms: err %q, %s, sent %+v; want it stopped early", send.MaxTrial, r.Err, took, r.Sent)
		} else {
			t.Logf("ndr trial cancelled: answered after %s, %d datagrams sent", took.Round(time.Millisecond), r.Sent.Datagrams)
		}
	})
}
