// Package deploy builds a plan on this host with the netns runtime and tears it down: every
// step pushes its undo on a stack, any failure (or a cancelled context) unwinds it, and the lab
// is journaled before anything is created so that Destroy finds it after a crash.
package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	nsrt "github.com/sfclab/sfclab/runtime/netns"
	"github.com/sfclab/sfclab/vnf"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// ErrNotRoot is returned when sfclab is not run as root.
var ErrNotRoot = errors.New("sfclab needs root (network namespaces, veths, netfilter): run it with sudo")

// Timing is how long each phase of a deploy took.
type Timing struct {
	Namespaces time.Duration `json:"namespaces_ns"`
	Links      time.Duration `json:"links_ns"`
	Routing    time.Duration `json:"routing_ns"`
	Functions  time.Duration `json:"functions_ns"`
	Processes  time.Duration `json:"processes_ns"`
	Total      time.Duration `json:"total_ns"`
}

func (t Timing) String() string {
	return fmt.Sprintf("%s (namespaces %s, links %s, routing %s, functions %s, processes %s)",
		round(t.Total), round(t.Namespaces), round(t.Links), round(t.Routing), round(t.Functions), round(t.Processes))
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
	Journal Journal
	// Log receives progress lines; nil means silent.
	Log func(format string, args ...any)
}

// New returns a Deployer journaling under StateRoot().
func New() *Deployer { return &Deployer{Journal: Journal{Root: StateRoot()}} }

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

// packages names the Debian package of programs sfclab may need, for error hints.
var packages = map[string]string{
	"nft": "nftables", "iptables": "iptables", "iptables-restore": "iptables", "haproxy": "haproxy",
	"iperf3": "iperf3", "ping": "iputils-ping", "ip": "iproute2", "sh": "dash",
}

