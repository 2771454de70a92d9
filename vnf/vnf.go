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
	// NewParams returns a fresh, empty value of the kind's parameter type (a pointer to a
	// struct tagged for YAML and JSON) for the lab decoder and stored plans to decode params:
	// into; it may implement spec.ParamsDefaulter and spec.ParamsChecker.
	NewParams() any
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

// DeleteNftTables deletes nftables tables ("FAMILY NAME") whether or not they exist: each is
// added (a no-op when it is there) and deleted in one transaction, so a table already gone is
// not an error and no error text is read.
// Equivalent to: nft -f - <<< 'add table inet T; delete table inet T'
func DeleteNftTables(ctx context.Context, node Node, tables ...string) error {
	var b strings.Builder
	for _, t := range tables {
		fmt.Fprintf(&b, "add table %s\ndelete table %s\n", t, t)
	}
	if _, err := node.Output(ctx, []byte(b.String()), "nft", "-f", "-"); err != nil {
		return fmt.Errorf("delete nft tables %s: %w", strings.Join(tables, ", "), err)
	}
	return nil
}

// IptablesState is what iptables-save shows of one table: its chains and its rules, each rule
// as iptables-save writes it ("-A CHAIN ...").
type IptablesState struct {
	Chains map[string]bool
	Rules  map[string]bool
}

// ReadIptables reads one iptables table of the node, so that teardown deletes only what is
// there instead of reading error messages.
// Equivalent to: iptables-save -t TABLE
func ReadIptables(ctx context.Context, node Node, table string) (IptablesState, error) {
	return readIptables(ctx, node, "iptables", table)
}

// readIptables reads a table with bin-save (bin: iptables or ip6tables).
func readIptables(ctx context.Context, node Node, bin, table string) (IptablesState, error) {
	out, err := node.Output(ctx, nil, bin+"-save", "-t", table)
	if err != nil {
		return IptablesState{}, fmt.Errorf("read %s table %s: %w", bin, table, err)
	}
	st := IptablesState{Chains: map[string]bool{}, Rules: map[string]bool{}}
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, ":"):
			st.Chains[strings.Fields(line[1:])[0]] = true
		case strings.HasPrefix(line, "-A "):
			st.Rules[strings.TrimSpace(line)] = true
		}
	}
	return st, nil
}

// RemoveIptablesChain unhooks a chain from the built-in chains that jump to it (the rules
// given as iptables-save writes them, e.g. "-A FORWARD -j SFCLAB-FW"), flushes and deletes it;
// what is not there is skipped.
// Equivalent to: iptables -t TABLE -D HOOK -j CHAIN; iptables -t TABLE -F CHAIN; iptables -t TABLE -X CHAIN
func RemoveIptablesChain(ctx context.Context, node Node, table, chain string, hooks ...string) error {
	return removeIptablesChain(ctx, node, "iptables", table, chain, hooks...)
}

// RemoveIp6tablesChain is RemoveIptablesChain for IPv6 (ip6tables).
// Equivalent to: ip6tables -t TABLE -D HOOK -j CHAIN; ip6tables -t TABLE -F CHAIN; ip6tables -t TABLE -X CHAIN
func RemoveIp6tablesChain(ctx context.Context, node Node, table, chain string, hooks ...string) error {
	return removeIptablesChain(ctx, node, "ip6tables", table, chain, hooks...)
}

func removeIptablesChain(ctx context.Context, node Node, bin, table, chain string, hooks ...string) error {
	st, err := readIptables(ctx, node, bin, table)
	if err != nil {
		return err
	}
	var steps [][]string
	for _, h := range hooks {
		if st.Rules[h] {
			steps = append(steps, append([]string{"-D"}, strings.Fields(strings.TrimPrefix(h, "-A "))...))
		}
	}
	if chain != "" && st.Chains[chain] {
		steps = append(steps, []string{"-F", chain}, []string{"-X", chain})
	}
	for _, args := range steps {
		if _, err := node.Output(ctx, nil, append([]string{bin, "-w", "-t", table}, args...)...); err != nil {
			return fmt.Errorf("remove %s chain %s: %w", bin, chain, err)
		}
	}
	return nil
}

// Errorf formats an error about one function instance.
// Like fmt.Errorf, it wraps an error argument given with %w, so callers can test the cause
// with errors.Is and errors.As.
func Errorf(env Env, format string, args ...any) error {
	return fmt.Errorf("function %s (%s): %w", env.Plan.Name, env.Plan.Kind, fmt.Errorf(format, args...))
}

// What only some kinds have is asked for with optional interfaces, found by type assertion, so
// that adding a kind touches its package, the register and its docs only.

// Counter is one packet/byte counter of a function's rules (a firewall rule, the established
// fast path, the policy), as `sfclab inspect` shows it.
type Counter struct {
	Rule    string `json:"rule"`
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// RuleCounters is a kind whose rules count the packets they match.
type RuleCounters interface {
	// Counters reads the rule counters of one instance back from its node.
	Counters(ctx context.Context, node Node, f *plan.Function) ([]Counter, error)
}

// ComposeStep is one step of an exported node's start script: a shell command line, and the
// text fed to it on standard input when Stdin is not empty (a here-document). Interface names
// in Stdin are written as placeholders (see Placeholder) that the script resolves at start.
type ComposeStep struct {
	Cmd   string
	Stdin string
}

// Composer is a kind that can set itself up in a plain container started from a compose file
// (`sfclab export --format compose`): the steps that configure it and the command the node's
// script ends in ("" = sleep forever, the function lives in the kernel). An instance that runs
// sfclab itself (SelfRunner) finds the program in its steps as "$SFCLAB" (ComposeProgramVar):
// the export mounts the host's sfclab executable into its container.
type Composer interface {
	Compose(f *plan.Function) (steps []ComposeStep, final string, err error)
}

// ComposeProgramVar is the shell variable holding the path of the sfclab program in an
// exported node whose function runs it (see SelfRunner).
const ComposeProgramVar = "SFCLAB"

// ComposeFile is a file an exported node reads that is not part of its script: the export
// writes Data beside the compose file (named after the lab, the node and Name) and mounts it
// read-only at Path inside the node's container.
type ComposeFile struct {
	Name string // the file's name beside the compose file, after "LAB.NODE."
	Path string // absolute path inside the container
	Data []byte
}

// ComposeFiler is a Composer whose exported instances read files of their own (the
// configuration of `sfclab lb`), written beside the compose file rather than inlined in the
// script.
type ComposeFiler interface {
	ComposeFiles(f *plan.Function) ([]ComposeFile, error)
}

// ImagePackager is a kind whose instances need Debian packages in a container image.
type ImagePackager interface {
	// ImagePackages are the Debian packages the kind runs inside a node.
	ImagePackages() []string
}

// SelfRunner is a kind whose instances may run the sfclab program itself in their node (`sfclab
// lb`); a container runtime makes the running sfclab executable available in such a node's
// container, read-only, and the node says where (see ProgramLocator).
type SelfRunner interface {
	// RunsSfclab reports whether an instance with these parameters runs sfclab in its node.
	RunsSfclab(f *plan.Function) bool
}

// ProgramLocator is a node whose file system is not the host's: it says where the sfclab
// program is inside it (an error when it was not made available there).
type ProgramLocator interface {
	SfclabProgram() (string, error)
}
