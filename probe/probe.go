// Package probe defines what a measurement probe is and what it sees of a deployed lab: one
// chain, its plan and a way to reach its nodes. The probes themselves live in one package each
// below this one (iperf3, ping, tcprtt, rtt, http, ndr, flows, cpu, firstpacket; load holds
// the background load); every probe is bounded in time and reports a dead chain as an error or
// as data (100 % loss), never by hanging. An experiment compiles a trial into steps, each a
// probe and its CPU window (experiment.Experiment.Steps).
package probe

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/results"
)

// DefaultPort is the port servers listen on when neither a load balancer nor the chain's
// classifier names one (iperf3's default port).
const DefaultPort = 5201

// Node is what probes need from a lab node; runtime.Node (what deploy.Deployer.Node
// returns) satisfies it.
type Node interface {
	// Output runs a short command in the node and returns its stdout (see netns.Node.Output).
	Output(ctx context.Context, stdin []byte, argv ...string) ([]byte, error)
	// Daemon starts a long-running process in the node, output appended to logPath.
	Daemon(argv []string, logPath string) (pid int, err error)
	// Do runs fn on a thread inside the node's network namespace: sockets fn creates belong
	// to the node and may be used outside fn afterwards.
	Do(fn func() error) error
	// CPU returns the CPU time the node's processes used so far.
	CPU() (cgroup.Usage, error)
}

// Guest is a node with a kernel of its own (a VM guest, runtime/vm.Node): the number its
// Daemon returns is the guest's PID, its sockets are not in any host namespace, and Do fails.
// A probe that starts a server there asks the node whether it runs and has the node stop it,
// and looks at its sockets with a command run in the guest (Output), never with the host's
// /proc or kill.
type Guest interface {
	Node
	// GroupRuns reports whether process group pgid (a daemon's PID: it leads a session of
	// its own) has a live member whose command line contains marker; false when the guest
	// does not answer.
	GroupRuns(pgid int, marker string) bool
	// StopGroup stops process group pgid: SIGTERM, after grace SIGKILL (SIGKILL at once
	// when grace is 0).
	StopGroup(pgid int, grace time.Duration) error
}

// Echoer is a node that serves an echo server itself where Go code cannot enter its
// network stack (a VM guest: its agent serves it). The tcprtt probe's destinations (TCP) and
// the rtt probe's (UDP).
type Echoer interface {
	// ListenEcho opens an echo server at addr in the node: TCP (network "tcp4" or "tcp6";
	// closing it closes its connections too) or UDP ("udp4", "udp6": every datagram is sent
	// back to its sender).
	ListenEcho(ctx context.Context, network, addr string) (io.Closer, error)
}

// InGuest returns n as a Guest when it is one: it has Guest's methods and its network stack
// cannot be entered from here (Do fails). A Kubernetes pod has the methods too (the agent on
// its node answers them), but when sfclab runs on that node Do enters the pod's namespace and
// its daemons' PIDs are this machine's: it is measured as a namespace node is.
func InGuest(n Node) (Guest, bool) {
	g, ok := n.(Guest)
	if !ok || n.Do(func() error { return nil }) == nil {
		return nil, false
	}
	return g, true
}

// Env is one chain of one deployed lab, as a probe sees it.
type Env struct {
	Plan  *plan.Plan
	Chain *plan.Chain
	// Node returns the runtime node of a plan node.
	Node func(name string) (Node, error)
	// LogDir is a scratch directory for server logs.
	LogDir string
}

// Window is a span of wall-clock time, e.g. when an iperf3 test's transfer ran.
type Window struct {
	From, To time.Time
}

// Duration returns To - From.
func (w Window) Duration() time.Duration { return w.To.Sub(w.From) }

// Probe takes measurements on one chain and emits raw samples. The runner fills in each
// sample's Experiment, Scenario and Trial.
type Probe interface {
	// Name is the probe's name, as in results.Sample.Probe.
	Name() string
	// Run measures once. It returns when done, when ctx ends, or when its own bounds expire.
	Run(ctx context.Context, env Env, emit func(results.Sample)) error
}

