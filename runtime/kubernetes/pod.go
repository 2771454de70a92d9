package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/proc"
	"github.com/sfclab/sfclab/runtime/netns"
)

// podProcess is a pod's container as the sfclab agent on its Kubernetes node reaches it: by a
// host process of the container (its init). Commands run in the container's mount, UTS, IPC
// and network namespaces and its cgroup (as a container runtime's exec does, but not in its
// PID namespace: the PID a daemon gets is the node's). Only the agent uses it: sfclab's own
// process reaches a pod through the agent (Node).
type podProcess struct {
	Name  string // node name, the pod's name
	Netns string // the pod's network namespace, named as a netns node's
	PID   int    // host PID of a process of the pod's container (its init)
	Root  string // where the node's file system is ("" = /, hostRoot in the agent's pod)
}

// inner runs commands on the host side: in the container's cgroup, before nsenter switches
// to its namespaces.
func (n *podProcess) inner() *netns.Node {
	g, err := cgroup.OfProcess(n.PID)
	if err != nil {
		g = nil // the process left: commands still run, unaccounted
	}
	return &netns.Node{Name: n.Name, Cgroup: g}
}

// enter prefixes argv with the nsenter call into the container's namespaces.
func (n *podProcess) enter(argv []string) ([]string, error) {
	if err := netdev.CheckGuard(fmt.Sprintf("/proc/%d/ns/", n.PID)); err != nil {
		return nil, err
	}
	return append([]string{"nsenter", "-t", strconv.Itoa(n.PID), "-m", "-u", "-i", "-n", "--"}, argv...), nil
}

// Output runs a short command in the pod's container and returns its stdout.
//
// Equivalent to: nsenter -t PID -m -u -i -n -- ARGV...
func (n *podProcess) Output(ctx context.Context, stdin []byte, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("run in node %s: empty command", n.Name)
	}
	full, err := n.enter(argv)
	if err != nil {
		return nil, err
	}
	return n.inner().Output(ctx, stdin, full...)
}

// Daemon starts a long-running process in the pod's container (see netns.Node.Daemon) and
// returns its host PID. Its output is appended to logPath on the node (the agent sees the
// node's file system at hostRoot): the lab's node directory, or a scratch directory of the
// caller, as for a netns node.
//
// Equivalent to: setsid nsenter -t PID -m -u -i -n -- ARGV... </dev/null >>LOG 2>&1 &
func (n *podProcess) Daemon(argv []string, logPath string) (int, error) {
	if len(argv) == 0 {
		return 0, fmt.Errorf("start daemon in node %s: empty command", n.Name)
	}
	full, err := n.enter(argv)
	if err != nil {
		return 0, err
	}
	return n.inner().Daemon(full, filepath.Join(n.Root, logPath))
}

// Do runs fn inside the pod's network namespace.
func (n *podProcess) Do(fn func() error) error {
	ns, err := netdev.OpenNS(n.Netns)
	if err != nil {
		return err
	}
	defer ns.Close()
	return ns.Do(fn)
}

// CPU is the CPU time of the pod's container (its cgroup, the processes started in it
// included).
func (n *podProcess) CPU() (cgroup.Usage, error) {
	g, err := cgroup.OfProcess(n.PID)
	if err != nil {
		return cgroup.Usage{}, fmt.Errorf("read cpu of node %s: %w", n.Name, err)
	}
	return g.CPU()
}

// hostRoot is where the agent's pod mounts the node's root file system: daemons in pods log
// to files on the node, as on a netns node.
const hostRoot = "/host"

// nodeRoot is where this process sees the node's file system: hostRoot in the agent's pod,
// else "/" (the agent run by hand, or the tests).
func nodeRoot() string {
	if st, err := os.Stat(filepath.Join(hostRoot, "proc")); err == nil && st.IsDir() {
		return hostRoot
	}
	return ""
}

// AgentNode asks the agent to do one thing in a pod of its node (AgentNodeRequest,
// AgentNodeAnswer): what runtime.Node and vnf.Processes/vnf.Dialer do.
const AgentNode = "node"

// Operations of AgentNode.
const (
	NodeOutput    = "output"    // run Argv with Stdin, answer Stdout (or Failed, ExitCode)
	NodeDaemon    = "daemon"    // start Argv, output appended to Log; answer PID
	NodeRuns      = "runs"      // is PID alive; answer Runs
	NodeGroupRuns = "groupruns" // does group PID have a live member with Marker; answer Runs
	NodeStopGroup = "stopgroup" // stop group PID (Grace)
	NodeDial      = "dial"      // connect to Addr over TCP from inside the pod (Grace: timeout); with Stdin, send it and answer Stdout: the reply until EOF, at most Max bytes
	NodeCPU       = "cpu"       // answer CPU
	NodeLinks     = "links"     // answer Links: the pod's interfaces with addresses and counters
	NodeIdent     = "ident"     // answer PID and NetnsID: the container's host PID and its namespace's identity
)

