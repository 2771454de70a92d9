package vm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sfclab/sfclab/hosts"
	"github.com/sfclab/sfclab/netdev"
)

// agentEnv marks the agent process PID 1 starts (PID 1 itself only reaps orphans).
const agentEnv = "SFCLAB_VM_AGENT"

// portName is the virtio-serial port's name the agent listens on.
const portName = "sfclab"

// GuestMain runs the guest side when this binary is a guest's init (PID 1, started as
// /init) or the agent it started, and never returns then; otherwise it returns at once.
// sfclab's main calls it first, and so does every test binary that boots guests (the test
// binary is the agent of the images its tests build).
func GuestMain() {
	switch {
	case os.Getenv(agentEnv) != "":
		// What the agent starts must not take itself for the agent: `/init lb` (sfclab's
		// balancer, l4lb impl sfclab) is this binary too.
		os.Unsetenv(agentEnv)
		err := serveAgent()
		fmt.Fprintf(os.Stderr, "sfclab-guest: agent: %v\n", err)
		os.Exit(1)
	case os.Getpid() == 1 && os.Args[0] == "/init":
		initGuest()
	}
}

func uptime() float64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}

// initGuest is PID 1: it mounts the kernel file systems, loads the virtio modules, starts
// the agent and reaps every orphan; when the agent dies the guest powers off.
func initGuest() {
	t0 := uptime()
	say := func(format string, args ...any) {
		fmt.Fprintf(os.Stdout, "sfclab-guest: [%.3f] %s\n", uptime(), fmt.Sprintf(format, args...))
	}
	var mounted []string
	for _, m := range []struct{ src, dst, typ string }{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"},
		{"tmpfs", "/tmp", "tmpfs"}, {"tmpfs", "/run", "tmpfs"}, {"cgroup2", "/sys/fs/cgroup", "cgroup2"},
	} {
		_ = os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.typ, 0, ""); err != nil {
			say("mount %s: %v", m.dst, err)
		} else {
			mounted = append(mounted, m.dst)
		}
	}
	// A Debian image: the initramfs mounts the root disk and starts this again there.
	if os.Getenv(rootEnv) == "" {
		cmdline, _ := os.ReadFile("/proc/cmdline")
		if dev := rootFromCmdline(string(cmdline)); dev != "" {
			say("switching to the root on %s", dev)
			say("%v", switchRoot(dev, mounted, t0))
			poweroff()
		}
	}
	var rootAt float64 // when this PID 1 started in a switched root (0: no switch)
	if v := os.Getenv(rootEnv); v != "" {
		os.Unsetenv(rootEnv)
		rootAt = t0
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			t0 = f // the initramfs's /init
		}
	}
	_ = os.WriteFile("/etc/hostname", []byte("guest\n"), 0o644)
	os.Setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	if err := loadBootModules(guestModules...); err != nil {
		say("%v", err)
	}
	prepareGuest(say)
	t1 := uptime()
	say("init %.3f modules %.3f", t0, t1)
	agent := exec.Command("/init")
	agent.Env = append(os.Environ(), agentEnv+"=1", fmt.Sprintf("SFCLAB_VM_BOOT=%f,%f,%f", t0, t1, rootAt))
	agent.Stdout, agent.Stderr = os.Stdout, os.Stderr
	if err := agent.Start(); err != nil {
		say("start agent: %v", err)
		poweroff()
	}
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.ECHILD {
			time.Sleep(time.Second)
			continue
		}
		if pid == agent.Process.Pid {
			say("agent exited: %v", ws)
			poweroff()
		}
	}
}

func poweroff() {
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	os.Exit(1)
}

