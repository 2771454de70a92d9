// Package vm is the virtual machine runtime: a node with vm: settings (every function of a
// lab with runtime: vm) is a QEMU microvm; the other nodes are network namespaces, as in
// runtime netns, which this runtime builds on.
//
// A VM node keeps a network namespace of its own on the host (sfc.LAB.NODE, made by the netns
// runtime with its cgroup and veths as for any node). In it, each veth end is spliced (tc
// redirect both ways) to a tap that QEMU opens as a virtio-net device with the veth's MAC, so
// the guest's NIC stands where the veth was: neighbours, bridges and steering programs on the
// host side see the same device and MAC. QEMU runs in that namespace and cgroup (CPU
// accounting of every QEMU thread, killed with the namespace's processes at destroy). The
// guest boots the host's kernel, uncompressed, straight from an uncompressed initramfs whose
// init is this binary (GuestMain); its agent answers on a virtio-serial port and configures
// the guest's network with the same netdev code deploy uses on namespaces.
package vm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/netns"
	"github.com/sfclab/sfclab/runtime/vm/accel"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// RunRoot holds each VM's socket, console log and QEMU log: RunRoot/LAB/NODE/.
const RunRoot = "/run/sfclab-vm"

// DevRoot holds the character devices of the lab's macvtaps, DevRoot/LAB/NODE.IFACE: made by
// sfclab from the number the kernel gave the macvtap (the name udev would give, /dev/tapIFINDEX,
// clashes between labs: ifindexes repeat across namespaces). It is on /dev, not under RunRoot,
// because /run is mounted nodev on systemd hosts (a device node there cannot be opened).
const DevRoot = "/dev/sfclab-vm"

// DefaultBootTimeout bounds a guest's boot, from QEMU's start to the agent's first answer.
const DefaultBootTimeout = 60 * time.Second

// Runtime is the vm runtime.
type Runtime struct {
	// Images builds the guest images (zero value: under DefaultImageRoot, this binary as agent).
	Images Builder
	// BootTimeout bounds each guest's boot (0 = DefaultBootTimeout).
	BootTimeout time.Duration
	// Accel overrides the accelerator decision (nil = accel.Host()).
	Accel *accel.Decision
	// Cmdline is appended to each guest's kernel command line (tests).
	Cmdline string
	// StateRoot is the journal root of the deployer using the runtime ("" = the default):
	// each guest mounts its lab's node directory (functions' configuration and logs) there.
	StateRoot string
}

// Name is "vm".
func (Runtime) Name() string { return spec.RuntimeVM }

// CreatesOnlyInProcess is true: sfclab's process makes every object of a lab itself
// (runtime.OwnCreates).
func (Runtime) CreatesOnlyInProcess() bool { return true }

var _ runtime.OwnCreates = Runtime{}

// InterfacesAfterSysctls is netns's answer: Link creates every interface.
func (Runtime) InterfacesAfterSysctls() bool { return true }

func (r Runtime) accel() accel.Decision {
	if r.Accel != nil {
		return *r.Accel
	}
	return accel.Host()
}

// Preflight checks what netns checks (the programs, copied into the guest image from the
// host, must be installed), that QEMU and a kernel are, and that no VM asks for more vCPUs or
// memory than the host has (errors start with the vm: settings' place in the lab file).
func (r Runtime) Preflight(ctx context.Context, p *plan.Plan) error {
	if err := (netns.Runtime{}).Preflight(ctx, p); err != nil {
		return err
	}
	return r.CheckMachines(ctx, p)
}

// CheckMachines is the VM nodes' part of Preflight, for any runtime that makes their host
// side (this one, or runtime docker): QEMU, a kernel and busybox installed, and no VM asking
// for more vCPUs or memory than the host has. A plan without VM nodes passes.
func (r Runtime) CheckMachines(ctx context.Context, p *plan.Plan) error {
	if !hasVM(p) {
		return nil
	}
	if err := CheckQEMU(); err != nil {
		return err
	}
	if _, _, err := HostKernel(); err != nil {
		return err
	}
	if _, err := exec.LookPath("busybox"); err != nil {
		return errors.New("busybox is not installed: apt-get install busybox-static")
	}
	if err := checkGuestPrograms(p); err != nil {
		return err
	}
	memMiB, err := hostMemMiB()
	if err != nil {
		return err
	}
	return checkLimits(p, goruntime.NumCPU(), memMiB)
}

