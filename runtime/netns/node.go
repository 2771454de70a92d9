// Package netns is the embedded runtime: a node is a named network
// namespace plus, optionally, a cgroup that accounts the CPU of every
// process started in it.
package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/proc"
)

// Node is one lab node of the netns runtime.
type Node struct {
	Name   string        // node name, used in messages
	Netns  string        // named network namespace; "" runs in the host namespace
	Cgroup *cgroup.Group // may be nil: processes stay in sfclab's cgroup
}

func (n *Node) label() string {
	if n.Name != "" {
		return n.Name
	}
	if n.Netns != "" {
		return n.Netns
	}
	return "(host)"
}

// cgroupWrapper moves the shell into the cgroup, then execs the program in
// place of the shell (same PID), so the program and anything it forks are
// accounted from the first instruction. "$0" is the program, "$@" its
// arguments.
const cgroupWrapper = `%s && exec "$0" "$@"`

// joinScript writes the shell's pid into every procs file of the group (its own, and its
// cpuset twin's on cgroup v1 when the node's host has cores).
func joinScript(g *cgroup.Group) string {
	var parts []string
	for _, f := range g.ProcsFiles() {
		parts = append(parts, "echo $$ > "+shQuote(f))
	}
	return strings.Join(parts, " && ")
}

// shQuote quotes s for a POSIX shell.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func cmdline(args []string) string { return strings.Join(args, " ") }

// Start starts cmd with the child inside the node's network namespace and,
// when the node has a cgroup, inside that cgroup before the program runs.
// The fork happens on an OS thread switched into the namespace, so no
// setns(2) wrapper is exec'd. The cgroup is joined through
//
//	/bin/sh -c 'echo $$ > PROCSFILE && exec "$0" "$@"' PATH ARGS...
//
// which means the program sees cmd.Path as argv[0]. Everything else the
// caller set (Stdin, Stdout, Stderr, Env, Dir, SysProcAttr, ...) is kept;
// cmd.Path and cmd.Args are restored once the process has started.
//
// Equivalent to: ip netns exec NETNS sh -c 'echo $$ > PROCSFILE && exec "$0" "$@"' CMD...
func (n *Node) Start(cmd *exec.Cmd) error {
	args := cmd.Args
	if len(args) == 0 {
		args = []string{cmd.Path}
	}
	what := fmt.Sprintf("start %s in node %s", cmdline(args), n.label())
	if cmd.Err != nil {
		return fmt.Errorf("%s: %w", what, cmd.Err)
	}
	if cmd.Process != nil {
		return fmt.Errorf("%s: already started", what)
	}
	if n.Cgroup != nil {
		path, orig := cmd.Path, cmd.Args
		cmd.Path = "/bin/sh"
		cmd.Args = append([]string{"/bin/sh", "-c",
			fmt.Sprintf(cgroupWrapper, joinScript(n.Cgroup)), path}, args[1:]...)
		defer func() { cmd.Path, cmd.Args = path, orig }()
	}
	var err error
	if n.Netns == "" {
		err = cmd.Start()
	} else {
		var ns *netdev.NS
		if ns, err = netdev.OpenNS(n.Netns); err == nil {
			err = ns.Do(cmd.Start)
			ns.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Run starts cmd like [Node.Start] and waits for it.
//
// Equivalent to: ip netns exec NETNS CMD...
func (n *Node) Run(cmd *exec.Cmd) error {
	if err := n.Start(cmd); err != nil {
		return err
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("run %s in node %s: %w", cmdline(cmd.Args), n.label(), err)
	}
	return nil
}

// maxStderr bounds how much of a failed command's stderr goes into errors.
const maxStderr = 4096

// Output runs a short command in the node (in its cgroup too, so anything
// it leaves running stays accounted and killable), feeding it stdin when
// stdin is not nil, and returns its stdout. On failure the error names the
// command and ends with its trimmed stderr, as in
// "run nft -f - in node fw: exit status 1: Error: ...". If the command
// leaves a background process holding stdout open, Output returns one
// second after the command itself exited.
//
// Equivalent to: echo STDIN | ip netns exec NETNS ARGV...
func (n *Node) Output(ctx context.Context, stdin []byte, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("run in node %s: empty command", n.label())
	}
	what := fmt.Sprintf("run %s in node %s", cmdline(argv), n.label())
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second
	if err := n.Start(cmd); err != nil {
		return nil, err
	}
	err := cmd.Wait()
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // exited successfully, a child still holds the pipes
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > maxStderr {
			msg = "..." + msg[len(msg)-maxStderr:]
		}
		if msg != "" {
			return stdout.Bytes(), fmt.Errorf("%s: %w: %s", what, err, msg)
		}
		return stdout.Bytes(), fmt.Errorf("%s: %w", what, err)
	}
	return stdout.Bytes(), nil
}

// DaemonCheck is how long Daemon watches a new process before it reports
// success.
const DaemonCheck = 50 * time.Millisecond

// Daemon starts a long-running process in the node (namespace and cgroup)
// in its own session, with stdin from /dev/null and stdout and stderr
// appended to logPath. sfclab reaps it in the background, so it leaves no
// zombie while sfclab runs, and it outlives sfclab. If it exits within
// [DaemonCheck] the error includes the end of what it wrote to the log; a
// program that forks itself into the background exits at once too, so run
// daemons in the foreground (nginx -g 'daemon off;', haproxy -db, ...).
//
// Equivalent to: ip netns exec NETNS setsid ARGV... </dev/null >>LOG 2>&1 &
func (n *Node) Daemon(argv []string, logPath string) (pid int, err error) {
	if len(argv) == 0 {
		return 0, fmt.Errorf("start daemon in node %s: empty command", n.label())
	}
	what := fmt.Sprintf("start daemon %s in node %s", cmdline(argv), n.label())
	log, err := proc.OpenDaemonLog(logPath)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = log.File // stdin nil = /dev/null
	cmd.Stderr = log.File
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = n.Start(cmd)
	log.File.Close()
	if err != nil {
		return 0, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case werr := <-exited:
		if werr == nil {
			werr = errors.New("exit status 0")
		}
		return 0, log.ExitedAtOnce(what, werr)
	case <-time.After(DaemonCheck):
		return cmd.Process.Pid, nil
	}
}