// findPort waits for the agent's virtio-serial port to appear and returns its device path.
func findPort(timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		ports, _ := filepath.Glob("/sys/class/virtio-ports/*/name")
		for _, p := range ports {
			if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == portName {
				dev := "/dev/" + filepath.Base(filepath.Dir(p))
				if _, err := os.Stat(dev); err == nil {
					return dev, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no virtio-serial port named %s", portName)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serveAgent answers requests on the port until the guest stops. When no host program is
// connected the port reads end of file at once; the agent then polls every 20 ms.
func serveAgent() error {
	var boot Boot
	if f := strings.Split(os.Getenv("SFCLAB_VM_BOOT"), ","); len(f) >= 2 {
		boot.Init, _ = strconv.ParseFloat(f[0], 64)
		boot.Modules, _ = strconv.ParseFloat(f[1], 64)
		if len(f) > 2 {
			boot.Root, _ = strconv.ParseFloat(f[2], 64)
		}
	}
	dev, err := findPort(10 * time.Second)
	if err != nil {
		return err
	}
	port, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if lo, err := netdev.OpenNS(""); err == nil {
		_ = lo.SetUp("lo")
		lo.Close()
	}
	a := &agentServer{boot: boot, w: port}
	for {
		a.serve(port)
		time.Sleep(20 * time.Millisecond)
	}
}

// agentServer answers the requests of one host connection after another on the agent's port.
// Each connection is a session: its requests run concurrently, each under a context that a
// "cancel" request naming it (its id) or the session's end (the host program gone: the port
// reads end of file) cancels, and answers of a session that ended are not written (they would
// reach the next host program, whose ids may be the same).
type agentServer struct {
	boot  Boot
	first sync.Once
	wmu   sync.Mutex // one answer at a time on w; guards live
	w     io.Writer
	live  *session // the session whose answers are written
}

// session is one host connection's requests in flight, with the cancel of each one's context.
type session struct {
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	ops    map[uint64]context.CancelFunc
}

// serve answers the requests read from r until it fails (end of file: the host program is
// gone), then cancels those still running.
func (a *agentServer) serve(r io.Reader) {
	s := &session{ops: map[uint64]context.CancelFunc{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	a.wmu.Lock()
	a.live = s
	a.wmu.Unlock()
	rd := bufio.NewReaderSize(r, 1<<16)
	for {
		line, err := rd.ReadBytes('\n')
		if err != nil {
			break
		}
		var req request
		if err := json.Unmarshal(line, &req); err != nil {
			// A line that is not a request: a half line a host program left when it died is
			// noise (no id); a request this agent cannot decode (another sfclab's, say) is
			// answered, so that its caller does not wait for nothing.
			if req.ID != 0 {
				a.reply(s, &response{ID: req.ID, Err: fmt.Sprintf("guest agent: decode request %q: %v", req.Op, err)})
			}
			continue
		}
		a.first.Do(func() { a.boot.Agent = uptime() })
		if req.Op == opCancel {
			s.stop(req.ID)
			continue
		}
		ctx := s.start(req.ID)
		boot := a.boot
		go func() {
			defer s.stop(req.ID)
			a.reply(s, handle(ctx, req, boot))
		}()
	}
	a.wmu.Lock()
	a.live = nil
	a.wmu.Unlock()
	s.cancel()
}

// start registers request id and returns the context it runs under.
func (s *session) start(id uint64) context.Context {
	ctx, cancel := context.WithCancel(s.ctx)
	s.mu.Lock()
	if prev, ok := s.ops[id]; ok {
		prev() // the host never reuses an id in flight; were it to, the first stops
	}
	s.ops[id] = cancel
	s.mu.Unlock()
	return ctx
}

// stop cancels request id's context (a "cancel" request, or the request answered).
func (s *session) stop(id uint64) {
	s.mu.Lock()
	cancel, ok := s.ops[id]
	delete(s.ops, id)
	s.mu.Unlock()
	if ok {
		cancel()
	}
}

// running is how many of the session's requests are in flight.
func (s *session) running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ops)
}

// reply writes an answer of session s, unless s has ended.
func (a *agentServer) reply(s *session, r *response) {
	data := encodeResponse(r)
	a.wmu.Lock()
	defer a.wmu.Unlock()
	if a.live != s {
		return
	}
	_, _ = a.w.Write(data)
}

// encodeResponse is r as one line of the protocol. An answer that does not encode (a NaN or
// an infinity among its figures, which JSON has no number for) is replaced by one that says
// so, with r's id: without it the host would read an empty line and its caller wait for the
// answer until its deadline.
func encodeResponse(r *response) []byte {
	data, err := json.Marshal(r)
	if err != nil {
		data, _ = json.Marshal(&response{ID: r.ID, Code: r.Code, Err: fmt.Sprintf("guest agent: encode the answer: %v", err)})
	}
	return append(data, '\n')
}

// handle answers one request; a request that runs a while (a command, a probe's run) ends
// early when ctx does (the host cancelled it or went away).
func handle(ctx context.Context, req request, boot Boot) *response {
	r := &response{ID: req.ID}
	switch req.Op {
	case "ping":
		b := boot
		r.Boot = &b
	case "run":
		runGuest(ctx, req, r)
	case "configure":
		if req.Config == nil {
			r.Err = "configure: no configuration"
		} else if err := configure(req.Config); err != nil {
			r.Err = err.Error()
		}
	default:
		if !handleProcess(ctx, req, r) && !handleEcho(ctx, req, r) && !handleCount(ctx, req, r) && !handleCheck(ctx, req, r) &&
			!handleHTTP(ctx, req, r) && !handleSend(ctx, req, r) && !handleRTT(ctx, req, r) && !handleInspect(ctx, req, r) {
			r.Err = fmt.Sprintf("unknown op %q", req.Op)
		}
	}
	return r
}

func runGuest(ctx context.Context, req request, r *response) {
	if len(req.Argv) == 0 {
		r.Err = "run: empty command"
		return
	}
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, req.Argv[0], req.Argv[1:]...)
	if req.Stdin != nil {
		cmd.Stdin = bytes.NewReader(req.Stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	r.Stdout, r.Stderr = stdout.Bytes(), stderr.Bytes()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.Code = 128 + int(ws.Signal())
		}
	case errors.Is(err, exec.ErrWaitDelay):
	case err != nil:
		r.Err = err.Error()
		r.Code = 127
	}
}

// configure gives the guest's NICs their plan names, MTUs and addresses, then writes the
// sysctls and adds the routes and rules, with the same netdev code deploy uses on a namespace.
func configure(c *GuestConfig) error {
	ns, err := netdev.OpenNS("")
	if err != nil {
		return err
	}
	defer ns.Close()
	ifs, err := net.Interfaces()
	if err != nil {
		return err
	}
	byMAC := map[string]string{}
	for _, i := range ifs {
		byMAC[i.HardwareAddr.String()] = i.Name
	}
	for _, gi := range c.Interfaces {
		cur, ok := byMAC[strings.ToLower(gi.MAC)]
		if !ok {
			return fmt.Errorf("configure %s: no NIC with MAC %s in the guest", gi.Name, gi.MAC)
		}
		if cur != gi.Name {
			if err := ns.RenameLink(cur, gi.Name); err != nil {
				return err
			}
		}
		if gi.MTU > 0 {
			if err := ns.SetMTU(gi.Name, gi.MTU); err != nil {
				return err
			}
		}
	}
	if err := ns.SetSysctls(c.Sysctls); err != nil {
		return err
	}
	for _, gi := range c.Interfaces {
		if err := ns.AddAddrsUp(gi.Name, gi.Addrs...); err != nil {
			return err
		}
	}
	if err := ns.AddRoutes(c.Routes); err != nil {
		return err
	}
	for _, r := range c.Rules {
		if err := ns.AddRule(r); err != nil {
			return err
		}
	}
	if len(c.Ways) > 0 {
		return hosts.ForwardIn(ns, c.Ways, true)
	}
	return nil
}