// checkGuestPrograms checks that every program the VM nodes' kinds and run commands start is
// installed on the host, which their guest images copy it from (in a docker lab the
// containers' image may have it and the host not).
func checkGuestPrograms(p *plan.Plan) error {
	sets, err := ProgramSets(p)
	if err != nil {
		return err
	}
	who := map[string][]string{}
	var progs []string
	for _, set := range sets {
		for _, prog := range set.Programs {
			if _, err := exec.LookPath(prog); err != nil {
				if who[prog] == nil {
					progs = append(progs, prog)
				}
				who[prog] = append(who[prog], set.Nodes...)
			}
		}
	}
	if len(progs) == 0 {
		return nil
	}
	slices.Sort(progs)
	var missing []string
	for _, prog := range progs {
		hint := ""
		if pkg, ok := netns.Packages[prog]; ok {
			hint = "; install it: apt-get install " + pkg
		}
		missing = append(missing, fmt.Sprintf("%s (needed by VM %s)%s", prog, strings.Join(who[prog], ", "), hint))
	}
	return fmt.Errorf("check programs of the VMs' guest images (copied from this host): not installed: %s", strings.Join(missing, "; "))
}

// checkLimits refuses a VM with more vCPUs than host cores, more memory than the host has,
// pinned to cores the host does not have, and VMs whose memory together exceeds the host's.
func checkLimits(p *plan.Plan, cores, memMiB int) error {
	total := 0
	var asks []string // each VM's memory and place, for the refusal of them together
	for _, n := range p.Nodes {
		if n.VM == nil {
			continue
		}
		where := n.VM.Where
		if where == "" {
			where = "lab " + p.Lab
		}
		asks = append(asks, fmt.Sprintf("%s %d MiB at %s", n.Name, n.VM.Memory, where))
		if n.VM.CPUs > cores {
			return fmt.Errorf("%s: node %s: vm cpus %d: this host has %d cores", where, n.Name, n.VM.CPUs, cores)
		}
		if n.VM.Memory > memMiB {
			return fmt.Errorf("%s: node %s: vm memory %d MiB: this host has %d MiB", where, n.Name, n.VM.Memory, memMiB)
		}
		if n.VM.Pin != "" {
			cpus, err := parseCPUList(n.VM.Pin)
			if err != nil {
				return fmt.Errorf("%s: node %s: vm pin: %w", where, n.Name, err)
			}
			for _, c := range cpus {
				if c >= cores {
					return fmt.Errorf("%s: node %s: vm pin %q: this host has cores 0-%d", where, n.Name, n.VM.Pin, cores-1)
				}
			}
		}
		total += n.VM.Memory
	}
	if total > memMiB {
		return fmt.Errorf("lab %s: its VMs ask for %d MiB of memory together (%s); this host has %d MiB: give them less (vm: {memory: MiB}) or run fewer VMs",
			p.Lab, total, strings.Join(asks, ", "), memMiB)
	}
	return nil
}

