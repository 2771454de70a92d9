package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
// with the same id, so that several requests may be in flight.

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
	c := &client{conn: conn, pending: map[uint64]chan *response{}}
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

func (c *client) read() {
	sc := bufio.NewScanner(c.conn)
	sc.Buffer(make([]byte, 1<<16), maxMessage)
	for sc.Scan() {
		var r response
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			continue // noise from a previous client's half-read line
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
}

// maxMessage bounds one line of the protocol (a command's output travels in it).
const maxMessage = 64 << 20

// call sends req and waits for its answer or ctx.
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
	data, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	c.wmu.Lock()
	_, err = c.conn.Write(append(data, '\n'))
	c.wmu.Unlock()
	if err != nil {
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
		delete(c.pending, req.ID)
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}
