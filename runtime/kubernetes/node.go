package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/vnf"
)

// Node is the pod of a lab node. Every command, daemon and reading is a request to the sfclab
// agent on the pod's Kubernetes node (AgentNode); only Do (the probes' Go code) enters the
// pod's namespace from sfclab's own process, and only when that runs on the pod's node. The
// agent runs it in the pod's container (its mount, UTS, IPC and network namespaces and its cgroup,
// not its PID namespace: a daemon's PID is the node's host PID, and the node keeps its
// processes: vnf.Processes). `sfclab exec` (Run) goes through the API server's exec into the
// pod.
type Node struct {
	Name       string // node name, the pod's name
	Lab        string
	Netns      string // the pod's network namespace, named as a netns node's on its node
	Container  string // the ID of the pod's container
	KubeNode   string // the Kubernetes node the pod runs on
	Agent      string // the agent pod there
	Kubeconfig string // for Run (kubectl exec)
	c          *client

	mu             sync.Mutex // guards local, localID
	local, localID string     // the pod's namespace on this machine (localNetns), once found
}

var (
	_ runtime.Node     = (*Node)(nil)
	_ vnf.Processes    = (*Node)(nil)
	_ vnf.Dialer       = (*Node)(nil)
	_ vnf.SocketLister = (*Node)(nil)
	_ vnf.Exchanger    = (*Node)(nil)
)

// ask sends one AgentNode request about the pod to its node's agent.
func (n *Node) ask(ctx context.Context, req AgentNodeRequest) (*AgentNodeAnswer, error) {
	req.Node, req.Netns, req.Container = n.Name, n.Netns, n.Container
	var ans AgentNodeAnswer
	if err := agentCall(ctx, n.c, n.KubeNode, n.Agent, AgentNode, req, &ans); err != nil {
		return nil, err
	}
	return &ans, nil
}

// Output runs a short command in the pod's container, on its node, and returns its stdout; a
// command that fails gives an error with its stderr and its exit status (ExitCode).
//
// Equivalent to: kubectl exec -i -n sfclab-system AGENT -- sfclab agent node, which runs
// nsenter -t PID -m -u -i -n -- ARGV... on the pod's node
func (n *Node) Output(ctx context.Context, stdin []byte, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("run in node %s: empty command", n.Name)
	}
	ans, err := n.ask(ctx, AgentNodeRequest{Op: NodeOutput, Argv: argv, Stdin: stdin})
	if err != nil {
		return nil, fmt.Errorf("run %s in node %s: %w", argv[0], n.Name, err)
	}
	if ans.Failed != "" {
		return ans.Stdout, &exitError{msg: ans.Failed, code: ans.ExitCode}
	}
	return ans.Stdout, nil
}

// Daemon starts a long-running process in the pod's container, on its node, its output
// appended to logPath on that node, and returns its host PID there.
func (n *Node) Daemon(argv []string, logPath string) (int, error) {
	if len(argv) == 0 {
		return 0, fmt.Errorf("start daemon in node %s: empty command", n.Name)
	}
	ans, err := n.ask(context.Background(), AgentNodeRequest{Op: NodeDaemon, Argv: argv, Log: logPath})
	if err != nil {
		return 0, fmt.Errorf("start daemon %s in node %s: %w", argv[0], n.Name, err)
	}
	return ans.PID, nil
}

// Do runs fn inside the pod's network namespace when sfclab runs on the pod's Kubernetes node
// (one kernel: see localNetns), as on a netns node; the probes that open sockets in a node
// need it. For a pod on another machine it refuses (errNoEnter). What deploy, the kinds and
// inspect do in a pod never needs it: it goes through the agent (Output, Daemon, CheckDial,
// Processes, Links), so a lab deploys and is inspected from any machine.
func (n *Node) Do(fn func() error) error {
	path, err := n.localNetns()
	if err != nil {
		return fmt.Errorf("enter node %s (pod on Kubernetes node %s): %w", n.Name, n.KubeNode, err)
	}
	ns, err := netdev.OpenNSPath(path, n.Netns)
	if err != nil {
		return fmt.Errorf("enter node %s: %w", n.Name, err)
	}
	defer ns.Close()
	return ns.Do(fn)
}

