// Package iperf3 is the throughput probe: one-off iperf3 servers on every destination
// instance, the iperf3 client in the chain's source, its -J report turned into samples.
//
// Either end may be a VM guest (probe.Guest): the client then runs in the guest through its
// agent (Output), and a server there is started by the agent (Daemon), found listening by
// busybox netstat in the guest and stopped by the agent (probe.Guest), never by the host's
// /proc or kill (the number is the guest's PID).
package iperf3

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/vnf"
)

// Name is the probe's name in samples.
const Name = "iperf3"

// Bounds of one run.
const (
	// ExtraTime is added to the test's duration (and omitted seconds) to bound the client.
	ExtraTime = 15 * time.Second
	// RetryFor bounds how long the client retries while no server listens yet.
	RetryFor = 2 * time.Second
	// StopTimeout bounds the wait for each server to exit once the client is done.
	StopTimeout = 2 * time.Second
	// GuestReadyFor bounds the wait for a server in a VM guest to listen. Unlike a
	// namespace's (best effort, RetryFor), it is a check: a guest's server that does not
	// listen in time fails the run with its log. Under TCG on a loaded host an emulated
	// iperf3 takes a second or more to start.
	GuestReadyFor = 30 * time.Second
	// guestPoll is the interval between checks of a guest's server (each is a command in the
	// guest through its agent).
	guestPoll = 200 * time.Millisecond
)

// ErrSplitFlows means iperf3's control and data connections reached different servers: a
// load balancer in the chain spreads flows (per connection) over several destination
// instances, and an iperf3 test needs all its connections on one server.
var ErrSplitFlows = errors.New("iperf3 connections reached different servers")

// ErrNothingMoved is returned (after the samples are emitted) when a test's receiver got no
// data at all: the trial failed, and its zero must not enter a ratio as a measured figure.
var ErrNothingMoved = errors.New("iperf3 moved nothing")

// moved returns ErrNothingMoved, with what each side saw, when the receiver got 0 bit/s.
func moved(r Result) error {
	if r.ReceivedBPS > 0 {
		return nil
	}
	return fmt.Errorf("%w: the receiver got 0 bit/s over the test (the sender reported %.0f bit/s): the chain carried none of it", ErrNothingMoved, r.SentBPS)
}

// Config is one iperf3 test.
type Config struct {
	// Duration of the test (-t, whole seconds, rounded up); 0 means 10 s.
	Duration time.Duration
	// Protocol is "tcp" (default) or "udp".
	Protocol string
	// Streams is the number of parallel streams (-P); 0 means 1.
	Streams int
	// Reverse makes the server send (-R).
	Reverse bool
	// Bitrate is the UDP target rate (-b, e.g. "1G"); "" keeps iperf3's default (1 Mbit/s).
	Bitrate string
	// Congestion is the TCP congestion control algorithm (-C, e.g. "cubic"); "" keeps the
	// host default. The algorithm actually used is recorded in the cc label.
	Congestion string
	// Omit skips the first seconds of the test in the report (-O).
	Omit int
	// Around, when set, is called with the client's run: it may do work right before and
	// after it. client returns the wall-clock window of the test's measured transfer
	// (Result.Transfer), ok false when the run gave no report: a CPU sampler bounds its
	// figures to it, leaving out the server's start, the wait for it to listen, the
	// client's start and connect, the omitted seconds and the results exchange. Its error
	// is the run's.
	Around func(client func() (transfer probe.Window, ok bool)) error
}

func (c Config) withDefaults() Config {
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Protocol == "" {
		c.Protocol = "tcp"
	}
	if c.Streams <= 0 {
		c.Streams = 1
	}
	return c
}

func (c Config) validate() error {
	if c.Protocol != "tcp" && c.Protocol != "udp" {
		return fmt.Errorf("configure iperf3: protocol %q is not tcp or udp", c.Protocol)
	}
	if c.Omit < 0 {
		return fmt.Errorf("configure iperf3: omit %d is negative", c.Omit)
	}
	return nil
}

func (c Config) seconds() int { return int(math.Ceil(c.Duration.Seconds())) }

