package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"
)

// TestAgentServe: a session's requests run at once and are answered by ID (a request that
// blocks does not hold up the next one), a request's body reaches its operation, a failed
// request answers its error, a cancel ends the request it names, and the end of stdin
// cancels what still runs: serve writes every answer and returns.
func TestAgentServe(t *testing.T) {
	old := serveDo
	t.Cleanup(func() { serveDo = old })
	serveDo = func(ctx context.Context, op string, read func(any) error) (any, error) {
		var body struct{ Word string }
		if err := read(&body); err != nil {
			return nil, err
		}
		switch op {
		case AgentNode: // blocks until cancelled
			<-ctx.Done()
			return nil, errors.New("cancelled " + body.Word)
		case AgentCounters:
			return map[string]string{"echo": body.Word}, nil
		}
		return nil, errors.New("refused " + body.Word)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- agentServe(inR, outW); outW.Close() }()
	enc, dec := json.NewEncoder(inW), json.NewDecoder(outR)
	send := func(r sessionRequest) {
		t.Helper()
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() sessionAnswer {
		t.Helper()
		var a sessionAnswer
		if err := dec.Decode(&a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	body := func(w string) json.RawMessage { b, _ := json.Marshal(map[string]string{"Word": w}); return b }
	send(sessionRequest{ID: 1, Op: AgentNode, Req: body("one")})
	send(sessionRequest{ID: 2, Op: AgentNode, Req: body("two")})
	send(sessionRequest{ID: 3, Op: AgentCounters, Req: body("three")})
	if a := recv(); a.ID != 3 || string(a.Ans) != `{"echo":"three"}` || a.Error != "" {
		t.Fatalf("answer %+v, want request 3's echo while 1 and 2 block", a)
	}
	send(sessionRequest{ID: 4, Op: AgentBump, Req: body("four")})
	if a := recv(); a.ID != 4 || a.Error != "refused four" {
		t.Errorf("answer %+v, want request 4's error", a)
	}
	send(sessionRequest{ID: 5, Op: AgentPorts, Req: json.RawMessage(`{"Word":"x","extra":1}`)})
	if a := recv(); a.ID != 5 || a.Error == "" {
		t.Errorf("answer %+v, want request 5 refused for its unknown field", a)
	}
	send(sessionRequest{ID: 2, Cancel: true})
	if a := recv(); a.ID != 2 || a.Error != "cancelled two" {
		t.Errorf("answer %+v, want request 2 cancelled", a)
	}
	inW.Close() // the end of stdin cancels request 1
	if a := recv(); a.ID != 1 || a.Error != "cancelled one" {
		t.Errorf("answer %+v, want request 1 cancelled at the end of stdin", a)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return at the end of stdin")
	}
}