// localNetns finds the pod's network namespace on this machine. The agent on the pod's node
// names the host PID of the pod's container and its namespace's identity (device and inode);
// when /proc/PID/ns/net here is that same namespace, sfclab runs on the pod's node and the
// path is returned. The answer is kept while it still holds (one agent request per node, not
// per Do).
func (n *Node) localNetns() (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.local != "" {
		if err := netdev.CheckGuard(n.local); err != nil {
			return "", err
		}
		if id, err := nsID(n.local); err == nil && id == n.localID {
			return n.local, nil
		}
		n.local, n.localID = "", ""
	}
	ans, err := n.ask(context.Background(), AgentNodeRequest{Op: NodeIdent})
	if err != nil {
		return "", err
	}
	path := fmt.Sprintf("/proc/%d/ns/net", ans.PID)
	if err := netdev.CheckGuard(path); err != nil {
		return "", err
	}
	if id, err := nsID(path); err != nil || ans.PID <= 0 || id != ans.NetnsID {
		return "", errNoEnter
	}
	n.local, n.localID = path, ans.NetnsID
	return path, nil
}

// CPU is the CPU time of the pod's container (its cgroup on its node, the processes sfclab
// started in it included).
func (n *Node) CPU() (cgroup.Usage, error) {
	ans, err := n.ask(context.Background(), AgentNodeRequest{Op: NodeCPU})
	if err != nil {
		return cgroup.Usage{}, fmt.Errorf("read cpu of node %s: %w", n.Name, err)
	}
	return ans.CPU, nil
}

// Runs reports whether process pid (from Daemon) is alive on the pod's node.
func (n *Node) Runs(pid int) bool {
	ans, err := n.ask(context.Background(), AgentNodeRequest{Op: NodeRuns, PID: pid})
	return err == nil && ans.Runs
}

// GroupRuns reports whether process group pgid has a live member whose command line contains
// marker, on the pod's node (proc.GroupRuns there).
func (n *Node) GroupRuns(pgid int, marker string) bool {
	ans, err := n.ask(context.Background(), AgentNodeRequest{Op: NodeGroupRuns, PID: pgid, Marker: marker})
	return err == nil && ans.Runs
}

// StopGroup stops process group pgid on the pod's node (proc.StopGroup there).
func (n *Node) StopGroup(pgid int, grace time.Duration) error {
	_, err := n.ask(context.Background(), AgentNodeRequest{Op: NodeStopGroup, PID: pgid, Grace: grace})
	return err
}

// CheckDial connects to addr over TCP from inside the pod (on its node) and closes the
// connection.
func (n *Node) CheckDial(ctx context.Context, addr string, timeout time.Duration) error {
	_, err := n.ask(ctx, AgentNodeRequest{Op: NodeDial, Addr: addr, Grace: timeout})
	return err
}

// Exchange connects to addr over TCP from inside the pod (on its node), sends send and
// returns the reply until the other end closes, at most max bytes.
func (n *Node) Exchange(ctx context.Context, addr string, send []byte, max int, timeout time.Duration) ([]byte, error) {
	ans, err := n.ask(ctx, AgentNodeRequest{Op: NodeDial, Addr: addr, Grace: timeout, Stdin: send, Max: max})
	if err != nil {
		return nil, err
	}
	return ans.Stdout, nil
}

// ListeningTCP lists the pod's listening TCP sockets on port (ss in the pod, on its node).
func (n *Node) ListeningTCP(ctx context.Context, port string) ([]byte, error) {
	return n.Output(ctx, nil, "ss", "-Htln", "sport = :"+port)
}

// Links lists the pod's interfaces with addresses and counters, read on its node (for
// `sfclab inspect`).
func (n *Node) Links(ctx context.Context) ([]netdev.LinkInfo, error) {
	ans, err := n.ask(ctx, AgentNodeRequest{Op: NodeLinks})
	if err != nil {
		return nil, fmt.Errorf("read the interfaces of node %s: %w", n.Name, err)
	}
	return ans.Links, nil
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