// Timeout is how long a run of this test may take at most: duration, omitted seconds and
// ExtraTime.
func (c Config) Timeout() time.Duration {
	c = c.withDefaults()
	return time.Duration(c.seconds()+c.Omit)*time.Second + ExtraTime
}

// ClientArgs returns the client's command line for a test against target:port.
//
// Equivalent to: iperf3 -c TARGET -p PORT -t D -J [-P n] [-u -b X] [-R] [-C cc] [-O n]
func (c Config) ClientArgs(target string, port uint16) []string {
	c = c.withDefaults()
	args := []string{"iperf3", "-c", target, "-p", strconv.Itoa(int(port)), "-t", strconv.Itoa(c.seconds()), "-J"}
	if c.Streams > 1 {
		args = append(args, "-P", strconv.Itoa(c.Streams))
	}
	if c.Protocol == "udp" {
		args = append(args, "-u")
		if c.Bitrate != "" {
			args = append(args, "-b", c.Bitrate)
		}
	}
	if c.Reverse {
		args = append(args, "-R")
	}
	if c.Congestion != "" && c.Protocol == "tcp" {
		args = append(args, "-C", c.Congestion)
	}
	if c.Omit > 0 {
		args = append(args, "-O", strconv.Itoa(c.Omit))
	}
	return args
}

// ServerArgs returns a one-off server's command line.
//
// Equivalent to: iperf3 -s -1 -p PORT
func ServerArgs(port uint16) []string {
	return []string{"iperf3", "-s", "-1", "-p", strconv.Itoa(int(port))}
}

type prober struct{ cfg Config }

// New returns the iperf3 probe for one test configuration.
func New(cfg Config) probe.Probe { return &prober{cfg: cfg} }

// Name returns "iperf3".
func (*prober) Name() string { return Name }

// WithAround returns the probe with Config.Around set (probe.Timed).
func (p *prober) WithAround(around func(client func() (probe.Window, bool)) error) probe.Probe {
	c := p.cfg
	c.Around = around
	return &prober{cfg: c}
}

// Server is a one-off iperf3 server a probe started (StartServer): in a host namespace or
// container, or in a VM guest through its agent.
type Server struct {
	node, log string
	pid       int
	port      uint16
	// guest is the VM node the server runs in (pid is then the guest's), nil on a host
	// namespace or container.
	guest probe.Guest
}

// StartServer starts a one-off server (ServerArgs) on port in node n, named name in errors,
// its log in log: a daemon of the host namespace or container, or in a VM guest one the
// guest's agent starts (probe.InGuest), whose PID is the guest's.
func StartServer(n probe.Node, name string, port uint16, log string) (Server, error) {
	pid, err := n.Daemon(ServerArgs(port), log)
	if err != nil {
		return Server{}, fmt.Errorf("start iperf3 server in node %s: %w", name, err)
	}
	g, _ := probe.InGuest(n)
	return Server{node: name, log: log, pid: pid, port: port, guest: g}, nil
}

// WaitServers waits until the servers listen on their ports: those on the host best effort
// (at most RetryFor; a client retries refused connections), those in guests as a check (at
// most GuestReadyFor each: one that exits or does not listen in time is an error with its
// log).
func WaitServers(ctx context.Context, servers []Server) error {
	waitListening(ctx, servers, RetryFor)
	return guestsListening(ctx, servers, GuestReadyFor)
}

// StopServers lets the servers finish (a one-off server exits after its test), then stops
// those still running: a host one by SIGTERM, then SIGKILL; a guest's through its agent.
func StopServers(servers []Server) error { return stopServers(servers) }

