package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/proc"
	"github.com/sfclab/sfclab/runtime"
)

// Node is one running container of a lab.
type Node struct {
	Name      string // node name
	Lab       string // lab name
	Container string // container name, sfc.LAB.NODE
	ID        string // container ID
	PID       int    // host PID of the container's init (docker-init)

	cli    *client.Client
	mounts []string // bind mounts at the same path inside and outside
	sfclab string   // SfclabPath when the sfclab program is mounted there

	cgOnce sync.Once
	cg     *cgroup.Group
	cgErr  error
}

var _ runtime.Node = (*Node)(nil)

// ExitError is a command in a container that exited with a non-zero status; Run returns it
// (`sfclab exec` passes ExitCode on), Output wraps it with the command's stderr.
type ExitError struct {
	Node string
	Argv []string
	Code int
}

// Error says which command exited with which status in which node.
func (e *ExitError) Error() string {
	return fmt.Sprintf("run %s in node %s: exit status %d", strings.Join(e.Argv, " "), e.Node, e.Code)
}

// ExitCode is the command's exit status (128+N when signal N ended it, as the shell says).
func (e *ExitError) ExitCode() int { return e.Code }

// maxStderr bounds how much of a failed command's stderr goes into errors.
const maxStderr = 4096

// DaemonCheck is how long Daemon watches a new process before it reports success.
const DaemonCheck = 100 * time.Millisecond

// StuckOutput is how long Output waits for its output stream to end once the command has
// exited (a background process it left may hold the stream open).
const StuckOutput = time.Second

// exec runs argv in the container attached to stdin (nil: none), stdout and stderr and returns
// its exit code. When ctx is done the process and its children are killed.
func (n *Node) exec(ctx context.Context, argv []string, env []string, dir string, stdin io.Reader, stdout, stderr io.Writer, signals <-chan os.Signal) (int, error) {
	ex, err := n.cli.ExecCreate(ctx, n.ID, client.ExecCreateOptions{Cmd: argv, Env: env, WorkingDir: dir,
		AttachStdout: true, AttachStderr: true, AttachStdin: stdin != nil})
	if err != nil {
		return -1, fmt.Errorf("create exec in container %s: %w", n.Container, err)
	}
	att, err := n.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return -1, fmt.Errorf("attach to exec in container %s: %w", n.Container, err)
	}
	defer att.Close()
	if stdin != nil {
		go func() {
			_, _ = io.Copy(att.Conn, stdin)
			_ = att.CloseWrite()
		}()
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, att.Reader)
		copied <- err
	}()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var exited time.Time
wait:
	for {
		select {
		case err := <-copied:
			if err != nil && !errors.Is(err, io.EOF) {
				return -1, fmt.Errorf("read output of exec in container %s: %w", n.Container, err)
			}
			break wait
		case <-ctx.Done():
			n.killExec(ex.ID, syscall.SIGKILL)
			att.Close()
			<-copied
			return -1, ctx.Err()
		case sig := <-signals:
			if s, ok := sig.(syscall.Signal); ok {
				n.killExec(ex.ID, s)
			}
		case <-tick.C:
			if exited.IsZero() {
				if st, err := n.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{}); err == nil && !st.Running && st.PID != 0 {
					exited = time.Now()
				}
			} else if time.Since(exited) > StuckOutput {
				att.Close()
				<-copied
				break wait
			}
		}
	}
	return n.exitCode(ctx, ex.ID)
}

// exitCode waits until the engine has recorded the exec's end and returns its code.
func (n *Node) exitCode(ctx context.Context, id string) (int, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := n.cli.ExecInspect(context.WithoutCancel(ctx), id, client.ExecInspectOptions{})
		if err != nil {
			return -1, fmt.Errorf("inspect exec in container %s: %w", n.Container, err)
		}
		if !st.Running {
			return st.ExitCode, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("inspect exec in container %s: output ended but the process %d still runs", n.Container, st.PID)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// killExec signals an exec'd process and, for SIGKILL, every process it started.
func (n *Node) killExec(id string, sig syscall.Signal) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := n.cli.ExecInspect(ctx, id, client.ExecInspectOptions{})
	if err != nil || st.PID <= 0 || !st.Running {
		return
	}
	if sig != syscall.SIGKILL {
		_ = syscall.Kill(st.PID, sig)
		return
	}
	for _, pid := range append(descendants(st.PID), st.PID) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// descendants lists the children of pid, their children, and so on, from /proc.
func descendants(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) >= 2 {
			pp, _ := strconv.Atoi(f[1])
			parent[p] = pp
		}
	}
	var out []int
	frontier := []int{pid}
	for len(frontier) > 0 {
		var next []int
		for p, pp := range parent {
			for _, f := range frontier {
				if pp == f {
					next = append(next, p)
				}
			}
		}
		out = append(out, next...)
		frontier = next
	}
	return out
}

// Output runs a short command in the container, feeding it stdin when stdin is not nil, and
// returns its stdout. A non-zero exit gives an error wrapping *ExitError and ending with the
// command's trimmed stderr, as in "run nft -f - in node fw: exit status 1: Error: ...".
// Equivalent to: echo STDIN | docker exec -i sfc.LAB.NODE ARGV...
func (n *Node) Output(ctx context.Context, stdin []byte, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("run in node %s: empty command", n.Name)
	}
	var in io.Reader
	if stdin != nil {
		in = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	code, err := n.exec(ctx, argv, nil, "", in, &stdout, &stderr, nil)
	if err != nil {
		return stdout.Bytes(), fmt.Errorf("run %s in node %s: %w", strings.Join(argv, " "), n.Name, err)
	}
	if code != 0 {
		ee := &ExitError{Node: n.Name, Argv: argv, Code: code}
		msg := strings.TrimSpace(stderr.String())
		if msg == "" && (code == 126 || code == 127) {
			// The engine reports a program it cannot start on stdout ("OCI runtime exec failed").
			msg = strings.TrimSpace(stdout.String())
		}
		if len(msg) > maxStderr {
			msg = "..." + msg[len(msg)-maxStderr:]
		}
		if msg != "" {
			return stdout.Bytes(), fmt.Errorf("%w: %s", ee, msg)
		}
		return stdout.Bytes(), ee
	}
	return stdout.Bytes(), nil
}

