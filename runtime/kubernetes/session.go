package kubernetes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// An agent session is one API server exec into an agent pod (`sfclab agent serve`) that
// carries any number of requests, instead of one exec per request: an exec costs a kubectl
// process, the API server's and the kubelet's upgrade, a runc exec and a new agent process
// (0.1–0.5 s on 2 cores), a request on an open session the agent's work alone. The protocol is
// JSON values both ways: sessionRequest on the agent's stdin, sessionAnswer on its stdout,
// matched by ID, so that requests run at once (a daemon's start is not held up by a 2 s
// iperf3 in another pod). The agent still listens on no port: what it may be asked is what
// RBAC grants on pods/exec in its namespace. A session closes after sessionIdle without a
// request, when its agent pod goes, and with sfclab's process (the agent reads the end of its
// stdin and ends, cancelling what runs for the session).
//
// Equivalent to: kubectl exec -i -n sfclab-system POD -c agent -- sfclab agent serve
const AgentServe = "serve"

// sessionIdle is how long a session with no request in flight stays open.
var sessionIdle = 30 * time.Second

// sessionRequest is one request on a session; Cancel (with the ID of a request in flight)
// cancels it instead.
type sessionRequest struct {
	ID     uint64          `json:"id"`
	Op     string          `json:"op,omitempty"`
	Req    json.RawMessage `json:"req,omitempty"`
	Cancel bool            `json:"cancel,omitempty"`
}

// sessionAnswer is the answer to the request ID: Ans, or Error.
type sessionAnswer struct {
	ID    uint64          `json:"id"`
	Ans   json.RawMessage `json:"ans,omitempty"`
	Error string          `json:"error,omitempty"`
}

// serveDo does a session's requests (agentDo; the protocol's tests replace it).
var serveDo = agentDo

// agentServe is `sfclab agent serve`: it reads sessionRequests from stdin until its end,
// does each at once (requests that change a lab's state one after another, as separate
// agent processes would be; requests about a pod's processes in parallel) and writes each
// answer when it is done. At the end of stdin it cancels what still runs and returns once
// every answer is written.
func agentServe(stdin io.Reader, stdout io.Writer) error {
	dec := json.NewDecoder(stdin)
	var (
		wmu     sync.Mutex // guards enc
		enc     = json.NewEncoder(stdout)
		state   sync.Mutex // held by requests other than AgentNode
		cmu     sync.Mutex // guards cancels
		cancels = map[uint64]context.CancelFunc{}
		wg      sync.WaitGroup
	)
	ctx, cancelAll := context.WithCancel(context.Background())
	defer cancelAll()
	var readErr error
	for {
		var r sessionRequest
		if err := dec.Decode(&r); err != nil {
			if !errors.Is(err, io.EOF) {
				readErr = fmt.Errorf("agent serve: read request: %w", err)
			}
			break
		}
		if r.Cancel {
			cmu.Lock()
			if c := cancels[r.ID]; c != nil {
				c()
			}
			cmu.Unlock()
			continue
		}
		rctx, cancel := context.WithCancel(ctx)
		cmu.Lock()
		cancels[r.ID] = cancel
		cmu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				cmu.Lock()
				delete(cancels, r.ID)
				cmu.Unlock()
				cancel()
			}()
			if r.Op != AgentNode {
				state.Lock()
				defer state.Unlock()
			}
			out := sessionAnswer{ID: r.ID}
			ans, err := serveDo(rctx, r.Op, func(v any) error {
				d := json.NewDecoder(bytes.NewReader(r.Req))
				d.DisallowUnknownFields()
				return d.Decode(v)
			})
			if err == nil {
				out.Ans, err = json.Marshal(ans)
			}
			if err != nil {
				out.Error = err.Error()
			}
			wmu.Lock()
			defer wmu.Unlock()
			_ = enc.Encode(out)
		}()
	}
	cancelAll()
	wg.Wait()
	return readErr
}

// session is sfclab's end of one agent session.
type session struct {
	key, pod, kn string
	cmd          *exec.Cmd
	stdin        io.WriteCloser
	stderr       *bytes.Buffer // read after the process ended

	wmu sync.Mutex // guards enc and stdin's close
	enc *json.Encoder

	mu      sync.Mutex // guards the rest
	nextID  uint64
	pending map[uint64]chan sessionAnswer
	answers int   // answers received
	closing bool  // stdin closed for idleness: no new request
	err     error // why the session ended; nil while it is open
	idle    *time.Timer
}

// sessions are the open sessions, by kubeconfig and agent pod.
var sessions = struct {
	sync.Mutex
	m      map[string]*session
	legacy map[string]bool // agent pods whose program has no sessions: one exec per request
}{m: map[string]*session{}, legacy: map[string]bool{}}

// errSessionClosing is a request on a session that closes for idleness: it goes on a new one.
var errSessionClosing = errors.New("the session is closing")