// Preflight checks, before anything is created, that every program the plan needs is installed.
func Preflight(p *plan.Plan) error {
	need := map[string][]string{} // program -> who needs it
	for _, n := range p.Nodes {
		if n.Function != nil {
			k, err := kinds.Get(n.Function.Kind)
			if err != nil {
				return err
			}
			for _, prog := range k.Requires(n.Function) {
				need[prog] = append(need[prog], n.Name)
			}
		}
		for _, r := range n.Run {
			if w := vnf.FirstWord(r); w != "" {
				need[w] = append(need[w], n.Name)
			}
		}
	}
	var missing []string
	for prog, who := range need {
		if _, err := exec.LookPath(prog); err != nil {
			hint := ""
			if pkg, ok := packages[prog]; ok {
				hint = fmt.Sprintf("; install it: apt-get install %s", pkg)
			}
			missing = append(missing, fmt.Sprintf("%s (needed by %s)%s", prog, strings.Join(uniq(who), ", "), hint))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("check programs: not installed: %s", strings.Join(missing, "; "))
	}
	return nil
}

func uniq(xs []string) []string {
	sort.Strings(xs)
	out := xs[:0]
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// cgroupRel is where a node's cgroup lives below sfclab's cgroup root.
func cgroupRel(lab, node string) string { return "labs/" + lab + "/" + node }

// Node returns the runtime node of a deployed lab's plan node.
func (d *Deployer) Node(p *plan.Plan, name string) (*Node, error) {
	pn := p.Node(name)
	if pn == nil {
		var names []string
		for _, n := range p.Nodes {
			names = append(names, n.Name)
		}
		return nil, fmt.Errorf("find node %q in lab %q: no such node (nodes: %s)", name, p.Lab, strings.Join(names, ", "))
	}
	cg, err := cgroup.Open(cgroupRel(p.Lab, name))
	if err != nil {
		cg = nil // processes still run in the namespace; CPU accounting is unavailable
	}
	return &Node{Node: &nsrt.Node{Name: name, Netns: pn.Netns, Cgroup: cg}, Plan: pn}, nil
}

// Node is a deployed node: the runtime node and its plan.
type Node struct {
	*nsrt.Node
	Plan *plan.Node
}

// Do runs fn inside the node's network namespace.
func (n *Node) Do(fn func() error) error {
	ns, err := netdev.OpenNS(n.Netns)
	if err != nil {
		return err
	}
	defer ns.Close()
	return ns.Do(fn)
}

// Deploy builds the plan. On any error, or when ctx is cancelled, everything created so far is
// removed again before Deploy returns.
func (d *Deployer) Deploy(ctx context.Context, p *plan.Plan, file string) (timing Timing, err error) {
	if err := CheckRoot(); err != nil {
		return timing, err
	}
	if err := Preflight(p); err != nil {
		return timing, err
	}
	if existing, _ := netdev.ListNetns(plan.NetnsName(p.Lab, "")); len(existing) > 0 {
		return timing, fmt.Errorf("deploy lab %q: %w: namespaces %s exist; remove them: sfclab destroy %s", p.Lab, ErrExists, strings.Join(existing, ", "), p.Lab)
	}
	start := time.Now()
	if err := d.Journal.create(p.Lab); err != nil {
		return timing, err
	}
	var undo undoStack
	undo.push("journal", func() error { return d.Journal.remove(p.Lab) })
	defer func() {
		if err != nil {
			d.logf("deploy failed, removing what was created")
			if uerr := undo.unwind(); uerr != nil {
				err = errors.Join(err, uerr)
			}
		}
	}()
	st := &State{Lab: p.Lab, File: file, Status: StatusDeploying, Started: start, PID: os.Getpid()}
	if err := d.Journal.WritePlan(p); err != nil {
		return timing, err
	}
	if err := d.Journal.WriteState(st); err != nil {
		return timing, err
	}
	b := &build{d: d, p: p, undo: &undo, ns: map[string]*netdev.NS{}}
	defer b.closeAll()
	phases := []struct {
		dst *time.Duration
		fn  func(context.Context) error
	}{
		{&timing.Namespaces, b.namespaces},
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
	st.Status, st.Deployed = StatusReady, timing.Total
	if err := d.Journal.WriteState(st); err != nil {
		return timing, err
	}
	return timing, nil
}

// build is one deploy in progress.
type build struct {
	d    *Deployer
	p    *plan.Plan
	undo *undoStack
	ns   map[string]*netdev.NS // by node name; "" is the fabric
	cg   map[string]*cgroup.Group
}

func (b *build) closeAll() {
	for _, ns := range b.ns {
		ns.Close()
	}
}

func (b *build) namespaces(ctx context.Context) error {
	p := b.p
	b.cg = map[string]*cgroup.Group{}
	names := map[string]string{}
	if p.Fabric != "" {
		names[""] = p.Fabric
	}
	for _, n := range p.Nodes {
		names[n.Name] = n.Netns
	}
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, node := range keys {
		nsName := names[node]
		if err := netdev.CreateNetns(nsName); err != nil {
			return fmt.Errorf("create namespace: %w", err)
		}
		b.undo.push("namespace "+nsName, func() error { return netdev.DeleteNetns(nsName) })
		ns, err := netdev.OpenNS(nsName)
		if err != nil {
			return err
		}
		b.ns[node] = ns
		if node == "" {
			continue
		}
		cg, err := cgroup.Create(cgroupRel(p.Lab, node))
		if err != nil {
			return fmt.Errorf("create cgroup of node %s: %w", node, err)
		}
		b.undo.push("cgroup of "+node, cg.Remove)
		b.cg[node] = cg
	}
	b.undo.push("lab cgroup", func() error { return removeLabCgroup(p.Lab) })
	for _, n := range p.Nodes {
		for _, s := range n.Sysctls {
			if err := b.ns[n.Name].SetSysctl(s.Key, s.Value); err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
	}
	return nil
}

// removeLabCgroup removes the lab's parent cgroup once its nodes' groups are gone.
func removeLabCgroup(lab string) error {
	g, err := cgroup.Open("labs/" + lab)
	if errors.Is(err, cgroup.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := g.Remove(); err != nil {
		return err
	}
	// Leave no empty sfclab cgroups behind either; rmdir fails harmlessly while another lab
	// still has groups there.
	if root := cgroup.Root(); root != "" {
		_ = os.Remove(filepath.Join(root, "labs"))
		_ = os.Remove(root)
	}
	return nil
}

func (b *build) links(ctx context.Context) error {
	p := b.p
	fabric := b.ns[""]
	for _, s := range p.Segments {
		if s.Bridge != "" {
			if err := fabric.AddBridge(s.Bridge); err != nil {
				return err
			}
			if err := fabric.SetUp(s.Bridge); err != nil {
				return err
			}
		}
		if s.Bridge == "" {
			a, ai := splitMember(s.Members[0])
			z, zi := splitMember(s.Members[1])
			if err := b.ns[a].AddVeth(ai, b.ns[z], zi, p.MTU); err != nil {
				return fmt.Errorf("segment %s: %w", s.Name, err)
			}
			continue
		}
		for i, m := range s.Members {
			node, ifname := splitMember(m)
			port := s.Ports[i]
			if err := b.ns[node].AddVeth(ifname, fabric, port, p.MTU); err != nil {
				return fmt.Errorf("segment %s: %w", s.Name, err)
			}
			if err := fabric.SetMaster(port, s.Bridge); err != nil {
				return err
			}
			if err := fabric.SetUp(port); err != nil {
				return err
			}
		}
	}
	for _, n := range p.Nodes {
		ns := b.ns[n.Name]
		for _, i := range n.Interfaces {
			if err := ns.AddAddr(i.Name, i.Address); err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
			if err := ns.SetUp(i.Name); err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
	}
	return nil
}

func splitMember(m string) (node, ifname string) {
	node, ifname, _ = strings.Cut(m, "/")
	return node, ifname
}

func (b *build) routing(ctx context.Context) error {
	for _, n := range b.p.Nodes {
		ns := b.ns[n.Name]
		for _, r := range n.Routes {
			nr := netdev.Route{Dst: r.Dst, Table: r.Table}
			for _, h := range r.NextHops {
				nr.NextHops = append(nr.NextHops, netdev.NextHop{Via: h.Via, Dev: h.Dev, Weight: h.Weight})
			}
			if err := ns.AddRoute(nr); err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
		for _, r := range n.Rules {
			nr := netdev.Rule{Priority: r.Priority, Table: r.Table, IPProto: ipproto(r.Protocol),
				SrcPort: netdev.PortRange{From: r.SrcPort.From, To: r.SrcPort.To},
				DstPort: netdev.PortRange{From: r.DstPort.From, To: r.DstPort.To},
				Src:     r.Src, Dst: r.Dst}
			if err := ns.AddRule(nr); err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
	}
	return nil
}

func ipproto(p string) uint8 {
	switch p {
	case "tcp":
		return 6
	case "udp":
		return 17
	case "icmp":
		return 1
	}
	return 0
}

func (b *build) node(n *plan.Node) *Node {
	return &Node{Node: &nsrt.Node{Name: n.Name, Netns: n.Netns, Cgroup: b.cg[n.Name]}, Plan: n}
}

func (b *build) env(n *plan.Node) vnf.Env {
	return vnf.Env{Node: b.node(n), Plan: n, StateDir: b.d.Journal.NodeDir(b.p.Lab)}
}

func (b *build) functions(ctx context.Context) error {
	for _, n := range b.p.Nodes {
		if n.Function == nil {
			continue
		}
		k, err := kinds.Get(n.Function.Kind)
		if err != nil {
			return err
		}
		env := b.env(n)
		b.undo.push("function "+n.Name, func() error { return k.Teardown(context.WithoutCancel(ctx), env) })
		if err := k.Setup(ctx, env); err != nil {
			return err
		}
	}
	return nil
}

func (b *build) processes(ctx context.Context) error {
	for _, n := range b.p.Nodes {
		node := b.node(n)
		for i, r := range n.Run {
			log := b.env(n).Path(fmt.Sprintf(".run%d.log", i))
			if _, err := node.Daemon(vnf.ShellDaemon(r), log); err != nil {
				return fmt.Errorf("node %s: start %q: %w", n.Name, r, err)
			}
		}
	}
	return nil
}

// ErrNoCgroup is returned by CPU for a node whose cgroup is gone.
var ErrNoCgroup = errors.New("node has no cgroup")

// CPU returns the CPU time the node's processes used so far (user and system).
func (n *Node) CPU() (cgroup.Usage, error) {
	if n.Node.Cgroup == nil {
		return cgroup.Usage{}, fmt.Errorf("read cpu of node %s: %w", n.Name, ErrNoCgroup)
	}
	return n.Node.Cgroup.CPU()
}