// parseCPUList reads a cpuset list ("1", "0-1", "0,2").
func parseCPUList(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("%q is not a list of cores such as 0-1 or 0,2", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("%q is not a list of cores such as 0-1 or 0,2", s)
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// hostMemMiB is the host's MemTotal.
func hostMemMiB() (int, error) {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0, fmt.Errorf("read host memory: %w", err)
	}
	return int(uint64(si.Totalram) * uint64(si.Unit) >> 20), nil
}

func hasVM(p *plan.Plan) bool {
	for _, n := range p.Nodes {
		if n.VM != nil {
			return true
		}
	}
	return false
}

// Leftovers lists the lab's VMs' run directory (its namespaces and cgroups are the netns
// runtime's to list, as they are its to remove).
func (Runtime) Leftovers(ctx context.Context, lab string) ([]string, error) {
	var out []string
	for _, root := range []string{RunRoot, DevRoot} {
		if _, err := os.Stat(filepath.Join(root, lab)); err == nil {
			out = append(out, filepath.Join(root, lab))
		}
	}
	return out, nil
}

// CreateNodes builds (or finds) the guest images, then creates every node as netns does: VM
// nodes get their host-side namespace and cgroup there.
func (r Runtime) CreateNodes(ctx context.Context, p *plan.Plan, undo runtime.Undo) (map[string]*netdev.NS, error) {
	if err := r.PrepareMachines(ctx, p, undo); err != nil {
		return nil, err
	}
	return (netns.Runtime{}).CreateNodes(ctx, p, undo)
}

// PrepareMachines builds (or finds) the guest images of the plan's VM nodes, refuses a VM whose
// memory its image does not fit in, and makes the lab's VM run directory (undone by undo),
// before any node exists: CreateNodes' first step here and runtime docker's. A plan without VM
// nodes needs nothing.
func (r Runtime) PrepareMachines(ctx context.Context, p *plan.Plan, undo runtime.Undo) error {
	if !hasVM(p) {
		return nil
	}
	ims, err := r.images(ctx, p)
	if err != nil {
		return err
	}
	if err := checkMemory(p, ims); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(RunRoot, p.Lab), 0o700); err != nil {
		return fmt.Errorf("create VM run directory: %w", err)
	}
	lab := p.Lab
	undo.Push("VM run directory", func() error { return os.RemoveAll(filepath.Join(RunRoot, lab)) })
	if hasMacvtap(p) {
		if err := os.MkdirAll(filepath.Join(DevRoot, p.Lab), 0o700); err != nil {
			return fmt.Errorf("create VM device directory: %w", err)
		}
		undo.Push("VM device directory", func() error { return removeDevDir(lab) })
	}
	return nil
}

// hasMacvtap reports whether a VM node of the plan has macvtap ports.
func hasMacvtap(p *plan.Plan) bool {
	for _, n := range p.Nodes {
		if n.VM.Macvtap() {
			return true
		}
	}
	return false
}

// removeDevDir removes the lab's macvtap device nodes, and DevRoot when no lab has any left.
func removeDevDir(lab string) error {
	if err := os.RemoveAll(filepath.Join(DevRoot, lab)); err != nil {
		return fmt.Errorf("remove VM device directory: %w", err)
	}
	_ = os.Remove(DevRoot)
	return nil
}

// lastImages are the images the last plan's VM nodes were given: a deploy asks for them in
// CreateNodes and again when it boots the VMs, and each lookup hashes an image's content
// list (ldd of every program, a stat of every member: 0.1-0.25 s here).
var lastImages struct {
	sync.Mutex
	p    *plan.Plan
	root string
	ims  map[string]*Image
}

// images are the guest images of the plan's VM nodes, by node: each holds the programs its
// own node's kind and run commands need (ProgramSets), so a forwarder's guest does not unpack
// Squid's 18 MB because another VM of the lab runs Squid. Nodes that need the same programs
// share an image.
func (r Runtime) images(ctx context.Context, p *plan.Plan) (map[string]*Image, error) {
	lastImages.Lock()
	defer lastImages.Unlock()
	if lastImages.p == p && lastImages.root == r.Images.root() && lastImages.ims != nil {
		fresh := true
		for _, im := range lastImages.ims {
			if _, err := os.Stat(im.Initramfs()); err != nil {
				fresh = false
			}
			touchImage(im.Dir) // in use again: not to be removed as superseded (prune)
		}
		if fresh {
			return lastImages.ims, nil
		}
	}
	sets, err := ProgramSets(p)
	if err != nil {
		return nil, err
	}
	out := map[string]*Image{}
	for _, set := range sets {
		var im *Image
		if set.Image == spec.VMImageDebian {
			im, err = r.Images.EnsureDebian(ctx, set.Packages)
		} else {
			im, err = r.Images.Ensure(set.Programs)
		}
		if err != nil {
			return nil, err
		}
		for _, n := range set.Nodes {
			out[n] = im
		}
	}
	lastImages.p, lastImages.root, lastImages.ims = p, r.Images.root(), out
	return out, nil
}

