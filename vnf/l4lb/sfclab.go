package l4lb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sfclab/sfclab/lb"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/proc"
	"github.com/sfclab/sfclab/vnf"
)

// ErrDown is returned when a balancer's process is gone.
var ErrDown = errors.New("load balancer down")

// ErrUnsupported is returned for an implementation the node's runtime cannot run.
var ErrUnsupported = errors.New("not supported here")

// Executable is the program started as `PROGRAM lb --config FILE`: sfclab itself.
var Executable = os.Executable

// LBConfig renders the configuration of `sfclab lb` for a function: the same parameters as
// the HAProxy configuration, in lb.Config's JSON; stats is its stats socket.
func LBConfig(f *plan.Function, stats string) lb.Config {
	p := params(f)
	check, client, connect, drain := p.Durations()
	rise, fall := p.RiseFall()
	c := lb.Config{Listen: netip.AddrPortFrom(f.IngressAddr, f.Port), Balance: p.Balance, MaxConn: p.MaxConn,
		CheckInterval: lb.Duration(check), Rise: rise, Fall: fall,
		TimeoutClient: lb.Duration(client), TimeoutConnect: lb.Duration(connect), Drain: lb.Duration(drain),
		Stats: stats, Loop: p.Loop, Accel: p.Accel, Threads: max(p.Threads, 1)} // one thread unless asked: measured faster (docs/sfclab-lb.md)
	for _, be := range f.Backends {
		c.Backends = append(c.Backends, lb.Backend{Name: be.Name, Addr: netip.AddrPortFrom(be.Addr, be.Port), Weight: be.Weight})
	}
	return c
}

// renderLBConfig checks and renders the configuration file of `sfclab lb` for a function.
func renderLBConfig(f *plan.Function, stats string) ([]byte, error) {
	cfg := LBConfig(f, stats)
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("check sfclab lb config: %w", err)
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render sfclab lb config: %w", err)
	}
	return append(data, '\n'), nil
}

func (e sfclabEnv) config() string  { return e.Path(".lb.json") }
func (e sfclabEnv) pidFile() string { return e.Path(".lb.pid") }
func (e sfclabEnv) log() string     { return e.Path(".lb.log") }
func (e sfclabEnv) stats() string {
	if e.guest() { // a unix socket on the 9p share would not reach the host anyway
		return "/run/sfclab-lb-" + e.Plan.Name + ".sock"
	}
	return e.Path(".lb.sock")
}

// guest reports whether the balancer runs in a VM guest (vnf.Processes): its stats socket is
// the guest's, so readiness is checked by its listening socket and process, and its counters
// are read in the guest (vnf.GuestBalancer).
func (e sfclabEnv) guest() bool { _, ok := e.Node.(vnf.Processes); return ok }

type sfclabEnv struct{ vnf.Env }

// setupSfclab writes the balancer's configuration, checks it, starts `sfclab lb` in the node
// and waits until it accepts connections.
func setupSfclab(ctx context.Context, env vnf.Env) error {
	e := sfclabEnv{env}
	f := env.Plan.Function
	cfg := LBConfig(f, e.stats())
	data, err := renderLBConfig(f, e.stats())
	if err != nil {
		return vnf.Errorf(env, "%v", err)
	}
	if err := vnf.WriteFile(env.Node, e.config(), data, 0o644); err != nil {
		return vnf.Errorf(env, "write sfclab lb config: %v", err)
	}
	exe, err := program(env.Node)
	if err != nil {
		return vnf.Errorf(env, "find the sfclab program: %w", err)
	}
	pid, err := env.Node.Daemon([]string{exe, "lb", "--config", e.config()}, e.log())
	if err != nil {
		return vnf.Errorf(env, "start sfclab lb: %v", err)
	}
	if err := vnf.WriteFile(env.Node, e.pidFile(), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return vnf.Errorf(env, "write sfclab lb pid file: %v", err)
	}
	wait := e.waitReady
	if e.guest() {
		wait = e.waitReadyGuest
	}
	if err := wait(ctx, pid); err != nil {
		return vnf.Errorf(env, "sfclab lb does not accept on %s: %v (log %s: %s)", cfg.Listen, err, e.log(), vnf.LogTail(env.Node, e.log(), 0))
	}
	return nil
}

// program is where the sfclab program is in a node: the running executable on the host's file
// system (netns), where the node says inside a container (docker mounts it there).
func program(n vnf.Node) (string, error) {
	if l, ok := n.(vnf.ProgramLocator); ok {
		p, err := l.SfclabProgram()
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrUnsupported, err)
		}
		return p, nil
	}
	return Executable()
}

