// Package deploy builds a plan on this host and tears it down: a runtime (netns, docker)
// creates the nodes and links, deploy sets sysctls, routes, policy rules, functions and
// processes. Every step pushes its undo on a stack; any failure (or a cancelled context)
// unwinds it, and the lab is journaled before anything is created so that Destroy finds it
// after a crash.
package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/pool"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/runtimes"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// ErrNotRoot is returned when sfclab is not run as root.
var ErrNotRoot = errors.New("sfclab needs root (network namespaces, veths, netfilter): run it with sudo")

// ErrUnknownRuntime is returned for a plan whose runtime this build does not have.
var ErrUnknownRuntime = errors.New("unknown runtime")

// Timing is how long each phase of a deploy took.
type Timing struct {
	Nodes     time.Duration `json:"nodes_ns"`
	Links     time.Duration `json:"links_ns"`
	Routing   time.Duration `json:"routing_ns"`
	Functions time.Duration `json:"functions_ns"`
	Processes time.Duration `json:"processes_ns"`
	Total     time.Duration `json:"total_ns"`
}

func (t Timing) String() string {
	return fmt.Sprintf("%s (nodes %s, links %s, routing %s, functions %s, processes %s)",
		round(t.Total), round(t.Nodes), round(t.Links), round(t.Routing), round(t.Functions), round(t.Processes))
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// Deployer builds and destroys labs.
type Deployer struct {
	Journal journal.Journal
	// Log receives progress lines; nil means silent.
	Log func(format string, args ...any)
	// Runtimes by name; nil means the registered ones (runtime/runtimes).
	Runtimes map[string]runtime.Runtime
}

// New returns a Deployer journaling under journal.StateRoot() with the built-in runtimes.
func New() *Deployer {
	return &Deployer{Journal: journal.Journal{Root: journal.StateRoot(), Kinds: kinds.Spec()}}
}

// journal is the deployer's journal with the registered kinds typing stored plans' params
// when the caller gave none.
func (d *Deployer) journal() journal.Journal {
	j := d.Journal
	if j.Kinds == nil {
		j.Kinds = kinds.Spec()
	}
	return j
}

// ReadPlan reads the stored plan of a deployed lab, params typed by the registered kinds.
func (d *Deployer) ReadPlan(lab string) (*plan.Plan, error) { return d.journal().ReadPlan(lab) }

// runtimes lists the runtimes of a Deployer: its own, or the registered ones journaling where
// it does.
func (d *Deployer) runtimes() map[string]runtime.Runtime {
	if d.Runtimes != nil {
		return d.Runtimes
	}
	return runtimes.All(runtimes.Options{StateRoot: d.Journal.Root, Log: d.logf})
}

// Runtime returns the runtime called name.
func (d *Deployer) Runtime(name string) (runtime.Runtime, error) {
	if name == "" {
		name = spec.DefaultRuntime
	}
	rt, ok := d.runtimes()[name]
	if !ok {
		return nil, fmt.Errorf("get runtime %q: %w", name, ErrUnknownRuntime)
	}
	return rt, nil
}

func (d *Deployer) logf(format string, args ...any) {
	if d.Log != nil {
		d.Log(format, args...)
	}
}

// CheckRoot fails with ErrNotRoot unless the effective user is root.
func CheckRoot() error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	return nil
}

// Node returns a node of a deployed lab.
func (d *Deployer) Node(p *plan.Plan, name string) (runtime.Node, error) {
	if p.Node(name) == nil {
		var names []string
		for _, n := range p.Nodes {
			names = append(names, n.Name)
		}
		return nil, fmt.Errorf("find node %q in lab %q: no such node (nodes: %s)", name, p.Lab, strings.Join(names, ", "))
	}
	rt, err := d.Runtime(p.Runtime)
	if err != nil {
		return nil, err
	}
	return rt.Node(context.Background(), p, name)
}

