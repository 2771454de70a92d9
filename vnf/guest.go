package vnf

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/sfclab/sfclab/proc"
)

// Processes is a node whose processes are not the host's (a VM guest): the number Daemon
// returns is the guest's, so a kind asks the node whether its daemon still runs and has the
// node stop it, instead of looking among the host's processes.
type Processes interface {
	// Runs reports whether process pid is alive (not a zombie) in the node.
	Runs(pid int) bool
	// GroupRuns reports whether process group pgid has a live member whose command line
	// contains marker (proc.GroupRuns, in the node).
	GroupRuns(pgid int, marker string) bool
	// StopGroup stops process group pgid (proc.StopGroup, in the node).
	StopGroup(pgid int, grace time.Duration) error
}

// Dialer is a node whose network stack Go code cannot enter (Do fails: a VM guest has its
// own kernel) but which can check from inside itself that a TCP address accepts connections.
type Dialer interface {
	// CheckDial connects to addr (host:port, TCP) from inside the node and closes the
	// connection at once.
	CheckDial(ctx context.Context, addr string, timeout time.Duration) error
}

// Exchanger is a Dialer that also sends bytes over the connection it makes from inside the
// node and returns what the other end answers until it closes (at most max bytes): an HTTP
// request where the node has no HTTP client and Do fails (a kubernetes pod on another
// machine, asked through the agent on its node).
type Exchanger interface {
	Exchange(ctx context.Context, addr string, send []byte, max int, timeout time.Duration) ([]byte, error)
}

// SocketLister is a node that lists its listening TCP sockets itself, in ss's format, where
// Listens otherwise enters its namespace (Do) or asks a guest's netstat: a kubernetes pod,
// whose namespace sfclab reaches only through the agent on its node; a VM guest, whose agent
// reads the guest kernel's socket tables (no netstat needed in its image).
type SocketLister interface {
	// ListeningTCP lists the listening TCP sockets on port as `ss -Htln 'sport = :PORT'` does.
	ListeningTCP(ctx context.Context, port string) ([]byte, error)
}

// HTTPGetter is a node whose network stack Go code cannot enter but which can make an HTTP
// GET from inside itself, needing no HTTP client in its image (a VM guest: its agent makes
// it; a Debian guest root has no wget).
type HTTPGetter interface {
	// HTTPGet makes a GET of url from inside the node and reads the whole response: an error
	// unless it is 200 OK within timeout.
	HTTPGet(ctx context.Context, url string, timeout time.Duration) error
}

// Runs reports whether daemon pid (from node.Daemon) is alive: in the node when it keeps its
// own processes (Processes), else on the host.
func Runs(node Node, pid int) bool {
	if p, ok := node.(Processes); ok {
		return p.Runs(pid)
	}
	return syscall.Kill(pid, 0) == nil
}

// GroupRuns is proc.GroupRuns for a daemon's group (the pid node.Daemon returned), in the
// node when it keeps its own processes.
func GroupRuns(node Node, pgid int, marker string) bool {
	if p, ok := node.(Processes); ok {
		return p.GroupRuns(pgid, marker)
	}
	return proc.GroupRuns(pgid, marker)
}

// StopGroup is proc.StopGroup for a daemon's group, in the node when it keeps its own
// processes.
func StopGroup(node Node, pgid int, grace time.Duration) error {
	if p, ok := node.(Processes); ok {
		return p.StopGroup(pgid, grace)
	}
	return proc.StopGroup(pgid, grace)
}

// CheckDial connects to addr over TCP from inside the node and closes the connection: through
// the node's Dialer when it has one, else on a thread in its network namespace (Do).
//
// Equivalent to: ip netns exec NETNS nc -z HOST PORT
func CheckDial(ctx context.Context, node Node, addr string, timeout time.Duration) error {
	if d, ok := node.(Dialer); ok {
		return d.CheckDial(ctx, addr, timeout)
	}
	return node.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// Listens reports whether a TCP socket listens on addr (host:port, or the port on every
// address) in the node, without connecting to it: a readiness dial to a proxy makes it open
// a connection to its backend, which can reach a one-off server started later (HAProxy
// retries a refused backend connection for seconds). A SocketLister (a VM guest's agent, a
// pod's) lists them itself; another node that keeps its own processes is asked for netstat;
// elsewhere ss runs in the node's network namespace.
//
// Equivalent to: ip netns exec NETNS ss -Htln 'sport = :PORT' (in a guest: netstat -tln)
func Listens(ctx context.Context, node Node, addr string) (bool, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("check listening on %s: %w", addr, err)
	}
	var out []byte
	// The local address is the fourth column of both: netstat's Proto Recv-Q Send-Q Local
	// Foreign State, ss -H's State Recv-Q Send-Q Local Peer.
	const col = 3
	if sl, ok := node.(SocketLister); ok {
		out, err = sl.ListeningTCP(ctx, port)
	} else if _, ok := node.(Processes); ok {
		out, err = node.Output(ctx, nil, "netstat", "-tln")
	} else {
		err = node.Do(func() (err error) {
			out, err = exec.CommandContext(ctx, "ss", "-Htln", "sport = :"+port).Output()
			return err
		})
	}
	if err != nil {
		return false, fmt.Errorf("check listening on %s: %w", addr, err)
	}
	return listening(out, col, host, port), nil
}

// listening reports whether a line of ss's or netstat's listing has host:port, or port on
// every address, in its column col.
func listening(out []byte, col int, host, port string) bool {
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) <= col {
			continue
		}
		switch f[col] {
		case net.JoinHostPort(host, port), host + ":" + port, "0.0.0.0:" + port, "*:" + port, "[::]:" + port, ":::" + port:
			return true
		}
	}
	return false
}