// waitReady waits until the balancer started as pid answers on its stats socket (it binds the
// service address first), or its process ends (a port in use, say), or ReadyTimeout passes.
// Asking the process itself, not dialing the service address, cannot mistake another
// process on the same address for this one.
func (e sfclabEnv) waitReady(ctx context.Context, pid int) error {
	deadline := time.Now().Add(ReadyTimeout)
	// The balancer reports its pid as its own PID namespace numbers it: in a container, not
	// the host's.
	want := proc.NSPid(pid)
	for {
		st, err := lb.ReadStats(ctx, e.stats())
		if err == nil && st.Pid == want {
			return nil
		}
		// Until it has made itself a group leader (lb.Main, at its start) a balancer in a
		// container is only its own process.
		if !proc.GroupRuns(pid, e.config()) && !proc.Runs(pid, e.config()) {
			return fmt.Errorf("process %d exited", pid)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s", ReadyTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitReadyGuest is waitReady in a VM guest, whose stats socket the host cannot reach: it
// waits until the service address has a listening socket in the guest while the balancer's
// process group runs there.
func (e sfclabEnv) waitReadyGuest(ctx context.Context, pid int) error {
	listen := LBConfig(e.Plan.Function, e.stats()).Listen.String()
	deadline := time.Now().Add(ReadyTimeout)
	for {
		ok, err := vnf.Listens(ctx, e.Node, listen)
		if ok && vnf.GroupRuns(e.Node, pid, e.config()) {
			return nil
		}
		if !vnf.GroupRuns(e.Node, pid, e.config()) {
			return fmt.Errorf("process %d exited", pid)
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("nothing listens on %s", listen)
			}
			return fmt.Errorf("not ready after %s: %w", ReadyTimeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// pid reads the balancer's pid file; 0 without error when there is none.
func (e sfclabEnv) pid() (int, error) {
	data, err := vnf.ReadFile(e.Node, e.pidFile())
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read sfclab lb pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("read sfclab lb pid file %s: %w", e.pidFile(), err)
	}
	return pid, nil
}

// teardownSfclab drains the balancer: SIGTERM, then the drain time for open connections to
// end (the balancer closes what is left), SIGKILL after that.
func teardownSfclab(env vnf.Env) error {
	e := sfclabEnv{env}
	pid, err := e.pid()
	if err != nil || pid == 0 {
		return err
	}
	if vnf.GroupRuns(env.Node, pid, e.config()) {
		_, _, _, drain := params(env.Plan.Function).Durations()
		if err := vnf.StopGroup(env.Node, pid, drain+time.Second); err != nil {
			return vnf.Errorf(env, "stop sfclab lb: %v", err)
		}
	}
	for _, f := range []string{e.pidFile(), e.stats()} {
		if err := vnf.Remove(env.Node, f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return vnf.Errorf(env, "remove %s: %v", f, err)
		}
	}
	return nil
}

// checkSfclab returns ErrDown with the end of its log when the balancer's process is gone.
func checkSfclab(env vnf.Env) error {
	e := sfclabEnv{env}
	pid, err := e.pid()
	if err != nil {
		return err
	}
	if pid == 0 || !vnf.GroupRuns(env.Node, pid, e.config()) {
		return downf(env, "sfclab lb process %d is gone; log %s: %s", pid, e.log(), vnf.LogTail(env.Node, e.log(), 0))
	}
	return nil
}

// checkHAProxy returns ErrDown with the end of its log when HAProxy's process is gone.
func checkHAProxy(env vnf.Env) error {
	data, err := vnf.ReadFile(env.Node, env.Path(".haproxy.pid"))
	if err != nil {
		return downf(env, "no haproxy pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return vnf.Errorf(env, "haproxy pid file %s: %v", env.Path(".haproxy.pid"), err)
	}
	runs := alive(pid)
	if _, ok := env.Node.(vnf.Processes); ok { // a guest's pid: asked in the guest
		runs = vnf.Runs(env.Node, pid)
	}
	if !runs {
		return downf(env, "haproxy process %d is gone; log %s: %s", pid,
			env.Path(".haproxy.log"), vnf.LogTail(env.Node, env.Path(".haproxy.log"), 0))
	}
	return nil
}

// Check reports whether the balancer still runs: ErrDown, with the end of its log, when its
// process is gone (haproxy, sfclab); the nft implementation has no process.
func (LB) Check(ctx context.Context, env vnf.Env) error {
	switch params(env.Plan.Function).Impl {
	case ImplSfclab:
		return checkSfclab(env)
	case ImplHAProxy:
		return checkHAProxy(env)
	}
	return nil
}

// BalancerStats reads the per-backend counters of an sfclab balancer from its stats socket;
// nil for the other implementations.
func (LB) BalancerStats(ctx context.Context, env vnf.Env) (*lb.Stats, error) {
	if params(env.Plan.Function).Impl != ImplSfclab {
		return nil, nil
	}
	if err := checkSfclab(env); err != nil {
		return nil, err
	}
	e := sfclabEnv{env}
	if e.guest() { // its socket is the guest's: the guest's agent reads it
		g, ok := env.Node.(vnf.GuestBalancer)
		if !ok {
			return nil, fmt.Errorf("read sfclab lb counters in node %s: %w: its stats socket is in a guest that cannot read it", env.Plan.Name, ErrUnsupported)
		}
		return g.BalancerStats(ctx, e.stats())
	}
	return lb.ReadStats(ctx, e.stats())
}

// downf is ErrDown about one function instance.
func downf(env vnf.Env, format string, args ...any) error {
	return fmt.Errorf("function %s (%s): %w: %s", env.Plan.Name, env.Plan.Kind, ErrDown, fmt.Sprintf(format, args...))
}

// alive reports whether process pid exists and is not a zombie (HAProxy's pid is a group
// leader on netns but not in a container, so the process itself is asked).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}