// Run starts a one-off server on every destination instance (log in env.LogDir, or in a
// temporary directory removed afterwards when it is ""), waits until they listen (at
// most RetryFor), runs the client in the chain's source against the chain's target and emits
// the samples of its report. The client is bounded by Config.Timeout; with several
// destination instances, the servers' sockets are watched and the run is stopped with
// ErrSplitFlows as soon as two servers hold connections. Servers still running at the end
// are killed.
func (p *prober) Run(ctx context.Context, env probe.Env, emit func(results.Sample)) (err error) {
	cfg := p.cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	c := env.Chain
	dests := probe.DestinationNodes(env.Plan, c)
	if len(dests) == 0 || len(c.Path) == 0 {
		return fmt.Errorf("run iperf3 on chain %s: destination %q has no nodes", c.Name, c.To)
	}
	port := probe.ServicePort(env.Plan, c)
	target := fmt.Sprintf("%s:%d", c.Target, probe.TargetPort(env.Plan, c))
	what := fmt.Sprintf("run iperf3 from %s to %s", c.Path[0], target)
	src, err := env.Node(c.Path[0])
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}

	logDir := env.LogDir
	if logDir == "" {
		if logDir, err = os.MkdirTemp("", "sfclab-iperf3-"); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		defer os.RemoveAll(logDir)
	}
	var servers []Server
	defer func() {
		if serr := stopServers(servers); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	for _, name := range dests {
		n, err := env.Node(name)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		log := filepath.Join(logDir, fmt.Sprintf("iperf3-server-%s-%d.log", name, port))
		s, err := StartServer(n, name, port, log)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		servers = append(servers, s)
	}
	if err := WaitServers(ctx, servers); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}

	timeout := cfg.Timeout()
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var split []string
	var watch sync.WaitGroup
	watchCtx, stopWatch := context.WithCancel(runCtx)
	if len(servers) > 1 {
		watch.Go(func() { split = watchSplit(watchCtx, servers, cancel) })
	}

	args := cfg.ClientArgs(c.Target.String(), probe.TargetPort(env.Plan, c))
	_, inGuest := probe.InGuest(src)
	retryUntil := time.Now().Add(RetryFor)
	var res Result
	var perr, rerr, aerr error
	client := func() (probe.Window, bool) {
		var started, exited time.Time
		for {
			var out []byte
			started = time.Now()
			out, rerr = src.Output(runCtx, nil, args...)
			exited = time.Now()
			res, perr = Parse(out)
			if inGuest {
				// The report's start time is the guest's clock, not the host's.
				res.Timesecs = 0
			}
			if perr == nil || runCtx.Err() != nil || time.Now().After(retryUntil) || !refused(perr, rerr) {
				break
			}
			select {
			case <-runCtx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
		if perr != nil {
			return probe.Window{}, false
		}
		return res.Transfer(started, exited)
	}
	if cfg.Around != nil {
		aerr = cfg.Around(client)
	} else {
		client()
	}
	stopWatch()
	watch.Wait()

	var ie *Error
	switch {
	case split != nil:
		return fmt.Errorf("%s: %w (servers %s each got connections): a load balancer in chain %s spreads flows over %d destination instances, "+
			"but an iperf3 test needs its control and data connections on one server; balance by source address or use one instance",
			what, ErrSplitFlows, strings.Join(split, ", "), c.Name, len(servers))
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", what, ctx.Err())
	case runCtx.Err() != nil:
		return fmt.Errorf("%s: no result within %s (chain %s does not carry the test): %w%s", what, timeout, c.Name, context.DeadlineExceeded, splitHint(len(servers)))
	case errors.As(perr, &ie):
		if len(servers) > 1 && controlLost(ie.Msg) {
			return fmt.Errorf("%s: %w: %w%s", what, ErrSplitFlows, perr, splitHint(len(servers)))
		}
		return fmt.Errorf("%s: %w", what, perr)
	case perr != nil && rerr != nil:
		return fmt.Errorf("%s: %w", what, rerr)
	case perr != nil:
		return fmt.Errorf("%s: %w", what, perr)
	}
	for _, s := range Samples(res, time.Now()) {
		emit(s)
	}
	if aerr != nil {
		return fmt.Errorf("%s: %w", what, aerr)
	}
	if err := moved(res); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func splitHint(servers int) string {
	if servers < 2 {
		return ""
	}
	return fmt.Sprintf(" (with %d destination instances behind a per-flow load balancer, iperf3's control and data connections may reach different servers)", servers)
}

// refused reports whether the client failed because nothing listened yet.
func refused(perr, rerr error) bool {
	for _, e := range []error{perr, rerr} {
		if e != nil && strings.Contains(e.Error(), "Connection refused") {
			return true
		}
	}
	return false
}

// controlLost reports whether iperf3's error is how it fails when its connections are split
// over servers.
func controlLost(msg string) bool {
	for _, s := range []string{"cookie", "control socket has closed", "unable to receive control message", "unable to receive parameters", "server has terminated"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// waitListening waits until every server on the host has a listening TCP socket on its
// port, or until max passed. It is best effort: the client retries refused connections
// anyway. Servers in guests are left to guestsListening.
func waitListening(ctx context.Context, servers []Server, max time.Duration) {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		ready := 0
		for _, s := range servers {
			if s.guest != nil {
				ready++
				continue
			}
			listen, _, err := sockets(s.pid, s.port)
			if err != nil || listen > 0 {
				ready++ // unreadable: do not wait for it
			}
		}
		if ready == len(servers) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// watchSplit polls the servers' sockets until ctx ends; when two or more servers hold
// established connections on their port it calls stop and returns their node names. With a
// server in a guest it polls every guestPoll (each look is a command in the guest, whose
// emulated CPU also forwards the test's traffic).
func watchSplit(ctx context.Context, servers []Server, stop func()) []string {
	every := 50 * time.Millisecond
	for _, s := range servers {
		if s.guest != nil {
			every = guestPoll
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		var busy []string
		for _, s := range servers {
			if _, est, err := s.sockets(ctx, s.port); err == nil && est > 0 {
				busy = append(busy, s.node)
			}
		}
		if len(busy) > 1 {
			stop()
			return busy
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// TCP socket states in /proc/net/tcp.
const (
	tcpEstablished = "01"
	tcpListen      = "0A"
)

// sockets counts the TCP sockets on local port port in the network namespace of process
// pid: listening and established ones.
//
// Equivalent to: nsenter -t PID -n ss -Htn state established '( sport = :PORT )'
func sockets(pid int, port uint16) (listen, established int, err error) {
	suffix := fmt.Sprintf(":%04X", port)
	found := false
	for _, file := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, file))
		if err != nil {
			continue
		}
		found = true
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 4 || !strings.HasSuffix(f[1], suffix) {
				continue
			}
			switch f[3] {
			case tcpListen:
				listen++
			case tcpEstablished:
				established++
			}
		}
	}
	if !found {
		return 0, 0, fmt.Errorf("read sockets of process %d: %w", pid, os.ErrNotExist)
	}
	return listen, established, nil
}

// sockets counts the server's listening and established TCP sockets on port: in its guest,
// through the agent, or in its host namespace (/proc). A guest is asked with ss first when it
// lists its sockets itself (vnf.SocketLister: a kubernetes pod on another machine, whose image
// has ss and no netstat) and with busybox netstat otherwise; when the first program is not in
// the guest (a VM guest lists its sockets too, and its busybox image has netstat, not ss),
// the other is tried.
func (s Server) sockets(ctx context.Context, port uint16) (listen, established int, err error) {
	if s.guest == nil {
		return sockets(s.pid, port)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	viaSS := func() (int, int, error) {
		out, err := s.guest.Output(ctx, nil, "ss", "-Htan", "sport = :"+strconv.Itoa(int(port)))
		if err != nil {
			return 0, 0, err
		}
		l, e := ssSockets(out)
		return l, e, nil
	}
	viaNetstat := func() (int, int, error) {
		out, err := s.guest.Output(ctx, nil, "netstat", "-tan")
		if err != nil {
			return 0, 0, err
		}
		l, e := netstatSockets(out, port)
		return l, e, nil
	}
	first, second := viaNetstat, viaSS
	if _, ok := s.guest.(vnf.SocketLister); ok {
		first, second = viaSS, viaNetstat
	}
	listen, established, err = first()
	if err != nil && ctx.Err() == nil {
		var err2 error
		if listen, established, err2 = second(); err2 == nil {
			return listen, established, nil
		}
		err = errors.Join(err, err2)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read sockets in node %s (ss, netstat): %w", s.node, err)
	}
	return listen, established, nil
}

// ssSockets counts the listening and established TCP sockets in the output of ss -Htan
// (State Recv-Q Send-Q Local-Address Peer-Address), filtered to one local port.
func ssSockets(out []byte) (listen, established int) {
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		switch f[0] {
		case "LISTEN":
			listen++
		case "ESTAB":
			established++
		}
	}
	return listen, established
}

// netstatSockets counts the TCP sockets on local port port in busybox netstat -tan's output
// (Proto Recv-Q Send-Q Local-Address Foreign-Address State): listening and established ones.
func netstatSockets(out []byte, port uint16) (listen, established int) {
	suffix := ":" + strconv.Itoa(int(port))
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasPrefix(f[0], "tcp") || !strings.HasSuffix(f[3], suffix) {
			continue
		}
		switch f[5] {
		case "LISTEN":
			listen++
		case "ESTABLISHED":
			established++
		}
	}
	return listen, established
}

// guestsListening waits until every server in a guest listens on its port, for at most max:
// a server that exits or does not listen in time is an error with its log's last lines (read
// in the guest). Servers on the host are waitListening's.
func guestsListening(ctx context.Context, servers []Server, max time.Duration) error {
	var errs []error
	for _, s := range servers {
		if s.guest == nil {
			continue
		}
		port := s.port
		deadline := time.Now().Add(max)
		for {
			listen, _, err := s.sockets(ctx, port)
			if err == nil && listen > 0 {
				break
			}
			if !s.guest.GroupRuns(s.pid, "iperf3") {
				errs = append(errs, fmt.Errorf("iperf3 server in VM node %s exited before it listened on port %d%s", s.node, port, s.logTail(ctx)))
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if time.Now().After(deadline) {
				why := "no listening socket"
				if err != nil {
					why = err.Error()
				}
				errs = append(errs, fmt.Errorf("iperf3 server in VM node %s does not listen on port %d after %s (%s)%s", s.node, port, max, why, s.logTail(ctx)))
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(guestPoll):
			}
		}
	}
	return errors.Join(errs...)
}

// logTail is ": LAST LINES" of a guest server's log, read in the guest ("" when empty or
// unreadable).
func (s Server) logTail(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	out, err := s.guest.Output(ctx, nil, "tail", "-n", "5", s.log)
	if t := strings.TrimSpace(string(out)); err == nil && t != "" {
		return ": " + t
	}
	return ""
}

// running reports whether the server still runs: in its guest, or as a host process.
func (s Server) running() bool {
	if s.guest != nil {
		return s.guest.GroupRuns(s.pid, "iperf3")
	}
	return alive(s.pid)
}

// alive reports whether pid is still a running iperf3 (not gone, not a zombie, not reused).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || end+2 >= len(s) {
		return false
	}
	return s[open+1:end] == "iperf3" && s[end+2] != 'Z'
}

// waitGone waits until the server is no longer a running iperf3 or d passed.
func (s Server) waitGone(d time.Duration) bool {
	every := 10 * time.Millisecond
	if s.guest != nil {
		every = guestPoll / 4
	}
	deadline := time.Now().Add(d)
	for s.running() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
	return true
}

// stopServers lets the one-off servers finish (they exit after their test), then terminates
// those still running: SIGTERM, then SIGKILL; a guest's server by its node (StopGroup in the
// guest: it leads a session of its own there).
func stopServers(servers []Server) error {
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, s := range servers {
		wg.Go(func() {
			if s.waitGone(StopTimeout / 4) {
				return
			}
			if s.guest != nil {
				if err := s.guest.StopGroup(s.pid, StopTimeout/2); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("stop iperf3 server %d in VM node %s: %w", s.pid, s.node, err))
					mu.Unlock()
				}
				return
			}
			_ = syscall.Kill(s.pid, syscall.SIGTERM)
			if s.waitGone(StopTimeout / 2) {
				return
			}
			_ = syscall.Kill(s.pid, syscall.SIGKILL)
			if !s.waitGone(StopTimeout / 4) {
				mu.Lock()
				errs = append(errs, fmt.Errorf("stop iperf3 server %d in node %s: still running after SIGKILL", s.pid, s.node))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