// errNoSession is a session that could not serve because the agent pod's program does not
// know AgentServe (an agent of an older sfclab, reached by inspect or serve).
var errNoSession = errors.New("the agent has no sessions")

// openSession returns the open session to the agent pod pod on Kubernetes node kn, starting
// one when there is none.
func openSession(c *client, kn, pod string) (*session, error) {
	key := c.Kubeconfig + "\x00" + pod
	sessions.Lock()
	defer sessions.Unlock()
	if sessions.legacy[key] {
		return nil, errNoSession
	}
	if s := sessions.m[key]; s != nil {
		return s, nil
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		return nil, fmt.Errorf("sfclab reaches its agent through the API server's exec (kubectl exec), and kubectl is not on PATH: %w", err)
	}
	s := &session{key: key, pod: pod, kn: kn, stderr: &bytes.Buffer{}, pending: map[uint64]chan sessionAnswer{}}
	s.cmd = exec.Command(kubectl, "--kubeconfig", c.Kubeconfig, "exec", "-i", "-n", AgentNamespace, pod, "-c", agentContainer,
		"--", "/usr/local/bin/sfclab", "agent", AgentServe)
	s.cmd.Stderr = s.stderr
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("start a session: %w", err)
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start a session: %w", err)
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start a session: %w", err)
	}
	s.enc = json.NewEncoder(s.stdin)
	s.idle = time.AfterFunc(sessionIdle, s.closeIfIdle)
	sessions.m[key] = s
	go s.read(stdout)
	return s, nil
}

// read delivers the agent's answers until the session ends, then fails what is pending.
func (s *session) read(stdout io.Reader) {
	dec := json.NewDecoder(stdout)
	var err error
	for {
		var a sessionAnswer
		if err = dec.Decode(&a); err != nil {
			break
		}
		s.mu.Lock()
		ch := s.pending[a.ID]
		delete(s.pending, a.ID)
		s.answers++
		s.mu.Unlock()
		if ch != nil {
			ch <- a
		}
	}
	werr := s.cmd.Wait()
	msg := strings.TrimSpace(s.stderr.String())
	sessions.Lock()
	if sessions.m[s.key] == s {
		delete(sessions.m, s.key)
	}
	s.mu.Lock()
	if s.answers == 0 && strings.Contains(msg, `unknown request "`+AgentServe+`"`) {
		sessions.legacy[s.key] = true
		err = errNoSession
	} else {
		if errors.Is(err, io.EOF) {
			err = errors.New("the session ended")
		}
		if werr != nil {
			err = fmt.Errorf("%w (%v)", err, werr)
		}
		if msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
	}
	s.err = err
	pending := s.pending
	s.pending = nil
	s.idle.Stop()
	s.mu.Unlock()
	sessions.Unlock()
	for _, ch := range pending {
		close(ch)
	}
}

// closeIfIdle ends the session when no request is in flight (the agent then ends), else
// looks again after sessionIdle.
func (s *session) closeIfIdle() {
	sessions.Lock()
	defer sessions.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	if len(s.pending) > 0 {
		s.idle.Reset(sessionIdle)
		return
	}
	if sessions.m[s.key] == s {
		delete(sessions.m, s.key) // new requests open a new session
	}
	s.closing = true
	go func() {
		s.wmu.Lock()
		defer s.wmu.Unlock()
		s.stdin.Close()
	}()
}

// call sends one request on the session and decodes the answer into ans (nil: none wanted).
// A cancelled ctx cancels the request in the agent.
func (s *session) call(ctx context.Context, op string, req, ans any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return errSessionClosing
	}
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	s.nextID++
	id := s.nextID
	ch := make(chan sessionAnswer, 1)
	s.pending[id] = ch
	s.idle.Reset(sessionIdle)
	s.mu.Unlock()
	s.wmu.Lock()
	err = s.enc.Encode(sessionRequest{ID: id, Op: op, Req: body})
	s.wmu.Unlock()
	if err != nil {
		return s.wait(ch, err)
	}
	select {
	case a, ok := <-ch:
		return s.answer(a, ok, ans)
	case <-ctx.Done():
		s.mu.Lock()
		open := s.pending != nil
		delete(s.pending, id)
		s.mu.Unlock()
		if open {
			s.wmu.Lock()
			_ = s.enc.Encode(sessionRequest{ID: id, Cancel: true})
			s.wmu.Unlock()
		}
		return ctx.Err()
	}
}

// wait returns why the session failed a request it could not send: the session's end, once
// read has seen it.
func (s *session) wait(ch chan sessionAnswer, sendErr error) error {
	select {
	case a, ok := <-ch:
		return s.answer(a, ok, nil)
	case <-time.After(5 * time.Second):
		return fmt.Errorf("send the request: %w", sendErr)
	}
}

func (s *session) answer(a sessionAnswer, ok bool, ans any) error {
	if !ok {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.err
	}
	if a.Error != "" {
		return errors.New(a.Error)
	}
	if ans != nil {
		return json.Unmarshal(a.Ans, ans)
	}
	return nil
}
