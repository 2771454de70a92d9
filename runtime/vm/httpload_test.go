package vm

import (
	"context"
	"encoding/json"
	"net"
	nethttp "net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/probe/http/load"
)

// TestAgentHTTPLoad runs the agent's "http" op (the http probe's load generator, as it runs in
// a guest source) against a server on this machine's loopback, its answer passed through JSON
// as on the agent's port: every request answered and timed, the bytes counted; and against a
// port nobody listens on: the run stops as a dead chain, and the first error's text survives
// the wire (the error value does not).
func TestAgentHTTPLoad(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("x", 1024)
	srv := &nethttp.Server{Handler: nethttp.HandlerFunc(func(w nethttp.ResponseWriter, _ *nethttp.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write([]byte(body))
	})}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	closed, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close()

	call := func(s load.Spec) *response {
		t.Helper()
		b, err := json.Marshal(handle(context.Background(), request{ID: 1, Op: "http", HTTP: &s}, Boot{}))
		if err != nil {
			t.Fatal(err)
		}
		var r response
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		return &r
	}
	spec := load.Spec{URL: "http://" + l.Addr().String() + "/obj-1k", Size: 1024, Requests: 12, Concurrency: 3,
		Timeout: 5 * time.Second, Deadline: time.Minute, DeadAfter: 10}
	r := call(spec)
	if r.Err != "" || r.HTTP == nil {
		t.Fatalf("answer %+v; want a result", r)
	}
	if res := r.HTTP; res.Finished != 12 || res.Errors != 0 || res.Answers != 12 || res.Bytes != 12*1024 || len(res.Times) != 12 || len(res.Phases) != 12 || res.Total <= 0 {
		t.Errorf("result %+v; want 12 answered requests of 1024 bytes, each timed", res)
	}

	spec.URL, spec.Requests = "http://"+refused+"/obj-1k", 50
	r = call(spec)
	if r.Err != "" || r.HTTP == nil {
		t.Fatalf("answer %+v; want a result", r)
	}
	if res := r.HTTP; !res.Dead || res.Answers != 0 || res.Errors != 10 || !strings.Contains(res.FirstError, "connection refused") || res.FirstErr != nil {
		t.Errorf("result %+v; want a dead chain after 10 refused connects, the first error's text kept", res)
	}

	if r := call(load.Spec{URL: "ftp://x/", Requests: 1}); r.Err == "" || r.HTTP != nil {
		t.Errorf("a bad url: answer %+v; want an error and no result", r)
	}
}