// AgentNodeRequest is one AgentNode request.
type AgentNodeRequest struct {
	Op        string        `json:"op"`
	Node      string        `json:"node"`      // lab node (pod name)
	Netns     string        `json:"netns"`     // its namespace's name (sfc.LAB.NODE)
	Container string        `json:"container"` // its container's ID
	Argv      []string      `json:"argv,omitempty"`
	Stdin     []byte        `json:"stdin,omitempty"`
	Log       string        `json:"log,omitempty"`
	PID       int           `json:"pid,omitempty"`
	Marker    string        `json:"marker,omitempty"`
	Grace     time.Duration `json:"grace,omitempty"`
	Addr      string        `json:"addr,omitempty"`
	Max       int           `json:"max,omitempty"`
}

// AgentNodeAnswer is the answer to an AgentNodeRequest.
type AgentNodeAnswer struct {
	Stdout []byte `json:"stdout,omitempty"`
	// Failed is the error of an output command that ran and failed (its stderr), ExitCode its
	// exit status (-1: it did not exit by itself).
	Failed   string            `json:"failed,omitempty"`
	ExitCode int               `json:"exit_code,omitempty"`
	PID      int               `json:"pid,omitempty"`
	Runs     bool              `json:"runs,omitempty"`
	CPU      cgroup.Usage      `json:"cpu"`
	Links    []netdev.LinkInfo `json:"links,omitempty"`
	// NetnsID identifies the pod's network namespace on its node (nsID of /proc/PID/ns/net).
	NetnsID string `json:"netns_id,omitempty"`
}

// agentNode does one AgentNode request on the agent's node.
func agentNode(ctx context.Context, req AgentNodeRequest) (*AgentNodeAnswer, error) {
	pids, err := containerPIDs(map[string]string{req.Node: req.Container})
	if err != nil {
		return nil, err
	}
	pp := &podProcess{Name: req.Node, Netns: req.Netns, PID: pids[req.Node], Root: nodeRoot()}
	ans := &AgentNodeAnswer{}
	switch req.Op {
	case NodeOutput:
		out, err := pp.Output(ctx, req.Stdin, req.Argv...)
		ans.Stdout = out
		if err != nil {
			var ee interface{ ExitCode() int }
			if !errors.As(err, &ee) {
				return nil, err
			}
			ans.Failed, ans.ExitCode = err.Error(), ee.ExitCode()
		}
	case NodeDaemon:
		ans.PID, err = pp.Daemon(req.Argv, req.Log)
	case NodeRuns:
		ans.Runs = syscall.Kill(req.PID, 0) == nil
	case NodeGroupRuns:
		ans.Runs = proc.GroupRuns(req.PID, req.Marker)
	case NodeStopGroup:
		err = proc.StopGroup(req.PID, req.Grace)
	case NodeDial:
		var c net.Conn
		if err = pp.Do(func() (err error) { c, err = net.DialTimeout("tcp", req.Addr, req.Grace); return err }); err == nil {
			if len(req.Stdin) > 0 {
				ans.Stdout, err = exchange(c, req.Stdin, req.Max, req.Grace)
			}
			c.Close()
		}
	case NodeCPU:
		ans.CPU, err = pp.CPU()
	case NodeLinks:
		var ns *netdev.NS
		if ns, err = netdev.OpenNS(req.Netns); err == nil {
			ans.Links, err = ns.Links()
			ns.Close()
		}
	case NodeIdent:
		ans.PID = pp.PID
		ans.NetnsID, err = nsID(fmt.Sprintf("/proc/%d/ns/net", pp.PID))
	default:
		err = fmt.Errorf("unknown operation %q", req.Op)
	}
	if err != nil {
		return nil, err
	}
	return ans, nil
}

// exchange sends send over c and reads the reply until the other end closes, at most max
// bytes (1 MiB when max is 0), within timeout.
func exchange(c net.Conn, send []byte, max int, timeout time.Duration) ([]byte, error) {
	if max <= 0 {
		max = 1 << 20
	}
	if timeout > 0 {
		_ = c.SetDeadline(time.Now().Add(timeout))
	}
	if _, err := c.Write(send); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(c, int64(max)))
	return b, err
}

// nsID identifies the namespace behind a /proc/PID/ns/* link within one kernel: its device
// and inode, as `stat -L -c %d:%i` prints them. Two machines' answers can coincide only by
// chance of numbering; Node.localNetns checks the PID's namespace as well.
func nsID(path string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", fmt.Errorf("identify namespace %s: %w", path, err)
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino), nil
}

// exitError is a command that ran in a pod and failed, as the agent reported it; ExitCode is
// what callers read (probe/ping tells a lost path from a broken ping by it).
type exitError struct {
	msg  string
	code int
}

func (e *exitError) Error() string { return e.msg }
func (e *exitError) ExitCode() int { return e.code }

// errNoEnter is Node.Do's refusal for a pod on another machine.
var errNoEnter = errors.New("the pod runs on another machine, whose network namespaces sfclab's process cannot enter: what needs Go code in the pod's namespace (the probes rtt, tcprtt, flows, ndr, http, firstpacket, load) works only when sfclab runs on the pod's Kubernetes node; ping, cpu and an iperf3 client there run through the sfclab agent (docs/kubernetes.md)")