// Run runs cmd's program in the container with cmd's Stdin, Stdout and Stderr (no TTY, as
// `docker exec -i`), Env and Dir when set, and waits for it. SIGINT and SIGTERM sfclab
// receives meanwhile are passed on to the program. A non-zero exit gives an *ExitError.
// Equivalent to: docker exec -i sfc.LAB.NODE CMD...
func (n *Node) Run(cmd *exec.Cmd) error {
	argv := cmd.Args
	if len(argv) == 0 {
		argv = []string{cmd.Path}
	}
	if cmd.Err != nil {
		// Path lookup on the host failed; the program may still exist in the container.
		cmd.Err = nil
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	code, err := n.exec(context.Background(), argv, cmd.Env, cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr, sigs)
	if err != nil {
		return fmt.Errorf("run %s in node %s: %w", strings.Join(argv, " "), n.Name, err)
	}
	if code != 0 {
		return &ExitError{Node: n.Name, Argv: argv, Code: code}
	}
	return nil
}

// visible reports whether a host path is seen at the same path inside the container.
func (n *Node) visible(path string) bool {
	path = filepath.Clean(path)
	for _, m := range n.mounts {
		if path == m || strings.HasPrefix(path, strings.TrimSuffix(m, "/")+"/") {
			return true
		}
	}
	return false
}

// Daemon starts a long-running process in the container with stdin from /dev/null and stdout
// and stderr appended to logPath, and returns its host PID (signal it with kill(2) from the
// host). When logPath is in the bind-mounted node directory the process writes it itself and
// outlives sfclab; elsewhere sfclab copies the output there while it runs. If the process
// exits within DaemonCheck the error includes the end of its log; run daemons in the
// foreground (haproxy -db, nginx -g 'daemon off;').
// Equivalent to: docker exec -d sfc.LAB.NODE sh -c 'exec "$0" "$@" </dev/null >>LOG 2>&1' ARGV...
func (n *Node) Daemon(argv []string, logPath string) (int, error) {
	if len(argv) == 0 {
		return 0, fmt.Errorf("start daemon in node %s: empty command", n.Name)
	}
	what := fmt.Sprintf("start daemon %s in node %s", strings.Join(argv, " "), n.Name)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log, err := proc.OpenDaemonLog(logPath)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	inside := n.visible(logPath)
	opts := client.ExecCreateOptions{Cmd: argv}
	if inside {
		log.File.Close()
		opts.Cmd = append([]string{"/bin/sh", "-c", `exec "$0" "$@" </dev/null >>` + shQuote(logPath) + ` 2>&1`}, argv...)
	} else {
		opts.AttachStdout, opts.AttachStderr = true, true
	}
	ex, err := n.cli.ExecCreate(ctx, n.ID, opts)
	if err != nil {
		if !inside {
			log.File.Close()
		}
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if inside {
		if _, err := n.cli.ExecStart(ctx, ex.ID, client.ExecStartOptions{Detach: true}); err != nil {
			return 0, fmt.Errorf("%s: %w", what, err)
		}
	} else {
		att, err := n.cli.ExecAttach(context.Background(), ex.ID, client.ExecAttachOptions{})
		if err != nil {
			log.File.Close()
			return 0, fmt.Errorf("%s: %w", what, err)
		}
		go func() {
			_, _ = stdcopy.StdCopy(log.File, log.File, att.Reader)
			att.Close()
			log.File.Close()
		}()
	}
	var pid int
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := n.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			return 0, fmt.Errorf("%s: %w", what, err)
		}
		if st.PID != 0 {
			pid = st.PID
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s: no process after 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(DaemonCheck)
	st, err := n.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if !st.Running {
		return 0, log.ExitedAtOnce(what, fmt.Errorf("exit status %d", st.ExitCode))
	}
	return pid, nil
}

// SfclabProgram is where the container has the sfclab program (vnf.ProgramLocator): mounted
// at SfclabPath into nodes whose function runs it.
func (n *Node) SfclabProgram() (string, error) {
	if n.sfclab == "" {
		return "", fmt.Errorf("container %s has no sfclab program at %s: deploy mounts it only into nodes whose function runs it (l4lb impl sfclab); destroy and deploy the lab again", n.Container, SfclabPath)
	}
	return n.sfclab, nil
}

// shQuote quotes s for a POSIX shell.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// OpenNS opens the container's network namespace (/proc/PID/ns/net of its init); the caller
// closes it. `sfclab inspect` reads interfaces and counters through it.
// Equivalent to: nsenter --net=/proc/PID/ns/net
func (n *Node) OpenNS() (*netdev.NS, error) {
	return netdev.OpenNSPath(fmt.Sprintf("/proc/%d/ns/net", n.PID), n.Container)
}

// Do runs fn on an OS thread inside the container's network namespace (sockets opened there
// belong to the container; the file system stays the host's).
// Equivalent to: nsenter --net=/proc/PID/ns/net
func (n *Node) Do(fn func() error) error {
	ns, err := n.OpenNS()
	if err != nil {
		return err
	}
	defer ns.Close()
	return ns.Do(fn)
}
