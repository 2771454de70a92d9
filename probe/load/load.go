// Package load puts background load on a lab node while a probe measures: busy processes
// (study B's 12 fork processes on the proxy's server, study D's CPU-bound background
// containers) or TCP streams (study D's network load). Every process runs in the node's
// namespace and cgroup, so its CPU is accounted to the node; every process has a hard time
// limit, so a crashed sfclab leaves no load running for long; Stop kills them all.
package load

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe"
	procgroup "github.com/sfclab/sfclab/proc"
)

// Load kinds.
const (
	KindCPU     = "cpu"
	KindNetwork = "network"
)

// Defaults.
const (
	DefaultLimit = 10 * time.Minute
	DefaultPort  = 5299
	// MaxStreams is iperf3's limit on parallel streams (-P).
	MaxStreams = 128
	// ReadyTimeout bounds the wait for the iperf3 server to listen and the streams to connect.
	ReadyTimeout = 5 * time.Second
)

// Config is one background load.
type Config struct {
	// Kind is "cpu" (Count busy processes) or "network" (Count TCP streams).
	Kind string
	// Count is the number of processes or streams; 0 means no load.
	Count int
	// Node is the name of the loaded node: where the busy processes run, or where the streams
	// leave from.
	Node string
	// Bitrate caps each stream (iperf3 -b syntax: "100M"); "" means unlimited.
	Bitrate string
	// UDP makes network load UDP streams (iperf3 -u; then Bitrate should be set: iperf3's UDP
	// default is 1 Mbit/s).
	UDP bool
	// Port is the iperf3 server's port for network load; 0 means 5299 (not a measured port).
	Port uint16
	// Limit is every process's hard time limit; 0 means ten minutes.
	Limit time.Duration
	// Host runs cpu load on the host beside the node (sfclab's own cgroups, no namespace)
	// instead of inside it: study B's "12 fork processes on the proxy's server", placed the
	// same on every runtime. Inside a container the processes would share the container's
	// cgroup with the function it runs; on this project's netns runtime they would not.
	Host bool
}

// Load is background load that is running.
type Load struct {
	cfg   Config
	procs []proc
	once  sync.Once
	err   error
	mu    sync.Mutex
	stop  func() bool // unregisters the stop at ctx's end
}

type proc struct {
	node string
	pid  int // also the process group: Daemon starts every process in its own session
}

// Start starts the load and returns when it runs: for "cpu", once the processes are started;
// for "network", once the streams are connected. When ctx ends, the load is stopped.
//
// Equivalent to (cpu):
//
//	ip netns exec NODE timeout -s KILL LIMIT stress-ng --cpu COUNT --timeout LIMIT &
//
// or, without stress-ng, COUNT shell loops (while :; do :; done). Equivalent to (network):
//
//	ip netns exec PEER timeout -s KILL LIMIT iperf3 -s -p 5299 &
//	ip netns exec NODE timeout -s KILL LIMIT iperf3 -c PEER_ADDR -p 5299 -P COUNT -t LIMIT [-b RATE] &
//
// where PEER is the chain's destination (or its source, when NODE is the destination).
func Start(ctx context.Context, env probe.Env, cfg Config) (*Load, error) {
	if cfg.Limit <= 0 {
		cfg.Limit = DefaultLimit
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	l := &Load{cfg: cfg}
	what := fmt.Sprintf("start %s load of %d on node %s", cfg.Kind, cfg.Count, cfg.Node)
	if cfg.Count < 0 {
		return nil, fmt.Errorf("%s: count must not be negative", what)
	}
	var err error
	switch cfg.Kind {
	case KindCPU:
		if cfg.Count > 0 {
			err = l.startCPU(env)
		}
	case KindNetwork:
		if cfg.Count > MaxStreams {
			return nil, fmt.Errorf("%s: iperf3 runs at most %d streams", what, MaxStreams)
		}
		if cfg.Count > 0 {
			err = l.startNetwork(ctx, env)
		}
	default:
		return nil, fmt.Errorf("%s: kind %q is not one of cpu, network", what, cfg.Kind)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("%s: %w", what, err), l.Stop())
	}
	l.mu.Lock()
	l.stop = context.AfterFunc(ctx, func() { _ = l.Stop() })
	l.mu.Unlock()
	return l, nil
}

