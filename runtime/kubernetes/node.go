package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/netns"
	"github.com/sfclab/sfclab/vnf"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// Node is the pod of a lab node, on this machine. Commands run in its container's mount, UTS,
// IPC and network namespaces and its cgroup (as a container runtime's exec does, but not in
// its PID namespace: the PID Daemon returns is the host's); `sfclab exec` (Run) goes through
// the API server.
type Node struct {
	Name       string // node name, the pod's name
	Lab        string
	Netns      string // the pod's network namespace, named as a netns node's
	PID        int    // host PID of a process of the pod's container (its init)
	Kubeconfig string // for Run (kubectl exec)
}

var _ runtime.Node = (*Node)(nil)

// inner runs commands on the host side: in the container's cgroup, before nsenter switches
// to its namespaces.
func (n *Node) inner() *netns.Node {
	g, err := cgroup.OfProcess(n.PID)
	if err != nil {
		g = nil // the process left: commands still run, unaccounted
	}
	return &netns.Node{Name: n.Name, Cgroup: g}
}

// enter prefixes argv with the nsenter call into the container's namespaces.
func (n *Node) enter(argv []string) []string {
	return append([]string{"nsenter", "-t", strconv.Itoa(n.PID), "-m", "-u", "-i", "-n", "--"}, argv...)
}

// Output runs a short command in the pod's container and returns its stdout.
//
// Equivalent to: nsenter -t PID -m -u -i -n -- ARGV...
func (n *Node) Output(ctx context.Context, stdin []byte, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("run in node %s: empty command", n.Name)
	}
	return n.inner().Output(ctx, stdin, n.enter(argv)...)
}

// Daemon starts a long-running process in the pod's container (see netns.Node.Daemon) and
// returns its host PID.
//
// Equivalent to: setsid nsenter -t PID -m -u -i -n -- ARGV... </dev/null >>LOG 2>&1 &
func (n *Node) Daemon(argv []string, logPath string) (int, error) {
	if len(argv) == 0 {
		return 0, fmt.Errorf("start daemon in node %s: empty command", n.Name)
	}
	return n.inner().Daemon(n.enter(argv), logPath)
}

// OpenNS opens the pod's network namespace (by its netns name); the caller closes it.
func (n *Node) OpenNS() (*netdev.NS, error) { return netdev.OpenNS(n.Netns) }

// Do runs fn inside the pod's network namespace.
func (n *Node) Do(fn func() error) error {
	ns, err := n.OpenNS()
	if err != nil {
		return err
	}
	defer ns.Close()
	return ns.Do(fn)
}

// CPU is the CPU time of the pod's container (its cgroup, the processes sfclab started in it
// included).
func (n *Node) CPU() (cgroup.Usage, error) {
	g, err := cgroup.OfProcess(n.PID)
	if err != nil {
		return cgroup.Usage{}, fmt.Errorf("read cpu of node %s: %w", n.Name, err)
	}
	return g.CPU()
}

// Run runs cmd's program in the pod through the API server's exec, with cmd's standard
// streams; the exit status is the program's.
//
// Equivalent to: kubectl --kubeconfig K exec -i -n sfclab-LAB NODE -c node -- CMD...
func (n *Node) Run(cmd *exec.Cmd) error {
	argv := cmd.Args
	if len(argv) == 0 {
		argv = []string{cmd.Path}
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		return fmt.Errorf("run %s in node %s: `sfclab exec` on a kubernetes lab goes through kubectl exec, and kubectl is not on PATH: %w", argv[0], n.Name, err)
	}
	args := []string{"kubectl", "--kubeconfig", n.Kubeconfig, "exec", "-i", "-n", Namespace(n.Lab), n.Name, "-c", ContainerName, "--"}
	k := &exec.Cmd{Path: kubectl, Args: append(args, argv...), Stdin: cmd.Stdin, Stdout: cmd.Stdout, Stderr: cmd.Stderr}
	if err := k.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return err // the program's exit status, for `sfclab exec` to pass on
		}
		return fmt.Errorf("run %s in node %s: %w", argv[0], n.Name, err)
	}
	return nil
}

// runsSfclab reports whether a node's function runs the sfclab program in its node (then
// its pod mounts the program at docker.SfclabPath).
func runsSfclab(n *plan.Node) bool {
	if n.Function == nil {
		return false
	}
	k, err := kinds.Get(n.Function.Kind)
	if err != nil {
		return false
	}
	sr, ok := k.(vnf.SelfRunner)
	return ok && sr.RunsSfclab(n.Function)
}