// Deploy builds the plan. On any error, or when ctx is cancelled, everything created so far is
// removed again before Deploy returns.
func (d *Deployer) Deploy(ctx context.Context, p *plan.Plan, file string) (timing Timing, err error) {
	if err := CheckRoot(); err != nil {
		return timing, err
	}
	rt, err := d.Runtime(p.Runtime)
	if err != nil {
		return timing, err
	}
	if err := rt.Preflight(ctx, p); err != nil {
		return timing, err
	}
	if err := checkShaping(p); err != nil {
		return timing, err
	}
	if existing, _ := rt.Leftovers(ctx, p.Lab); len(existing) > 0 {
		return timing, fmt.Errorf("deploy lab %q: %w: %s exist; remove them: sfclab destroy %s", p.Lab, journal.ErrExists, strings.Join(existing, ", "), p.Lab)
	}
	start := time.Now()
	if err := d.Journal.Create(p.Lab); err != nil {
		return timing, err
	}
	var undo undoStack
	undo.Push("journal", func() error { return d.Journal.Remove(p.Lab) })
	defer func() {
		if err != nil {
			d.logf("deploy failed, removing what was created")
			if uerr := undo.unwind(); uerr != nil {
				err = errors.Join(err, uerr)
			}
		}
	}()
	st := &journal.State{Lab: p.Lab, File: file, Status: journal.StatusDeploying, Started: start, PID: os.Getpid()}
	if err := d.Journal.WritePlan(p); err != nil {
		return timing, err
	}
	if err := d.Journal.WriteState(st); err != nil {
		return timing, err
	}
	b := &build{d: d, rt: rt, p: p, undo: &undo}
	defer b.closeAll()
	phases := []struct {
		dst *time.Duration
		fn  func(context.Context) error
	}{
		{&timing.Nodes, b.nodes},
		{&timing.Links, b.links},
		{&timing.Routing, b.routing},
		{&timing.Functions, b.functions},
		{&timing.Processes, b.processes},
	}
	for _, ph := range phases {
		if err := ctx.Err(); err != nil {
			return timing, fmt.Errorf("deploy lab %q: interrupted: %w", p.Lab, err)
		}
		t0 := time.Now()
		if err := ph.fn(ctx); err != nil {
			return timing, fmt.Errorf("deploy lab %q: %w", p.Lab, err)
		}
		*ph.dst = time.Since(t0)
	}
	timing.Total = time.Since(start)
	st.Status, st.Deployed = journal.StatusReady, timing.Total
	if err := d.Journal.WriteState(st); err != nil {
		return timing, err
	}
	return timing, nil
}

// build is one deploy in progress.
type build struct {
	d      *Deployer
	rt     runtime.Runtime
	p      *plan.Plan
	undo   *undoStack
	ns     map[string]*netdev.NS // by node name (the runtime may add its own keys)
	opened map[string]runtime.Node
}

func (b *build) closeAll() {
	for _, ns := range b.ns {
		ns.Close()
	}
}

// nodes creates the nodes and sets their sysctls, before links exist so that new interfaces
// take the namespace defaults.
func (b *build) nodes(ctx context.Context) error {
	ns, err := b.rt.CreateNodes(ctx, b.p, b.undo)
	if err != nil {
		return err
	}
	b.ns = ns
	set := map[string]netdev.Settings{}
	for _, n := range b.p.Nodes {
		kvs := make([][2]string, len(n.Sysctls))
		for i, s := range n.Sysctls {
			kvs[i] = [2]string{s.Key, s.Value}
		}
		set[n.Name] = netdev.Settings{Sysctls: kvs}
	}
	return b.apply(ctx, set)
}

// freshInterfaces reports whether the runtime creates every interface after the nodes'
// sysctls are written (runtime.FreshInterfaces).
func (b *build) freshInterfaces() bool {
	f, ok := b.rt.(runtime.FreshInterfaces)
	return ok && f.InterfacesAfterSysctls()
}

// takesDefaults reports whether a node's own sysctls make the namespace defaults what links
// sets on every interface (rp_filter 0, IPv6 off), so that interfaces created after them
// need nothing more.
func takesDefaults(n *plan.Node) bool {
	var rp, v6 bool
	for _, s := range n.Sysctls {
		switch s.Key {
		case "net.ipv4.conf.default.rp_filter":
			rp = s.Value == "0"
		case "net.ipv6.conf.default.disable_ipv6":
			v6 = s.Value == "1"
		}
	}
	return rp && v6
}

