package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sfclab/sfclab/hosts"
	"github.com/sfclab/sfclab/lb"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/probe/http/load"
	"github.com/sfclab/sfclab/probe/ndr/count"
	"github.com/sfclab/sfclab/probe/ndr/send"
	"github.com/sfclab/sfclab/probe/rtt/echo"
	"github.com/sfclab/sfclab/probe/tcprtt/exchange"
)

// The agent protocol: one JSON object per line each way over the guest's virtio-serial port
// (a unix socket on the host). Requests carry an id; the guest answers each, in any order,
// with the same id, so that several requests may be in flight. A caller that stops waiting
// (its context ended: a trial's deadline, Ctrl-C) sends {"id": ID, "op": "cancel"}: the guest
// cancels the context that request runs under (a command is killed, a probe's run stops
// sending) and answers it as it ends, an answer nobody waits for any more; "cancel" itself is
// not answered. When the host program goes away the guest cancels every request of its
// connection and writes none of their answers (guest.go, agentServer).

// opCancel is the request that cancels the request in flight with the same id.
const opCancel = "cancel"

// request is one call to the guest agent.
type request struct {
	ID uint64 `json:"id"`
	// Op is "ping" (boot phases), "run" (a command, waited for), "configure" (the
	// guest's network), or one of the other handlers' (daemon.go, echo.go, count.go,
	// check.go, httpload.go, inspect.go: "links", "lb-stats").
	Op      string        `json:"op"`
	Argv    []string      `json:"argv,omitempty"`
	Stdin   []byte        `json:"stdin,omitempty"`
	Timeout time.Duration `json:"timeout,omitempty"`
	Config  *GuestConfig  `json:"config,omitempty"`
	// Daemon and process operations (daemon.go): the daemon's log file, a process (group)
	// number with a command-line marker and a grace period, an address to dial.
	Log   string        `json:"log,omitempty"`
	PID   int           `json:"pid,omitempty"`
	Mark  string        `json:"mark,omitempty"`
	Grace time.Duration `json:"grace,omitempty"`
	Addr  string        `json:"addr,omitempty"` // or a stats socket to read (lb-stats)
	// Net is the network of an echo server's listener (echo.go): "tcp4" or "tcp6".
	Net string `json:"net,omitempty"`
	// TCPRTT is a tcprtt client run to Addr (echo.go).
	TCPRTT *exchange.Config `json:"tcprtt,omitempty"`
	// HTTP is an http probe's load generator run (httpload.go).
	HTTP *load.Spec `json:"http,omitempty"`
	// Port is the ndr receiver's port, Trial the trial whose count is read (count.go; the
	// receiver's number is PID, the time its count must not have grown Grace).
	Port  uint16 `json:"port,omitempty"`
	Trial uint32 `json:"trial,omitempty"`
	// Frames are an ndr sender's frame sizes to calibrate (ndrsend.go; its target is Addr),
	// Send one trial of it (its number is PID).
	Frames []string    `json:"frames,omitempty"`
	Send   *send.Trial `json:"send,omitempty"`
	// RTT is an rtt probe's run from this guest (rttecho.go).
	RTT *echo.GuestRun `json:"rtt,omitempty"`
}

// response is the guest's answer to one request.
type response struct {
	ID     uint64 `json:"id"`
	Code   int    `json:"code"`
	Stdout []byte `json:"stdout,omitempty"`
	Stderr []byte `json:"stderr,omitempty"`
	Err    string `json:"err,omitempty"`
	Boot   *Boot  `json:"boot,omitempty"`
	PID    int    `json:"pid,omitempty"` // a daemon started, or 1 for a process that runs
	// Connects and Exchanges are a tcprtt run's durations, timed in the guest.
	Connects  []time.Duration `json:"connects,omitempty"`
	Exchanges []time.Duration `json:"exchanges,omitempty"`
	// Reading is an ndr receiver's count of a trial (count.go).
	Reading *count.Reading `json:"reading,omitempty"`
	// HTTP is an http load generator run's result, timed in the guest (httpload.go).
	HTTP *load.Result `json:"http,omitempty"`
	// Calib is an ndr sender's calibration, Sent a trial's sending, timed in the guest
	// (ndrsend.go).
	Calib map[string]float64 `json:"calib,omitempty"`
	Sent  *send.Sent         `json:"sent,omitempty"`
	// RTT is an rtt run's result, every timestamp the guest's clock (rttecho.go).
	RTT *echo.Result `json:"rtt,omitempty"`
	// Links are the guest's interfaces, LB an sfclab balancer's counters (inspect.go).
	Links []netdev.LinkInfo `json:"links,omitempty"`
	LB    *lb.Stats         `json:"lb,omitempty"`
}

// Boot is when the guest reached each step of its start, in seconds since its kernel began
// (its uptime).
type Boot struct {
	Init    float64 `json:"init"`    // the kernel handed over to /init
	Modules float64 `json:"modules"` // virtio modules loaded (NICs and the agent port exist)
	// Root is when PID 1 started again in the Debian root it switched to (0: a busybox
	// image, no switch).
	Root  float64 `json:"root,omitempty"`
	Agent float64 `json:"agent"` // the agent answered its first request
}

// GuestConfig is a guest's network as the plan wants it: interfaces found by MAC address and
// renamed, their addresses, the node's sysctls, routes and policy rules.
type GuestConfig struct {
	Interfaces []GuestInterface `json:"interfaces"`
	Sysctls    [][2]string      `json:"sysctls,omitempty"`
	Routes     []netdev.Route   `json:"routes,omitempty"`
	Rules      []netdev.Rule    `json:"rules,omitempty"`
	// Ways make the guest a bump in the wire of a transparent lab: whatever arrives on a
	// way's In leaves by its Out, and back (hosts.ForwardIn, as on a namespace function).
	Ways []hosts.Pair `json:"ways,omitempty"`
}