// limitArgs wraps argv in coreutils timeout with a hard kill after d (plus a margin, so that
// programs with their own limit end by themselves first).
func limitArgs(d time.Duration, argv ...string) []string {
	secs := int((d + time.Second - 1) / time.Second)
	return append([]string{"timeout", "-s", "KILL", strconv.Itoa(secs + 5)}, argv...)
}

func (l *Load) logPath(env probe.Env, name string) string {
	dir := env.LogDir
	if dir == "" {
		dir = os.TempDir()
	}
	return filepath.Join(dir, fmt.Sprintf("load-%s-%s.log", l.cfg.Node, name))
}

func (l *Load) startCPU(env probe.Env) error {
	node, err := env.Node(l.cfg.Node)
	if err != nil {
		return err
	}
	secs := strconv.Itoa(int((l.cfg.Limit + time.Second - 1) / time.Second))
	var argv []string
	if _, err := exec.LookPath("stress-ng"); err == nil {
		argv = []string{"stress-ng", "--cpu", strconv.Itoa(l.cfg.Count), "--timeout", secs + "s", "--quiet"}
	} else {
		argv = []string{"/bin/sh", "-c", `i=0; while [ $i -lt "$0" ]; do (while :; do :; done) & i=$((i+1)); done; wait`, strconv.Itoa(l.cfg.Count)}
	}
	if l.cfg.Host {
		return l.startHost(limitArgs(l.cfg.Limit, argv...), l.logPath(env, "cpu"))
	}
	pid, err := node.Daemon(limitArgs(l.cfg.Limit, argv...), l.logPath(env, "cpu"))
	if err != nil {
		return err
	}
	l.procs = append(l.procs, proc{node: l.cfg.Node, pid: pid})
	return nil
}

// startHost starts argv on the host in its own session (its pid is its process group), output
// to log, and reaps it when it ends.
func (l *Load) startHost(argv []string, log string) error {
	f, err := os.Create(log)
	if err != nil {
		return fmt.Errorf("start load on the host: %w", err)
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start load on the host: %w", err)
	}
	go cmd.Wait() // reap; Stop kills the whole group
	l.procs = append(l.procs, proc{node: "host beside " + l.cfg.Node, pid: cmd.Process.Pid})
	return nil
}

// peer finds the other end of network load: the chain's destination, or its source when the
// loaded node is the destination, and its address on the chain.
func (l *Load) peer(env probe.Env) (string, netip.Addr, error) {
	p, c := env.Plan, env.Chain
	loaded := p.Node(l.cfg.Node)
	if loaded == nil {
		return "", netip.Addr{}, fmt.Errorf("find node %q: no such node in lab %s", l.cfg.Node, p.Lab)
	}
	var dest *plan.Node
	for _, n := range p.Nodes {
		if n.Group == c.To && n.Role != plan.RoleFunction && (dest == nil || n.Instance < dest.Instance) {
			dest = n
		}
	}
	if dest == nil || len(c.Segments) == 0 || len(c.Path) == 0 {
		return "", netip.Addr{}, fmt.Errorf("chain %s has no destination", c.Name)
	}
	peer, seg := dest, c.Segments[len(c.Segments)-1]
	if loaded.Group == c.To {
		peer, seg = p.Node(c.Path[0]), c.Segments[0]
	}
	if peer == nil {
		return "", netip.Addr{}, fmt.Errorf("chain %s has no source node", c.Name)
	}
	for _, i := range peer.Interfaces {
		if i.Segment == seg {
			return peer.Name, i.Address.Addr(), nil
		}
	}
	return "", netip.Addr{}, fmt.Errorf("node %s has no address on segment %s", peer.Name, seg)
}

