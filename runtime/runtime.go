// Package runtime defines where a lab's nodes come from: a Runtime creates the nodes (network
// namespaces, or containers) and wires the links between them; deploy does the rest (sysctls,
// routes, rules, functions) the same way for every runtime through the namespaces it returns.
package runtime

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
)

// Undo collects the inverse of every step done, for unwinding a failed deploy.
type Undo interface {
	Push(what string, fn func() error)
}

// Node is a running node: run commands in it, start daemons, open sockets in its network
// namespace, read its CPU time.
type Node interface {
	// Output runs a short command and returns its standard output; errors carry its stderr.
	Output(ctx context.Context, stdin []byte, argv ...string) ([]byte, error)
	// Daemon starts a long-running process, output appended to logPath, and returns its host PID.
	Daemon(argv []string, logPath string) (pid int, err error)
	// Do runs fn on an OS thread inside the node's network namespace.
	Do(fn func() error) error
	// CPU is the CPU time the node's processes used so far.
	CPU() (cgroup.Usage, error)
	// Run runs cmd in the node with the caller's standard streams (for `sfclab exec`).
	Run(cmd *exec.Cmd) error
}

// Runtime creates and removes the nodes of labs.
type Runtime interface {
	// Name is the runtime's name in lab files ("netns", "docker").
	Name() string
	// Preflight checks, before anything is created, that the runtime can build the plan.
	Preflight(ctx context.Context, p *plan.Plan) error
	// Leftovers lists what of a lab exists (namespaces, containers), found by its owner tag.
	Leftovers(ctx context.Context, lab string) ([]string, error)
	// CreateNodes creates every node of the plan and returns an open network namespace per
	// node name; the caller closes them. Undo steps are pushed as things are created.
	CreateNodes(ctx context.Context, p *plan.Plan, undo Undo) (map[string]*netdev.NS, error)
	// Link wires the segments and gives every interface its name and address.
	Link(ctx context.Context, p *plan.Plan, ns map[string]*netdev.NS, undo Undo) error
	// Node returns a node of a deployed lab.
	Node(ctx context.Context, p *plan.Plan, name string) (Node, error)
	// Destroy removes everything the runtime created for the lab, found by its owner tag,
	// and never anything else. Nothing there is not an error.
	Destroy(ctx context.Context, lab string) error
}

// FreshInterfaces is a runtime that creates every interface of a node in Link, after deploy
// has written the node's sysctls: an interface then takes its namespace's defaults
// (net.ipv4.conf.default.*, net.ipv6.conf.default.*) and needs no sysctls of its own when
// those defaults are the values deploy would give it.
type FreshInterfaces interface {
	InterfacesAfterSysctls() bool
}

// MachineDescriber is a runtime whose nodes may be machines of their own (runtime vm): inspect
// shows what each is (accelerator, with the mark every figure from an emulated CPU carries,
// and its boot) and whether it still runs.
type MachineDescriber interface {
	// DescribeMachine says what node is ("" when it is not a machine) and, when the machine
	// is gone, why it is down.
	DescribeMachine(p *plan.Plan, node string) (desc, down string)
}

// MachineLogger is a runtime whose nodes may be machines with logs and a state of their own
// (runtime vm: a guest's serial console, QEMU's log, the guest kernel's messages and counters):
// a failed bench trial keeps them beside its probes' logs, since they go with the lab.
type MachineLogger interface {
	// KeepMachineLogs writes a deployed node's logs into dir, each file named NODE-WHAT, and
	// returns how many it wrote (none when the node is not a machine).
	KeepMachineLogs(ctx context.Context, p *plan.Plan, node, dir string) (int, error)
}

// SubnetHolder is a runtime whose labs share one address space on the host (Docker: the
// engine refuses overlapping networks), so that a new lab's subnets are allocated around the
// ones it holds already.
type SubnetHolder interface {
	// TakenSubnets lists the subnets held now (by any lab or any other user of the runtime).
	TakenSubnets(ctx context.Context) ([]netip.Prefix, error)
}

// CheckHostCPUs refuses, before anything is created, a host's cores that check rejects (a core
// this machine does not have, no way to confine to it). The error starts with the host's
// place in the lab file.
func CheckHostCPUs(p *plan.Plan, check func(cpus string) error) error {
	for _, h := range p.AllHosts() {
		if h.CPUs == "" {
			continue
		}
		if err := check(h.CPUs); err != nil {
			where := h.Where
			if where == "" {
				where = "lab " + p.Lab
			}
			return fmt.Errorf("%s: host %s: cpus: %w", where, h.Name, err)
		}
	}
	return nil
}

// EnvironmentDescriber is a runtime with an engine of its own (Docker) that says what it is
// (version, drivers), for the environment a run records; keys are the runtime's own.
type EnvironmentDescriber interface {
	// Environment describes the engine; a value says "not available" when it does not answer.
	Environment(ctx context.Context) map[string]string
}

// OwnCreates is a runtime whose every object (namespace, link, process, cgroup, QEMU) is made
// by sfclab's own process, with no engine between that completes a request after its client
// is gone: once a deploy's process is dead, nothing of its lab appears any more, so destroying
// a lab whose deploy did not finish needs no second look (deploy.SettleGrace). Docker and
// Kubernetes do not qualify: their engines finish a create a killed deploy left in flight.
type OwnCreates interface {
	CreatesOnlyInProcess() bool
}