// GuestInterface is one NIC of a guest.
type GuestInterface struct {
	Name  string         `json:"name"`
	MAC   string         `json:"mac"`
	MTU   int            `json:"mtu,omitempty"`
	Addrs []netip.Prefix `json:"addrs,omitempty"`
}

// client is one connection to a guest agent, shared by every caller in this process.
type client struct {
	conn    net.Conn
	wmu     sync.Mutex
	mu      sync.Mutex
	next    uint64
	pending map[uint64]chan *response
	err     error // set once the connection broke
}

var (
	clientsMu sync.Mutex
	clients   = map[string]*client{}
)

// agentClient returns this process's connection to the agent listening at sock, dialling it
// when there is none (or the last one broke).
func agentClient(sock string) (*client, error) {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	if c, ok := clients[sock]; ok {
		c.mu.Lock()
		broken := c.err != nil
		c.mu.Unlock()
		if !broken {
			return c, nil
		}
		delete(clients, sock)
	}
	conn, err := net.DialTimeout("unix", sock, 2*time.Second)
	if err != nil {
		if lab, node, ok := sockNode(sock); ok && !qemuRunning(lab, node) {
			// Say what the user can act on, not only the socket's "connection refused".
			return nil, fmt.Errorf("VM node %s is down: %s (connect to guest agent %s: %w)", node, qemuGone, sock, err)
		}
		return nil, fmt.Errorf("connect to guest agent %s: %w", sock, err)
	}
	// Ids start at a random number: an answer of a previous program's request that reaches
	// this one (were the guest not to see that program go) matches none of its requests.
	c := &client{conn: conn, pending: map[uint64]chan *response{}, next: rand.Uint64N(1 << 52)}
	go c.read()
	clients[sock] = c
	return c, nil
}

// sockNode is the lab and node of an agent socket in its run directory
// (RunRoot/LAB/NODE/agent.sock); false for a socket elsewhere (a test's own).
func sockNode(sock string) (lab, node string, ok bool) {
	rel, err := filepath.Rel(RunRoot, sock)
	if err != nil {
		return "", "", false
	}
	f := strings.Split(rel, string(filepath.Separator))
	if len(f) != 3 || f[2] != sockFile || f[0] == ".." {
		return "", "", false
	}
	return f[0], f[1], true
}

// dropClient closes this process's connection to the agent at sock.
func dropClient(sock string) {
	clientsMu.Lock()
	c, ok := clients[sock]
	delete(clients, sock)
	clientsMu.Unlock()
	if ok {
		c.conn.Close()
	}
}

// read delivers the guest's answers to their callers until the connection fails, then fails
// every call still waiting and closes the connection (the next call dials again).
func (c *client) read() {
	sc := bufio.NewScanner(c.conn)
	sc.Buffer(make([]byte, 1<<16), maxMessage)
	for sc.Scan() {
		var r response
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			if r.ID == 0 {
				continue // noise: the tail of a line the guest wrote before this connection
			}
			// An answer with an id that does not decode (a field of another type: an agent
			// of another sfclab build in a guest that ran on): its caller gets the reason
			// now, not a timeout.
			r = response{ID: r.ID, Err: fmt.Sprintf("decode the guest agent's answer: %v", err)}
		}
		c.mu.Lock()
		ch, ok := c.pending[r.ID]
		delete(c.pending, r.ID)
		c.mu.Unlock()
		if ok {
			ch <- &r
		}
	}
	err := sc.Err()
	if err == nil {
		err = errors.New("connection closed")
	}
	c.mu.Lock()
	c.err = err
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
	c.mu.Unlock()
	// Closed here too when the read failed on this side (an answer over maxMessage): QEMU
	// serves one connection at a time, and the next dial would wait behind this one.
	c.conn.Close()
}

// maxMessage bounds one line of the protocol (a command's output travels in it).
const maxMessage = 64 << 20

// cancelWrite bounds the write of a "cancel" request (a few bytes, into the socket's buffer:
// QEMU reads it even while its guest is stopped).
const cancelWrite = 2 * time.Second

// send writes req as one line by deadline (none: zero). A write that fails after part of the
// line went out closes the connection (the stream is broken), failing its calls.
func (c *client) send(req request, deadline time.Time) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	data = append(data, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.conn.SetWriteDeadline(deadline)
	n, err := c.conn.Write(data)
	if err != nil && n > 0 {
		c.conn.Close()
	}
	return err
}

// call sends req and waits for its answer or ctx. When ctx ends first, the guest is told to
// cancel the request.
func (c *client) call(ctx context.Context, req request) (*response, error) {
	ch := make(chan *response, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, fmt.Errorf("guest agent: %w", err)
	}
	c.next++
	req.ID = c.next
	c.pending[req.ID] = ch
	c.mu.Unlock()
	deadline, _ := ctx.Deadline()
	err := ctx.Err()
	if err == nil {
		err = c.send(req, deadline)
	}
	if err != nil {
		c.mu.Lock()
		delete(c.pending, req.ID)
		c.mu.Unlock()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("send to guest agent: %w", err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			c.mu.Lock()
			err := c.err
			c.mu.Unlock()
			return nil, fmt.Errorf("guest agent: %w", err)
		}
		return r, nil
	case <-ctx.Done():
		c.mu.Lock()
		_, waiting := c.pending[req.ID]
		delete(c.pending, req.ID)
		c.mu.Unlock()
		if waiting { // not answered yet: the guest may still be running it
			_ = c.send(request{ID: req.ID, Op: opCancel}, time.Now().Add(cancelWrite))
		}
		return nil, ctx.Err()
	}
}
