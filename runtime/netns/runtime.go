package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sfclab/sfclab/attach"
	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/pool"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// Runtime is the embedded runtime: a node is a named network namespace (sfc.LAB.NODE) with a
// cgroup (sfclab/labs/LAB/NODE); bridges live in the lab's fabric namespace (sfc.LAB).
type Runtime struct{}

// KillTimeout bounds the wait for a node's processes to die.
const KillTimeout = 5 * time.Second

// Name is "netns".
func (Runtime) Name() string { return "netns" }

// CreatesOnlyInProcess is true: sfclab's process makes every object of a lab itself
// (runtime.OwnCreates).
func (Runtime) CreatesOnlyInProcess() bool { return true }

var _ runtime.OwnCreates = Runtime{}

// Preflight checks, before anything is created, that every program the plan's functions and
// run commands start is installed on this host (nodes share the host's filesystem); root is
// checked by deploy.
func (Runtime) Preflight(_ context.Context, p *plan.Plan) error {
	needs, err := kinds.Needs(p)
	if err != nil {
		return err
	}
	var missing []string
	for _, n := range needs {
		if _, err := exec.LookPath(n.Program); err != nil {
			hint := ""
			if pkg, ok := Packages[n.Program]; ok {
				hint = "; install it: apt-get install " + pkg
			}
			missing = append(missing, fmt.Sprintf("%s (needed by %s)%s", n.Program, strings.Join(n.Nodes, ", "), hint))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("check programs: not installed: %s", strings.Join(missing, "; "))
	}
	if err := checkHosts(p); err != nil {
		return err
	}
	return checkDrivers(p)
}

// checkDrivers checks what the plan's attachment drivers take from the host (package attach):
// a host-device must exist, not be the uplink, carry no address; an sriov PF must have a VF.
func checkDrivers(p *plan.Plan) error {
	for _, n := range p.Nodes {
		if n.Driver == nil {
			continue
		}
		host, err := netdev.OpenNS("")
		if err != nil {
			return err
		}
		defer host.Close()
		return attach.Host{Sysfs: "/sys", NS: host}.Check(p)
	}
	return nil
}

// Packages names the Debian package of the programs sfclab may start, for error hints.
var Packages = map[string]string{
	"nft": "nftables", "iptables": "iptables", "iptables-restore": "iptables", "haproxy": "haproxy",
	"iperf3": "iperf3", "ping": "iputils-ping", "ip": "iproute2", "sh": "dash", "squid": "squid",
	"apache2": "apache2", "nginx": "nginx", "ab": "apache2-utils", "stress-ng": "stress-ng",
	"tcpdump": "tcpdump",
}

// Leftovers lists the lab's namespaces.
func (Runtime) Leftovers(_ context.Context, lab string) ([]string, error) {
	return labNamespaces(lab)
}

func cgroupRel(lab, node string) string { return "labs/" + lab + "/" + node }

// InterfacesAfterSysctls is true (runtime.FreshInterfaces): Link creates every interface, or
// moves it in (attachment drivers), and a device moved into a namespace is registered there
// anew, with the namespace's defaults.
func (Runtime) InterfacesAfterSysctls() bool { return true }

// CreateNodes creates the fabric namespace (when the lab has bridges), every node's
// namespace and cgroup.
// Equivalent to: ip netns add sfc.LAB.NODE (for each node)
func (Runtime) CreateNodes(ctx context.Context, p *plan.Plan, undo runtime.Undo) (map[string]*netdev.NS, error) {
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
	out := map[string]*netdev.NS{}
	var mu sync.Mutex // guards out and undo: namespaces are created by several workers
	closeAll := func() {
		for _, ns := range out {
			ns.Close()
		}
	}
	undo.Push("lab cgroup", func() error { return RemoveLabCgroup(p.Lab) })
	// Two workers: creating a namespace is mostly waiting in the kernel (mount and netns
	// setup), so a second one overlaps that wait; more did not help on 2 cores.
	err := pool.Run(ctx, len(keys), createWorkers, func(i int) error {
		node := keys[i]
		nsName := names[node]
		if err := netdev.CreateNetns(nsName); err != nil {
			return fmt.Errorf("create namespace: %w", err)
		}
		mu.Lock()
		undo.Push("namespace "+nsName, func() error { return netdev.DeleteNetns(nsName) })
		mu.Unlock()
		ns, err := netdev.OpenNS(nsName)
		if err != nil {
			return err
		}
		mu.Lock()
		out[node] = ns
		mu.Unlock()
		if node == "" {
			return nil
		}
		cg, err := cgroup.Create(cgroupRel(p.Lab, node))
		if err != nil {
			return fmt.Errorf("create cgroup of node %s: %w", node, err)
		}
		mu.Lock()
		undo.Push("cgroup of "+node, cg.Remove)
		mu.Unlock()
		return confine(p, node, cg)
	})
	if err != nil {
		closeAll()
		return nil, err
	}
	fabric := out[""]
	delete(out, "")
	if fabric != nil {
		out[FabricKey] = fabric
	}
	return out, nil
}

// createWorkers is how many namespaces CreateNodes creates at once.
const createWorkers = 2

// FabricKey keys the fabric namespace in the map CreateNodes returns (no node has this name);
// a runtime that hands its namespaces to Link does the same.
const FabricKey = "#fabric"

// Link creates the veth pairs and bridges of every segment and addresses the interfaces (a
// VM node whose ports are macvtaps gets them on the segments' bridges instead of veths).
// Bridged segments (few: fan-out groups) are wired one by one; the veth pairs between two
// nodes, most of a big lab, and then every node's addresses go through linkWorkers at once:
// the kernel serializes the changes under its rtnl lock, but the netlink round trips around
// them overlap.
// Equivalent to: ip link add A netns X type veth peer name B netns Y; ip link add brN type bridge; ...
func (Runtime) Link(ctx context.Context, p *plan.Plan, ns map[string]*netdev.NS, undo runtime.Undo) error {
	if len(p.Hosts) > 0 {
		return fmt.Errorf("link lab %s: its nodes are on emulated hosts, which package deploy wires (package hosts)", p.Lab)
	}
	fabric := ns[FabricKey]
	var host *netdev.NS
	defer func() {
		if host != nil {
			host.Close()
		}
	}()
	var pairs []*plan.Segment
	for _, s := range p.Segments {
		if s.Bridge == "" {
			pairs = append(pairs, s)
			continue
		}
		if err := fabric.AddBridge(s.Bridge); err != nil {
			return err
		}
		if err := fabric.SetUp(s.Bridge); err != nil {
			return err
		}
		for i, m := range s.Members {
			node, ifname := splitMember(m)
			port := s.Ports[i]
			if pn := p.Node(node); pn.VM.Macvtap() {
				// A VM's port on macvtap: the guest's end, made in the node's host-side
				// namespace on the bridge (runtime vm gives QEMU its character device).
				if err := fabric.AddMacvtap(s.Bridge, ns[node], ifname, p.MTU); err != nil {
					return fmt.Errorf("segment %s: %w", s.Name, err)
				}
				continue
			} else if pn.Driver != nil {
				if host == nil {
					var err error
					if host, err = netdev.OpenNS(""); err != nil {
						return err
					}
				}
				if err := attach.Wire(p.Lab, pn, pn.Interface(ifname), s, fabric, ns[node], host, attach.Host{Sysfs: "/sys", NS: host}, p.MTU); err != nil {
					return fmt.Errorf("segment %s: %w", s.Name, err)
				}
				nsName := pn.Netns
				undo.Push("give back the devices of "+node, func() error { return giveBack(p.Lab, nsName, nil) })
				continue
			}
			if err := ns[node].AddVeth(ifname, fabric, port, p.MTU); err != nil {
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
	err := pool.Run(ctx, len(pairs), linkWorkers, func(i int) error {
		s := pairs[i]
		a, ai := splitMember(s.Members[0])
		z, zi := splitMember(s.Members[1])
		if err := ns[a].AddVeth(ai, ns[z], zi, p.MTU); err != nil {
			return fmt.Errorf("segment %s: %w", s.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return pool.Run(ctx, len(p.Nodes), linkWorkers, func(i int) error {
		n := p.Nodes[i]
		for _, i := range n.Interfaces {
			if err := ns[n.Name].AddAddrsUp(i.Name, i.Address); err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
		return nil
	})
}

// linkWorkers is how many netlink changes Link has in flight.
var linkWorkers = goruntime.NumCPU()

// giveBack returns the host devices the lab moved into namespace name (see attach.GiveBack);
// host is the host's namespace, nil to open it here.
func giveBack(lab, name string, host *netdev.NS) error {
	// A deploy killed between creating /run/netns/NAME and bind-mounting the namespace on it
	// leaves a plain file: no namespace, so no device to give back (deleting removes the file).
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Join("/run/netns", name), &st); err == nil && st.Type != unix.NSFS_MAGIC {
		return nil
	}
	ns, err := netdev.OpenNS(name)
	if errors.Is(err, netdev.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer ns.Close()
	if host == nil {
		if host, err = netdev.OpenNS(""); err != nil {
			return err
		}
		defer host.Close()
	}
	return attach.GiveBack(lab, ns, host)
}

func splitMember(m string) (node, ifname string) {
	node, ifname, _ = strings.Cut(m, "/")
	return node, ifname
}

// Node returns a deployed node; its cgroup may be gone (then CPU reports an error).
func (Runtime) Node(_ context.Context, p *plan.Plan, name string) (runtime.Node, error) {
	pn := p.Node(name)
	if pn == nil {
		return nil, fmt.Errorf("find node %q in lab %q: no such node", name, p.Lab)
	}
	cg, err := cgroup.Open(cgroupRel(p.Lab, name))
	if err != nil {
		cg = nil
	}
	return &Node{Name: name, Netns: pn.Netns, Cgroup: cg}, nil
}

// Destroy kills the lab's processes (by cgroup, then by namespace), deletes its namespaces
// (by the sfc.LAB. prefix) and its cgroups. The lab's cgroup goes as one subtree (one kill,
// then every node's group, deepest first); processes are found in the lab's namespaces with
// one pass over /proc; namespaces are given back their devices and deleted destroyWorkers at
// once.
func (Runtime) Destroy(ctx context.Context, lab string) error {
	var errs []error
	if err := RemoveLabCgroup(lab); err != nil {
		errs = append(errs, err)
	}
	nsNames, err := labNamespaces(lab)
	if err != nil {
		return err
	}
	if err := killInNetns(nsNames); err != nil {
		errs = append(errs, err)
	}
	host, err := netdev.OpenNS("")
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	defer host.Close()
	errs = append(errs, pool.All(len(nsNames), destroyWorkers, func(i int) error {
		name := nsNames[i]
		return errors.Join(giveBack(lab, name, host), netdev.DeleteNetns(name))
	}))
	return errors.Join(errs...)
}

// destroyWorkers is how many namespaces Destroy deletes at once.
var destroyWorkers = goruntime.NumCPU()

// RemoveLabCgroup removes the lab's parent cgroup once its nodes' groups are gone, and the
// sfclab groups above it when they are empty.
func RemoveLabCgroup(lab string) error {
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
	for _, root := range []string{cgroup.Root(), cgroup.CpusetRoot()} {
		if root != "" {
			_ = os.Remove(filepath.Join(root, "labs"))
			_ = os.Remove(root)
		}
	}
	return nil
}

// labNamespaces lists the namespaces of a lab: its nodes' (sfc.LAB.*) and its fabric (sfc.LAB).
func labNamespaces(lab string) ([]string, error) {
	nodes, err := netdev.ListNetns(plan.NetnsName(lab, ""))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(netdev.NetnsDir, plan.FabricName(lab))); err == nil {
		nodes = append(nodes, plan.FabricName(lab))
	}
	return nodes, nil
}

// killInNetns kills every process whose network namespace is one of the named ones, so that
// deleting the names really frees the namespaces; /proc is read once per round for all of
// them.
func killInNetns(names []string) error {
	want := map[nsID]string{}
	for _, name := range names {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(netdev.NetnsDir, name), &st); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return fmt.Errorf("stat namespace %s: %w", name, err)
		}
		want[nsID{st.Dev, st.Ino}] = name
	}
	if len(want) == 0 {
		return nil
	}
	deadline := time.Now().Add(KillTimeout)
	for {
		pids := pidsInNetns(want)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var left []string
			for pid, name := range pids {
				left = append(left, fmt.Sprintf("%d (%s)", pid, name))
			}
			sort.Strings(left)
			return fmt.Errorf("kill processes in the lab's namespaces: still running: %s", strings.Join(left, ", "))
		}
		for pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nsID identifies a namespace by the device and inode of its file.
type nsID struct{ dev, ino uint64 }

// pidsInNetns maps every process in one of the namespaces to that namespace's name.
func pidsInNetns(want map[nsID]string) map[int]string {
	ents, _ := os.ReadDir("/proc")
	out := map[int]string{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/proc", e.Name(), "ns/net"), &st) != nil {
			continue
		}
		if name, ok := want[nsID{st.Dev, st.Ino}]; ok {
			out[pid] = name
		}
	}
	return out
}

// OpenNS opens the node's network namespace (for inspect in a lab whose runtime builds on
// netns).
func (n *Node) OpenNS() (*netdev.NS, error) { return netdev.OpenNS(n.Netns) }

// Do runs fn inside the node's network namespace.
func (n *Node) Do(fn func() error) error {
	ns, err := netdev.OpenNS(n.Netns)
	if err != nil {
		return err
	}
	defer ns.Close()
	return ns.Do(fn)
}

// ErrNoCgroup is returned by CPU for a node whose cgroup is gone.
var ErrNoCgroup = errors.New("node has no cgroup")

// CPU returns the CPU time the node's processes used so far (user and system).
func (n *Node) CPU() (cgroup.Usage, error) {
	if n.Cgroup == nil {
		return cgroup.Usage{}, fmt.Errorf("read cpu of node %s: %w", n.Name, ErrNoCgroup)
	}
	return n.Cgroup.CPU()
}

var _ runtime.Node = (*Node)(nil)
var _ runtime.Runtime = Runtime{}