// links wires the segments, then turns off reverse-path filtering and IPv6 on every interface
// (interfaces a runtime attached before the defaults were set keep their own values).
func (b *build) links(ctx context.Context) error {
	link := b.rt.Link
	if len(b.p.Hosts) > 0 {
		// package hosts wires nodes on emulated hosts, whichever runtime made them
		link = func(ctx context.Context, p *plan.Plan, ns map[string]*netdev.NS, undo runtime.Undo) error {
			return linkHosts(ctx, b.rt, p, ns, undo)
		}
	}
	if err := link(ctx, b.p, b.ns, b.undo); err != nil {
		return err
	}
	if len(b.p.Hosts) > 0 && b.p.Transparent == nil {
		// linkHosts made the ports in place of the runtime's Link, which boots the VMs.
		if err := b.bootOnPorts(ctx); err != nil {
			return err
		}
	}
	if b.p.Transparent != nil {
		if err := b.steering(ctx); err != nil {
			return err
		}
		return b.shapeHosts()
	}
	fresh := b.freshInterfaces()
	set := map[string]netdev.Settings{}
	for _, n := range b.p.Nodes {
		if fresh && takesDefaults(n) {
			continue // its interfaces took these values from the namespace's defaults
		}
		var kvs [][2]string
		for _, i := range n.Interfaces {
			kvs = append(kvs, [2]string{"net.ipv4.conf." + i.Name + ".rp_filter", "0"}, [2]string{"net.ipv6.conf." + i.Name + ".disable_ipv6", "1"})
		}
		set[n.Name] = netdev.Settings{Sysctls: kvs}
	}
	if err := b.apply(ctx, set); err != nil {
		return err
	}
	if b.p.Redirects() {
		if err := b.redirects(); err != nil {
			return err
		}
	}
	return b.shaping()
}

// routing adds every node's routes and policy rules, nodes in parallel (apply): a node's
// routes go in one batch that looks each device up once.
func (b *build) routing(ctx context.Context) error {
	set := map[string]netdev.Settings{}
	for _, n := range b.p.Nodes {
		rs, rules := runtime.Routing(n)
		set[n.Name] = netdev.Settings{Routes: rs, Rules: rules}
	}
	return b.apply(ctx, set)
}

func (b *build) node(ctx context.Context, name string) (runtime.Node, error) {
	if b.opened == nil {
		b.opened = map[string]runtime.Node{}
	}
	if n, ok := b.opened[name]; ok {
		return n, nil
	}
	n, err := b.rt.Node(ctx, b.p, name)
	if err != nil {
		return nil, err
	}
	b.opened[name] = n
	return n, nil
}

// env is what a function kind gets to set itself up in node n.
func (d *Deployer) env(node runtime.Node, n *plan.Node, lab string) vnf.Env {
	return vnf.Env{Node: node, Plan: n, StateDir: d.Journal.NodeDir(lab)}
}

// openWorkers bounds how many nodes openNodes opens at once: opening a container is a
// request to the engine that waits more than it computes.
const openWorkers = 8

// openNodes opens every node that has a function or run commands, concurrently, before the
// functions are set up one after another (a runtime such as docker asks its engine once per
// node, which serially costs milliseconds per node).
func (b *build) openNodes(ctx context.Context) error {
	var want []*plan.Node
	for _, n := range b.p.Nodes {
		if n.Function != nil || len(n.Run) > 0 {
			want = append(want, n)
		}
	}
	opened := make([]runtime.Node, len(want))
	if err := pool.All(len(want), openWorkers, func(i int) (err error) {
		opened[i], err = b.rt.Node(ctx, b.p, want[i].Name)
		return err
	}); err != nil {
		return err
	}
	if b.opened == nil {
		b.opened = map[string]runtime.Node{}
	}
	for i, n := range want {
		b.opened[n.Name] = opened[i]
	}
	return nil
}

func (b *build) functions(ctx context.Context) error {
	if err := b.openNodes(ctx); err != nil {
		return err
	}
	for _, n := range b.p.Nodes {
		if n.Function == nil {
			continue
		}
		k, err := kinds.Get(n.Function.Kind)
		if err != nil {
			return err
		}
		node, err := b.node(ctx, n.Name)
		if err != nil {
			return err
		}
		env := b.d.env(node, n, b.p.Lab)
		b.undo.Push("function "+n.Name, func() error { return k.Teardown(context.WithoutCancel(ctx), env) })
		if err := k.Setup(ctx, env); err != nil {
			return err
		}
	}
	return nil
}

func (b *build) processes(ctx context.Context) error {
	for _, n := range b.p.Nodes {
		if len(n.Run) == 0 {
			continue
		}
		node, err := b.node(ctx, n.Name)
		if err != nil {
			return err
		}
		for i, r := range n.Run {
			log := b.d.env(node, n, b.p.Lab).Path(fmt.Sprintf(".run%d.log", i))
			if _, err := node.Daemon(vnf.ShellDaemon(r), log); err != nil {
				return fmt.Errorf("node %s: start %q: %w", n.Name, r, err)
			}
		}
	}
	return nil
}
