package vm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/proc"
	"github.com/sfclab/sfclab/vnf"
)

// Daemons in a guest. A kind starts its daemon with Node.Daemon, exactly as on a namespace;
// the agent starts it in a session of its own in the guest and returns the guest's PID, which
// the kind keeps in its pid file and hands back to the node (vnf.Runs, vnf.GroupRuns,
// vnf.StopGroup) to learn whether the daemon runs and to stop it; its readiness dial goes
// through the agent too (vnf.CheckDial). The kinds write their configuration into the lab's
// node directory on the host and read their daemons' logs there: every guest mounts that
// directory at the same path (virtio-9p, the host's uids kept), so the paths in a
// configuration file mean the same file on both sides.

// shareParam is the kernel command-line parameter naming the directory the guest mounts
// from the host (virtio-9p tag shareTag) at the same path.
const (
	shareParam = "sfclab.share"
	shareTag   = "sfclabstate"
)

// nodeDir is the lab's node directory (journal.Journal.NodeDir) under the runtime's state
// root: the functions' configuration and logs, shared with every guest of the lab.
func (r Runtime) nodeDir(lab string) string {
	root := r.StateRoot
	if root == "" {
		root = journal.StateRoot()
	}
	return journal.Journal{Root: root}.NodeDir(lab)
}

// shareArgs is QEMU's virtio-9p device exporting the shared directory: security model
// passthrough, so a file a guest daemon creates as its user (Squid as proxy) has that owner
// on the host, as it would on a namespace.
//
// Equivalent to: -fsdev local,id=share,path=DIR,security_model=passthrough -device virtio-9p-device,fsdev=share,mount_tag=sfclabstate
func (m machine) shareArgs() []string {
	if m.Share == "" {
		return nil
	}
	return []string{"-fsdev", "local,id=share,path=" + m.Share + ",security_model=passthrough",
		"-device", "virtio-9p-device,fsdev=share,mount_tag=" + shareTag}
}

// shareModules are the modules a guest loads to mount the shared directory.
var shareModules = []string{"9pnet_virtio", "9p"}

// prepareGuest is init's part for daemons: /dev/shm (Squid's and others' shared memory) and
// the host's shared directory, mounted at the path the kernel command line names.
func prepareGuest(say func(string, ...any)) {
	_ = os.MkdirAll("/dev/shm", 0o1777)
	if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", 0, "mode=1777"); err != nil {
		say("mount /dev/shm: %v", err)
	}
	cmdline, _ := os.ReadFile("/proc/cmdline")
	share := shareFromCmdline(string(cmdline))
	if share == "" {
		return
	}
	if err := loadBootModules(shareModules...); err != nil {
		say("load 9p modules: %v", err)
		return
	}
	if err := os.MkdirAll(share, 0o755); err != nil {
		say("create %s: %v", share, err)
		return
	}
	if err := unix.Mount(shareTag, share, "9p", 0, "trans=virtio,version=9p2000.L,msize=262144,cache=none"); err != nil {
		say("mount the host's %s: %v", share, err)
	}
}

// shareFromCmdline returns the value of shareParam on a kernel command line ("" = none).
func shareFromCmdline(cmdline string) string {
	for _, f := range strings.Fields(cmdline) {
		if v, ok := strings.CutPrefix(f, shareParam+"="); ok {
			return v
		}
	}
	return ""
}

// handleProcess answers the agent's daemon and process requests; false for another op.
func handleProcess(ctx context.Context, req request, r *response) bool {
	switch req.Op {
	case "daemon":
		pid, err := startDaemon(req.Argv, req.Log)
		if err != nil {
			r.Err = err.Error()
		}
		r.PID = pid
	case "runs":
		if proc.Runs(req.PID, req.Mark) {
			r.PID = 1
		}
	case "group-runs":
		if proc.GroupRuns(req.PID, req.Mark) {
			r.PID = 1
		}
	case "stop-group":
		if err := proc.StopGroup(req.PID, req.Grace); err != nil {
			r.Err = err.Error()
		}
	case "dial":
		c, err := (&net.Dialer{Timeout: req.Timeout}).DialContext(ctx, "tcp", req.Addr)
		if err != nil {
			r.Err = err.Error()
		} else {
			c.Close()
		}
	default:
		return false
	}
	return true
}

// startDaemon starts argv in the guest in a session of its own (its PID is its process
// group's), output appended to logPath (created with its directory when the path is not on
// the shared directory), and reaps it when it exits.
func startDaemon(argv []string, logPath string) (int, error) {
	if len(argv) == 0 {
		return 0, errors.New("daemon: empty command")
	}
	if logPath == "" {
		logPath = "/dev/null"
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return 0, fmt.Errorf("daemon log: %w", err)
	}
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("daemon log: %w", err)
	}
	defer log.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	go func() { _ = cmd.Wait() }()
	return cmd.Process.Pid, nil
}

// agentTimeout bounds the process requests that do not carry a caller's deadline.
const agentTimeout = 30 * time.Second

func (n *Node) call(ctx context.Context, req request) (*response, error) {
	c, err := agentClient(n.sock)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, agentTimeout)
		defer cancel()
	}
	r, err := c.call(ctx, req)
	if err != nil {
		return nil, err
	}
	if r.Err != "" {
		return r, errors.New(r.Err)
	}
	return r, nil
}

// Daemon starts argv in the guest, in a session of its own, its output appended to logPath
// (the same file on the host when it is in the lab's node directory), and returns its PID in
// the guest: give it back to the node (Runs, GroupRuns, StopGroup), not to the host's kill.
func (n *Node) Daemon(argv []string, logPath string) (int, error) {
	r, err := n.call(context.Background(), request{Op: "daemon", Argv: argv, Log: logPath})
	if err != nil {
		return 0, fmt.Errorf("start daemon %s in VM node %s: %w", strings.Join(argv, " "), n.Name, err)
	}
	return r.PID, nil
}

// Runs reports whether guest process pid is alive (not a zombie); false when the guest does
// not answer.
func (n *Node) Runs(pid int) bool {
	r, err := n.call(context.Background(), request{Op: "runs", PID: pid})
	return err == nil && r.PID == 1
}

// GroupRuns is proc.GroupRuns in the guest; false when the guest does not answer.
func (n *Node) GroupRuns(pgid int, marker string) bool {
	r, err := n.call(context.Background(), request{Op: "group-runs", PID: pgid, Mark: marker})
	return err == nil && r.PID == 1
}

// StopGroup is proc.StopGroup in the guest. A guest that is gone has nothing left to stop.
func (n *Node) StopGroup(pgid int, grace time.Duration) error {
	_, err := n.call(context.Background(), request{Op: "stop-group", PID: pgid, Grace: grace})
	if err != nil {
		if _, serr := os.Stat(n.sock); errors.Is(serr, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("stop process group %d in VM node %s: %w", pgid, n.Name, err)
	}
	return nil
}

// CheckDial connects to addr over TCP from inside the guest and closes the connection.
func (n *Node) CheckDial(ctx context.Context, addr string, timeout time.Duration) error {
	_, err := n.call(ctx, request{Op: "dial", Addr: addr, Timeout: timeout})
	if err != nil {
		return fmt.Errorf("dial %s in VM node %s: %w", addr, n.Name, err)
	}
	return nil
}

var (
	_ vnf.Processes = (*Node)(nil)
	_ vnf.Dialer    = (*Node)(nil)
)