func (l *Load) startNetwork(ctx context.Context, env probe.Env) error {
	peerName, addr, err := l.peer(env)
	if err != nil {
		return err
	}
	peer, err := env.Node(peerName)
	if err != nil {
		return err
	}
	node, err := env.Node(l.cfg.Node)
	if err != nil {
		return err
	}
	port := strconv.Itoa(int(l.cfg.Port))
	pid, err := peer.Daemon(limitArgs(l.cfg.Limit, "iperf3", "-s", "-p", port), l.logPath(env, "iperf3-server"))
	if err != nil {
		return err
	}
	l.procs = append(l.procs, proc{node: peerName, pid: pid})
	if err := waitFor(ctx, func() (bool, error) {
		if syscall.Kill(pid, 0) != nil {
			return false, errors.New("iperf3 server exited")
		}
		out, _ := peer.Output(ctx, nil, "ss", "-Hltn", "sport = :"+port)
		return lines(out) > 0, nil
	}); err != nil {
		return fmt.Errorf("iperf3 server on %s port %s: %w", peerName, port, err)
	}
	secs := strconv.Itoa(int((l.cfg.Limit + time.Second - 1) / time.Second))
	argv := []string{"iperf3", "-c", addr.String(), "-p", port, "-P", strconv.Itoa(l.cfg.Count), "-t", secs, "--connect-timeout", "3000"}
	if l.cfg.UDP {
		argv = append(argv, "-u")
	}
	if l.cfg.Bitrate != "" {
		argv = append(argv, "-b", l.cfg.Bitrate)
	}
	log := l.logPath(env, "iperf3-client")
	pid, err = node.Daemon(limitArgs(l.cfg.Limit, argv...), log)
	if err != nil {
		return err
	}
	l.procs = append(l.procs, proc{node: l.cfg.Node, pid: pid})
	// The streams and the control connection are up when the client has Count+1 connections
	// established to the server's port.
	if err := waitFor(ctx, func() (bool, error) {
		if syscall.Kill(pid, 0) != nil {
			b, _ := os.ReadFile(log)
			return false, fmt.Errorf("iperf3 client exited: %s", strings.TrimSpace(string(b)))
		}
		out, _ := node.Output(ctx, nil, "ss", "-Htn", "state", "established", "dport = :"+port)
		if l.cfg.UDP { // only the control connection is TCP
			return lines(out) >= 1, nil
		}
		return lines(out) >= l.cfg.Count+1, nil
	}); err != nil {
		return fmt.Errorf("iperf3 streams from %s to %s:%s: %w", l.cfg.Node, addr, port, err)
	}
	return nil
}

func lines(out []byte) int {
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n
}

// waitFor polls ready every 20 ms until it reports done, fails, or ReadyTimeout passes.
func waitFor(ctx context.Context, ready func() (done bool, fatal error)) error {
	deadline := time.Now().Add(ReadyTimeout)
	for {
		done, err := ready()
		if done {
			return nil
		}
		if err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s", ReadyTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// PIDs returns the process groups of the load (one per started program).
func (l *Load) PIDs() []int {
	out := make([]int, len(l.procs))
	for i, p := range l.procs {
		out[i] = p.pid
	}
	return out
}

// Stop kills every process of the load (SIGTERM to each process group, SIGKILL after one
// second) and waits until they are gone. It is safe to call more than once.
//
// Equivalent to: kill -TERM -PGID; sleep 1; kill -KILL -PGID
func (l *Load) Stop() error {
	if l == nil {
		return nil
	}
	l.once.Do(func() {
		l.mu.Lock()
		if l.stop != nil {
			l.stop()
		}
		l.mu.Unlock()
		var errs []error
		for i := len(l.procs) - 1; i >= 0; i-- {
			if err := procgroup.StopGroup(l.procs[i].pid, time.Second); err != nil {
				errs = append(errs, fmt.Errorf("stop load on node %s: %w", l.procs[i].node, err))
			}
		}
		l.err = errors.Join(errs...)
	})
	return l.err
}
