// Package vnf defines what a service function kind implements and holds the helpers the
// kinds share (netfilter match rendering, shell commands). Each kind is its own package
// under vnf/; register.go lists them.
package vnf

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sfclab/sfclab/plan"
)

// ErrUnknownKind is returned for a function kind no package implements.
var ErrUnknownKind = errors.New("unknown function kind")

// Node is what a function needs from the node it runs in.
type Node interface {
	// Output runs a short command in the node and returns its standard output; the error
	// carries the command's standard error.
	Output(ctx context.Context, stdin []byte, argv ...string) ([]byte, error)
	// Daemon starts a long-running process in the node, its output appended to logPath.
	Daemon(argv []string, logPath string) (pid int, err error)
	// Do runs fn on an OS thread inside the node's network namespace.
	Do(fn func() error) error
}

// Env is where one function instance is set up.
type Env struct {
	Node Node
	// Plan is the node's plan (its interfaces, function details).
	Plan *plan.Node
	// StateDir is a directory the function may write configuration and logs to.
	StateDir string
}

// Path returns a file path in the state directory named after the node.
func (e Env) Path(suffix string) string {
	return filepath.Join(e.StateDir, e.Plan.Name+suffix)
}

// Function is one function kind.
type Function interface {
	// Requires lists the host programs the kind needs with these parameters.
	Requires(f *plan.Function) []string
	// Setup configures the function in its node. On error, Teardown undoes what was done.
	Setup(ctx context.Context, env Env) error
	// Teardown removes what Setup did; it works after a partial Setup and twice in a row.
	Teardown(ctx context.Context, env Env) error
}

// Shell runs a command line through /bin/sh, as lab files write them.
func Shell(cmd string) []string { return []string{"/bin/sh", "-c", cmd} }

// ShellDaemon is Shell for long-running commands: the shell replaces itself by the command so
// the process sfclab tracks is the command itself.
func ShellDaemon(cmd string) []string { return []string{"/bin/sh", "-c", "exec " + cmd} }

// FirstWord is the program a shell command line starts, for checking it is installed
// ("" when the line starts with shell syntax sfclab does not look into).
func FirstWord(cmd string) string {
	f := strings.Fields(cmd)
	if len(f) == 0 || strings.ContainsAny(f[0], "=$(){}|;&<>'\"`") {
		return ""
	}
	return f[0]
}

// IgnoreMissing turns the error of deleting something already gone into nil.
func IgnoreMissing(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, s := range []string{"No such file or directory", "does not exist", "No chain/target/match", "Bad rule", "not found"} {
		if strings.Contains(msg, s) {
			return nil
		}
	}
	return err
}

// Errorf formats an error about one function instance.
func Errorf(env Env, format string, args ...any) error {
	return fmt.Errorf("function %s (%s): %s", env.Plan.Name, env.Plan.Kind, fmt.Sprintf(format, args...))
}