// NewSample returns a sample of the probe taken now.
func NewSample(probe, metric, unit string, value float64, labels map[string]string) results.Sample {
	return results.Sample{Probe: probe, Metric: metric, Unit: unit, Value: value, Time: time.Now(), Labels: labels}
}

// DestinationNodes returns the names of all instances of the chain's destination group, in
// plan order.
func DestinationNodes(p *plan.Plan, c *plan.Chain) []string {
	var names []string
	for _, n := range p.Nodes {
		if n.Group == c.To && n.Role != plan.RoleFunction {
			names = append(names, n.Name)
		}
	}
	return names
}

// DestinationAddr returns the address of the chain destination's first instance on the
// chain's last segment (its only address when no interface is on that segment), or the zero
// Addr when the plan has no such node. Ping targets this address, not the proxy's service
// address, so that a chain with an L4 proxy honestly has no ICMP path.
func DestinationAddr(p *plan.Plan, c *plan.Chain) netip.Addr {
	var first *plan.Node
	for _, n := range p.Nodes {
		if n.Group == c.To && n.Role != plan.RoleFunction && (first == nil || n.Instance < first.Instance) {
			first = n
		}
	}
	if first == nil || len(first.Interfaces) == 0 {
		return netip.Addr{}
	}
	if len(c.Segments) > 0 {
		last := c.Segments[len(c.Segments)-1]
		for _, i := range first.Interfaces {
			if i.Segment == last {
				return i.Address.Addr()
			}
		}
	}
	return first.Interfaces[0].Address.Addr()
}

// ServicePort returns the port servers must listen on at the chain's destination: the port the
// chain's last proxy (plan.Node.IsProxy: an L4 balancer, an HTTP proxy) connects to on its
// backends when it has one, else the chain's port, else DefaultPort.
func ServicePort(p *plan.Plan, c *plan.Chain) uint16 {
	for i := len(c.Hops) - 1; i >= 0; i-- {
		h := c.Hops[i]
		if len(h.Instances) == 0 || !p.Node(h.Instances[0]).IsProxy() {
			continue
		}
		if n := p.Node(h.Instances[0]); n != nil && n.Function != nil {
			if len(n.Function.Backends) > 0 && n.Function.Backends[0].Port != 0 {
				return n.Function.Backends[0].Port
			}
			if n.Function.Port != 0 {
				return n.Function.Port
			}
		}
		break
	}
	if c.Port != 0 {
		return c.Port
	}
	return DefaultPort
}

// TargetPort returns the port the source sends to: the chain's port (a proxy's service port
// or the classifier's destination port), else the port servers listen on.
func TargetPort(p *plan.Plan, c *plan.Chain) uint16 {
	if c.Port != 0 {
		return c.Port
	}
	return ServicePort(p, c)
}

// Timed is a probe that can date the part of its run that measures (iperf3's transfer, as its
// report dates it): WithAround returns the probe with around called around that part. around
// calls measure, which runs it and returns its window (ok false when the probe could not date
// it); around may work right before and after, as a CPU sampler does, and its error is the
// run's.
type Timed interface {
	Probe
	WithAround(around func(measure func() (w Window, ok bool)) error) Probe
}

// Ends returns the nodes at the chain's two ends, the source (the path's first node) and the
// destination group's first instance, and the destination's name; what names the caller in
// errors ("run ndr").
func Ends(env Env, what string) (src, dst Node, dstName string, err error) {
	c := env.Chain
	if len(c.Path) < 2 {
		return nil, nil, "", fmt.Errorf("%s on chain %s: no path", what, c.Name)
	}
	dsts := DestinationNodes(env.Plan, c)
	if len(dsts) == 0 {
		return nil, nil, "", fmt.Errorf("%s on chain %s: no destination", what, c.Name)
	}
	if src, err = env.Node(c.Path[0]); err != nil {
		return nil, nil, "", fmt.Errorf("%s on chain %s: %w", what, c.Name, err)
	}
	if dst, err = env.Node(dsts[0]); err != nil {
		return nil, nil, "", fmt.Errorf("%s on chain %s: %w", what, c.Name, err)
	}
	return src, dst, dsts[0], nil
}
