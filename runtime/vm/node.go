package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/vm/accel"
)

// ErrInGuest is returned for what cannot cross into a guest: running a Go function in its
// network stack (Do).
var ErrInGuest = errors.New("not possible in a VM node (the guest has its own kernel)")

// Node is a VM node, reached through its agent.
type Node struct {
	Name, Lab string
	Netns     string        // its namespace on the host
	Cgroup    *cgroup.Group // QEMU's (the node's host-side cgroup); nil when gone
	sock      string
}

// Output runs a short command in the guest and returns its standard output; on failure the
// error names the command and ends with its trimmed stderr, as on a namespace.
func (n *Node) Output(ctx context.Context, stdin []byte, argv ...string) ([]byte, error) {
	what := fmt.Sprintf("run %s in VM node %s", strings.Join(argv, " "), n.Name)
	r, err := n.run(ctx, stdin, argv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if r.Code != 0 {
		msg := strings.TrimSpace(string(r.Stderr))
		if len(msg) > 4096 {
			msg = "..." + msg[len(msg)-4096:]
		}
		return r.Stdout, fmt.Errorf("%s: exit status %d: %s", what, r.Code, msg)
	}
	return r.Stdout, nil
}

func (n *Node) run(ctx context.Context, stdin []byte, argv []string) (*response, error) {
	if len(argv) == 0 {
		return nil, errors.New("empty command")
	}
	c, err := agentClient(n.sock)
	if err != nil {
		return nil, err
	}
	req := request{Op: "run", Argv: argv, Stdin: stdin}
	if d, ok := ctx.Deadline(); ok {
		req.Timeout = time.Until(d)
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

// OpenNS opens the VM node's namespace on the host: the veth ends spliced to the guest's
// NICs, which carry the same frames (inspect's counters).
func (n *Node) OpenNS() (*netdev.NS, error) { return netdev.OpenNS(n.Netns) }

// Do is refused: fn would run in the host's kernel, not the guest's.
func (n *Node) Do(func() error) error {
	return fmt.Errorf("enter the network stack of VM node %s: %w", n.Name, ErrInGuest)
}

// CPU is the CPU time of QEMU (every thread: vCPUs, I/O) so far.
func (n *Node) CPU() (cgroup.Usage, error) {
	if n.Cgroup == nil {
		return cgroup.Usage{}, fmt.Errorf("read cpu of VM node %s: no cgroup", n.Name)
	}
	return n.Cgroup.CPU()
}

// exitCode is a guest command's non-zero exit status (sfclab exec passes it on).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
func (e exitCode) ExitCode() int { return int(e) }

// Run runs cmd's program and arguments in the guest, its output copied to cmd's writers; a
// non-zero exit is an error with ExitCode. Standard input is passed when it is not a terminal.
func (n *Node) Run(cmd *exec.Cmd) error {
	var stdin []byte
	if cmd.Stdin != nil {
		if f, ok := cmd.Stdin.(*os.File); !ok || !isTerminal(f) {
			var err error
			if stdin, err = io.ReadAll(cmd.Stdin); err != nil {
				return err
			}
		}
	}
	r, err := n.run(context.Background(), stdin, cmd.Args)
	if err != nil {
		return fmt.Errorf("run %s in VM node %s: %w", strings.Join(cmd.Args, " "), n.Name, err)
	}
	if cmd.Stdout != nil {
		_, _ = cmd.Stdout.Write(r.Stdout)
	}
	if cmd.Stderr != nil {
		_, _ = cmd.Stderr.Write(r.Stderr)
	}
	if r.Code != 0 {
		return exitCode(r.Code)
	}
	return nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// BootRecord is how one guest's boot went, kept in its run directory for inspect.
type BootRecord struct {
	Accel accel.Decision `json:"accel"`
	// QEMUToAgent is from QEMU's start to the agent's first answer.
	QEMUToAgent time.Duration `json:"qemu_to_agent_ns"`
	// Guest is when the guest reached its steps (seconds of its uptime).
	Guest Boot `json:"guest"`
	// Configured is from QEMU's start to the guest's network configured.
	Configured time.Duration `json:"configured_ns"`
}

func (b BootRecord) write(path string) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// ReadBoot returns the boot record of a VM node of a deployed lab.
func ReadBoot(lab, node string) (*BootRecord, error) {
	data, err := os.ReadFile(runDir(lab, node) + "/" + bootFile)
	if err != nil {
		return nil, err
	}
	var b BootRecord
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// Phases describes a boot's phases: QEMU and the kernel's start until init, the virtio
// modules, the agent, the network configuration.
func (b BootRecord) Phases() string {
	total := b.QEMUToAgent.Seconds()
	kernel := total - (b.Guest.Agent - b.Guest.Init) // QEMU start to /init: host time minus guest time after init
	if b.Guest.Root > 0 {
		return fmt.Sprintf("%s: QEMU start to /init %.2fs (guest kernel %.2fs of it), root disk mounted and switched to %.2fs, modules %.2fs, agent up %.2fs, network configured at %.2fs",
			b.Accel.Accel, kernel, b.Guest.Init, b.Guest.Root-b.Guest.Init, b.Guest.Modules-b.Guest.Root, b.Guest.Agent-b.Guest.Modules, b.Configured.Seconds())
	}
	return fmt.Sprintf("%s: QEMU start to /init %.2fs (guest kernel %.2fs of it), modules %.2fs, agent up %.2fs, network configured at %.2fs",
		b.Accel.Accel, kernel, b.Guest.Init, b.Guest.Modules-b.Guest.Init, b.Guest.Agent-b.Guest.Modules, b.Configured.Seconds())
}

var _ runtime.Node = (*Node)(nil)

// guestProgram is where a guest has the sfclab program: its init, the agent's own binary.
const guestProgram = "/init"

// SfclabProgram is where the guest has the sfclab program (vnf.ProgramLocator): its init.
func (n *Node) SfclabProgram() (string, error) { return guestProgram, nil }