// ProgramSet is the programs a guest image holds besides BasePrograms and the VM nodes that
// boot it.
type ProgramSet struct {
	// Image is the image kind: spec.VMImageBusybox or spec.VMImageDebian.
	Image    string
	Programs []string
	// Packages are a Debian image's packages (DebianPackages of the nodes' kinds).
	Packages []string
	Nodes    []string
}

// ProgramSets groups a plan's VM nodes by image kind and the programs their kinds and run
// commands need (kinds.Needs) and their probes start (plan.VM.Programs), and for Debian
// images by the packages of their kinds and of those programs (netns.Packages: ab is
// apache2-utils): one guest image per group.
func ProgramSets(p *plan.Plan) ([]ProgramSet, error) {
	needs, err := kinds.Needs(p)
	if err != nil {
		return nil, err
	}
	var out []ProgramSet
	idx := map[string]int{}
	for _, n := range p.Nodes {
		if n.VM == nil {
			continue
		}
		var progs, pkgs []string
		for _, nd := range needs {
			if slices.Contains(nd.Nodes, n.Name) {
				progs = append(progs, nd.Program)
			}
		}
		kind := n.VM.Image
		if kind == "" {
			kind = spec.VMImageBusybox
		}
		if kind == spec.VMImageDebian {
			var ks []string
			if n.Function != nil {
				ks = append(ks, n.Function.Kind)
			}
			pkgs = DebianPackages(ks)
			// The probes' programs (plan.VM.Programs: ab) come as their packages.
			for _, prog := range n.VM.Programs {
				if pkg, ok := netns.Packages[prog]; ok {
					pkgs = append(pkgs, pkg)
				}
			}
			pkgs = slices.Compact(slices.Sorted(slices.Values(pkgs)))
		} else {
			// A busybox image copies them from the host with the kind's.
			progs = slices.Compact(slices.Sorted(slices.Values(append(progs, n.VM.Programs...))))
		}
		key := kind + "|" + strings.Join(progs, " ") + "|" + strings.Join(pkgs, " ")
		i, ok := idx[key]
		if !ok {
			i = len(out)
			idx[key] = i
			out = append(out, ProgramSet{Image: kind, Programs: progs, Packages: pkgs})
		}
		out[i].Nodes = append(out[i].Nodes, n.Name)
	}
	return out, nil
}

// Link wires the lab as netns does, then boots the VMs, all at once. A transparent lab's
// ports are made after Link (package hosts, in the steering step): its VMs boot then
// (BootOnPorts).
func (r Runtime) Link(ctx context.Context, p *plan.Plan, ns map[string]*netdev.NS, undo runtime.Undo) error {
	if err := (netns.Runtime{}).Link(ctx, p, ns, undo); err != nil {
		return err
	}
	if p.Transparent != nil {
		return nil
	}
	return r.BootMachines(ctx, p, ns)
}

// BootMachines boots every VM node of a routed plan at once on its host-side namespace
// (ns[node], which holds the node's interfaces with the plan's names: veth ends of the netns
// runtime's, or a container's Docker-made interfaces) and waits for them all; each guest is
// given the node's addresses, routes, rules and sysctls. The namespace must also be reachable
// by its name (plan.Node.Netns): QEMU starts in it by that name, and the node's cgroup
// (labs/LAB/NODE) must exist for QEMU's CPU to be accounted. A plan without VM nodes boots
// nothing.
func (r Runtime) BootMachines(ctx context.Context, p *plan.Plan, ns map[string]*netdev.NS) error {
	if !hasVM(p) {
		return nil
	}
	return r.bootAll(ctx, p, ns, guestConfig)
}

// bootAll boots every VM node of the plan at once, each with the guest network config gives
// it, and waits for them all.
func (r Runtime) bootAll(ctx context.Context, p *plan.Plan, ns map[string]*netdev.NS, config func(*plan.Node) *GuestConfig) error {
	ims, err := r.images(ctx, p)
	if err != nil {
		return err
	}
	tsc, err := HostTSCkHz()
	if err != nil {
		return err
	}
	dec := r.accel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, n := range p.Nodes {
		if n.VM == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.boot(ctx, p, n, ns[n.Name], ims[n.Name], tsc, dec, config(n)); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("node %s: %w", n.Name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runDir is a VM node's directory for its socket and logs.
func runDir(lab, node string) string { return filepath.Join(RunRoot, lab, node) }

// Boot file names in a VM's run directory.
const (
	sockFile    = "agent.sock"
	consoleFile = "console.log"
	qemuLogFile = "qemu.log"
	pidFile     = "qemu.pid"
	bootFile    = "boot.json"
)

// boot splices a tap to each of the node's veth ends (cfg's interfaces), starts QEMU in the
// node's namespace and cgroup, waits for the agent and has it configure the guest's network.
func (r Runtime) boot(ctx context.Context, p *plan.Plan, n *plan.Node, ns *netdev.NS, im *Image, tsc int, dec accel.Decision, cfg *GuestConfig) error {
	dir := runDir(p.Lab, n.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create run directory: %w", err)
	}
	links, err := ns.Links()
	if err != nil {
		return err
	}
	mac, mtu, kind := map[string]string{}, map[string]int{}, map[string]string{}
	for _, l := range links {
		mac[l.Name], mtu[l.Name], kind[l.Name] = l.MAC, l.MTU, l.Kind
	}
	m := machine{Name: p.Lab + "." + n.Name, VM: *n.VM, Accel: dec, Image: im, TSCkHz: tsc,
		Socket: filepath.Join(dir, sockFile), Console: filepath.Join(dir, consoleFile),
		PIDFile: filepath.Join(dir, pidFile), Cmdline: r.Cmdline, Affinity: n.VM.Pin,
		Share: r.nodeDir(p.Lab)}
	var files []*os.File // macvtaps' character devices, QEMU's descriptors 3, 4, ...
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for i, ifc := range cfg.Interfaces {
		tap := "vt" + strconv.Itoa(i)
		if mac[ifc.Name] == "" {
			return fmt.Errorf("find interface %s in the node's namespace", ifc.Name)
		}
		if n.VM.Macvtap() {
			// Either the interface is the macvtap itself (bridge mode on the segment's bridge:
			// routed labs, on the machine or on emulated hosts), or it is a device of the
			// port's own (a veth whose host end carries a transparent lab's steering program,
			// or a container's Docker-made interface) and the macvtap goes on it in passthru
			// mode, with its MAC. The guest's NIC takes the MAC, QEMU the character device.
			mt := ifc.Name
			if kind[ifc.Name] != "macvtap" {
				mt = "mvt" + strconv.Itoa(i)
				if err := ns.AddMacvtapPassthru(ifc.Name, mt, mtu[ifc.Name]); err != nil {
					return err
				}
				if err := ns.SetUp(mt); err != nil {
					return err
				}
			}
			f, err := openMacvtap(ns, p.Lab, n.Name, mt, ifc.Name)
			if err != nil {
				return err
			}
			files = append(files, f)
			m.Ports = append(m.Ports, port{FD: 2 + len(files), MAC: mac[ifc.Name]})
			cfg.Interfaces[i].MAC = mac[ifc.Name]
			if cfg.Interfaces[i].MTU == 0 {
				cfg.Interfaces[i].MTU = mtu[ifc.Name]
			}
			continue
		}
		// The tap and the guest's NIC take the veth's MTU (lower on emulated hosts joined by
		// VXLAN than the lab's).
		if err := ns.AddTap(tap, mtu[ifc.Name]); err != nil {
			return err
		}
		if err := ns.SetUp(tap); err != nil {
			return err
		}
		if err := ns.Splice(ifc.Name, tap); err != nil {
			return err
		}
		m.Ports = append(m.Ports, port{Tap: tap, MAC: mac[ifc.Name]})
		cfg.Interfaces[i].MAC = mac[ifc.Name]
		if cfg.Interfaces[i].MTU == 0 {
			cfg.Interfaces[i].MTU = mtu[ifc.Name]
		}
	}
	cg, _ := cgroup.Open("labs/" + p.Lab + "/" + n.Name)
	node := &netns.Node{Name: n.Name, Netns: n.Netns, Cgroup: cg}
	logf, err := os.OpenFile(filepath.Join(dir, qemuLogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	argv := m.args()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = files
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	t0 := time.Now()
	err = node.Start(cmd)
	logf.Close()
	for _, f := range files { // QEMU has its own copies
		f.Close()
	}
	files = nil
	if err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	timeout := r.BootTimeout
	if timeout == 0 {
		timeout = DefaultBootTimeout
	}
	bctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	boot, err := waitAgent(bctx, m.Socket, exited)
	if err != nil {
		_ = cmd.Process.Kill()
		return fmt.Errorf("boot guest (%s): %w%s", dec.Accel, err, lastLines(dir))
	}
	ready := time.Since(t0)
	c, err := agentClient(m.Socket)
	if err != nil {
		return err
	}
	res, err := c.call(bctx, request{Op: "configure", Config: cfg})
	if err != nil {
		return fmt.Errorf("configure guest network: %w%s", err, lastLines(dir))
	}
	if res.Err != "" {
		return fmt.Errorf("configure guest network: %s", res.Err)
	}
	rec := BootRecord{Accel: dec, QEMUToAgent: ready, Guest: *boot, Configured: time.Since(t0)}
	return rec.write(filepath.Join(dir, bootFile))
}

// openMacvtap opens the character device of macvtap mt in the node's host-side namespace ns,
// the port of the node's interface ifname: it reads the device's number there and makes the
// node DevRoot/LAB/NODE.IFNAME (removed with the lab's device directory at destroy), then
// opens it for QEMU.
//
// Equivalent to: mknod /dev/sfclab-vm/LAB/NODE.IFNAME c $(ip netns exec NS cat /sys/class/net/MT/macvtap/tap*/dev)
func openMacvtap(ns *netdev.NS, lab, node, mt, ifname string) (*os.File, error) {
	dev, err := ns.MacvtapDevice(mt)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(DevRoot, lab, node+"."+ifname)
	if err := netdev.MakeCharDev(path, dev); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open macvtap %s of node %s: %w", mt, node, err)
	}
	return f, nil
}

// guestConfig is the node's network as the guest agent applies it: the node's sysctls, and
// on every interface rp_filter off and IPv6 off, as deploy sets them on namespaces.
func guestConfig(n *plan.Node) *GuestConfig {
	c := &GuestConfig{}
	for _, s := range n.Sysctls {
		c.Sysctls = append(c.Sysctls, [2]string{s.Key, s.Value})
	}
	c.Sysctls = append(c.Sysctls, [2]string{"net.ipv4.conf.all.rp_filter", "0"})
	for _, i := range n.Interfaces {
		c.Interfaces = append(c.Interfaces, GuestInterface{Name: i.Name, Addrs: []netip.Prefix{i.Address}})
		c.Sysctls = append(c.Sysctls, [2]string{"net.ipv4.conf." + i.Name + ".rp_filter", "0"}, [2]string{"net.ipv6.conf." + i.Name + ".disable_ipv6", "1"})
	}
	c.Routes, c.Rules = runtime.Routing(n)
	return c
}

// waitAgent waits for QEMU's socket, then for the agent's answer to a ping; QEMU exiting or
// ctx ending first is an error.
func waitAgent(ctx context.Context, sock string, exited <-chan struct{}) (*Boot, error) {
	// QEMU creates the socket file a moment before it listens on it: dial until it answers.
	var c *client
	for {
		var err error
		if c, err = agentClient(sock); err == nil {
			break
		}
		select {
		case <-exited:
			return nil, errors.New("QEMU exited")
		case <-ctx.Done():
			return nil, fmt.Errorf("no agent socket: %w (%v)", ctx.Err(), err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	type result struct {
		r   *response
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := c.call(ctx, request{Op: "ping"})
		done <- result{r, err}
	}()
	select {
	case <-exited:
		dropClient(sock)
		return nil, errors.New("QEMU exited")
	case res := <-done:
		if res.err != nil {
			dropClient(sock)
			select { // a broken connection is most often QEMU going away
			case <-exited:
				return nil, errors.New("QEMU exited")
			case <-time.After(time.Second):
			}
			if errors.Is(res.err, context.DeadlineExceeded) {
				return nil, errors.New("the guest agent did not answer within the boot deadline")
			}
			return nil, res.err
		}
		if res.r.Boot == nil {
			return nil, errors.New("the guest agent answered a ping without boot times")
		}
		return res.r.Boot, nil
	}
}

// consoleLines is how much of a failed guest's console and QEMU's log an error shows.
const consoleLines = 15

// KeepMachineLogs writes a VM node's logs into dir (runtime.MachineLogger): its guest
// console and QEMU log as they are (NODE-console.log, NODE-qemu.log) and, while its guest
// answers, the guest's state read through the agent within guestStateFor
// (NODE-guest-state.txt: the kernel's messages, the interfaces' counters, the interrupts and
// the TCP/UDP counters), the data a stalled path or a hung guest is diagnosed from. Nothing for
// a node that is not a VM.
func (r Runtime) KeepMachineLogs(ctx context.Context, p *plan.Plan, node, dir string) (int, error) {
	n := p.Node(node)
	if n == nil || n.VM == nil {
		return 0, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("keep logs of VM node %s: %w", node, err)
	}
	kept := 0
	rd := runDir(p.Lab, node)
	for _, f := range []string{consoleFile, qemuLogFile} {
		data, err := os.ReadFile(filepath.Join(rd, f))
		if err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, node+"-"+f), data, 0o644); err != nil {
			return kept, fmt.Errorf("keep logs of VM node %s: %w", node, err)
		}
		kept++
	}
	if !qemuRunning(p.Lab, node) {
		return kept, nil
	}
	ctx, cancel := context.WithTimeout(ctx, guestStateFor)
	defer cancel()
	g, err := r.Node(ctx, p, node)
	if err != nil {
		return kept, fmt.Errorf("keep logs of VM node %s: %w", node, err)
	}
	var b strings.Builder
	for _, argv := range guestStateCommands {
		out, err := g.Output(ctx, nil, argv...)
		fmt.Fprintf(&b, "### %s\n%s", strings.Join(argv, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if err := os.WriteFile(filepath.Join(dir, node+"-guest-state.txt"), []byte(b.String()), 0o644); err != nil {
		return kept, fmt.Errorf("keep logs of VM node %s: %w", node, err)
	}
	return kept + 1, nil
}

// guestStateFor bounds the reading of a guest's state for a failed trial's logs.
const guestStateFor = 20 * time.Second

// guestStateCommands are what KeepMachineLogs runs in a guest: programs every guest image has.
var guestStateCommands = [][]string{
	{"dmesg"},
	{"ip", "-s", "link"},
	{"cat", "/proc/interrupts"},
	{"cat", "/proc/net/snmp"},
	{"cat", "/proc/net/netstat"},
}

// lastLines is the end of a VM's console and QEMU log, for errors.
func lastLines(dir string) string {
	var b strings.Builder
	for _, f := range []string{consoleFile, qemuLogFile} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || len(strings.TrimSpace(string(data))) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > consoleLines {
			lines = lines[len(lines)-consoleLines:]
		}
		fmt.Fprintf(&b, "\n--- last lines of %s ---\n%s", f, strings.Join(lines, "\n"))
	}
	if b.Len() == 0 {
		return " (the console is empty)"
	}
	return b.String()
}

// Node returns a deployed node: a VM through its agent, the others as netns does.
func (r Runtime) Node(ctx context.Context, p *plan.Plan, name string) (runtime.Node, error) {
	pn := p.Node(name)
	if pn == nil {
		return nil, fmt.Errorf("find node %q in lab %q: no such node", name, p.Lab)
	}
	if pn.VM == nil {
		return (netns.Runtime{}).Node(ctx, p, name)
	}
	cg, err := cgroup.Open("labs/" + p.Lab + "/" + name)
	if err != nil {
		cg = nil
	}
	return &Node{Name: name, Lab: p.Lab, Netns: pn.Netns, Cgroup: cg, sock: filepath.Join(runDir(p.Lab, name), sockFile)}, nil
}

// QEMUPids lists the QEMU processes of a lab's VMs, found by the -name sfclab gives them
// (LAB.NODE).
func QEMUPids(lab string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		if len(args) == 0 || filepath.Base(args[0]) != QEMU {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-name" && strings.HasPrefix(args[i+1], lab+".") {
				out = append(out, pid)
			}
		}
	}
	return out
}

// Destroy removes any QEMU of the lab, the VMs' run directory and their macvtaps' device
// nodes. What the netns side made
// (the nodes' namespaces and cgroups, the taps in them) carries the lab's tag sfc.LAB.*: the
// netns runtime, which every deployer has beside this one and runs at the same time, removes
// it. Doing it here too raced it: one destroy removed a cgroup the other was reading
// (cgroup.procs: no such device) and the lab's destroy failed.
func (Runtime) Destroy(ctx context.Context, lab string) error {
	var err error
	for _, pid := range QEMUPids(lab) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	dir := filepath.Join(RunRoot, lab)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		dropClient(filepath.Join(dir, e.Name(), sockFile))
	}
	if rerr := os.RemoveAll(dir); rerr != nil {
		err = errors.Join(err, fmt.Errorf("remove VM run directory: %w", rerr))
	}
	_ = os.Remove(RunRoot) // when no lab has VMs left
	// The macvtaps themselves are in the VM nodes' namespaces, which the netns runtime
	// deletes: they go with them.
	return errors.Join(err, removeDevDir(lab))
}

// DescribeMachine says what a VM node is: vCPUs, memory, accelerator (with the TCG mark),
// its boot phases; down when its QEMU is gone.
func (Runtime) DescribeMachine(p *plan.Plan, node string) (desc, down string) {
	n := p.Node(node)
	if n == nil || n.VM == nil {
		return "", ""
	}
	desc = fmt.Sprintf("%d vCPU, %d MiB, nic %s on %s", n.VM.CPUs, n.VM.Memory, n.VM.NIC, backendOf(p, n.VM))
	if n.VM.Pin != "" {
		desc += ", pinned to cores " + n.VM.Pin
	}
	if b, err := ReadBoot(p.Lab, node); err == nil {
		if b.Accel.Emulated() {
			desc += "; " + accel.TCGMark
		}
		desc += "; boot " + b.Phases()
	}
	if !qemuRunning(p.Lab, node) {
		down = qemuGone
	}
	return desc, down
}

// backendOf says how a VM's ports reach the lab, for inspect: a macvtap in bridge mode on the
// segment's bridge, a macvtap in passthru mode on the port's own device (MacvtapOnPort), or a
// tap spliced to the node's veth, served by QEMU's own backend (this runtime never starts
// vhost-net).
func backendOf(p *plan.Plan, v *plan.VM) string {
	switch {
	case v.Macvtap() && MacvtapOnPort(p):
		return "macvtap (passthru mode on the port's own device, QEMU's backend on its character device)"
	case v.Macvtap():
		return "macvtap (bridge mode, QEMU's backend on its character device)"
	}
	return "tap (spliced to a veth, QEMU's backend)"
}

// MacvtapOnPort reports whether a macvtap VM port of plan p goes in passthru mode on a device
// of the port's own (a transparent lab's veth, whose host end carries the steering program;
// a docker lab's interface that Docker made on its own network) rather than in bridge mode
// on the segment's bridge (routed labs of namespaces, on the machine or on emulated hosts,
// and docker labs on emulated hosts, whose bridges are sfclab's).
func MacvtapOnPort(p *plan.Plan) bool {
	return p.Transparent != nil || (p.Runtime == spec.RuntimeDocker && len(p.Hosts) == 0)
}

// qemuRunning reports whether the QEMU of VM node node of lab runs.
// qemuGone says why a VM node is down: inspect's DOWN line and a command sent to it.
const qemuGone = "its QEMU process is not running (the VM is gone)"

func qemuRunning(lab, node string) bool {
	for _, pid := range QEMUPids(lab) {
		if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(cmd), "\x00"+lab+"."+node+",") {
			return true
		}
	}
	return false
}

var _ runtime.Runtime = Runtime{}
var _ runtime.MachineDescriber = Runtime{}
