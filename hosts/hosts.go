// Package hosts builds emulated hosts, for transparent steering and for routed labs that
// place nodes on hosts (study D's sender and responder servers): each host is a network
// namespace that owns one Linux bridge per L2 network; every port of an endpoint or function
// instance is a veth whose host-side end sits on its network's bridge (steering attaches
// there). With several hosts, an underlay namespace holds a bridge joining the hosts; each
// host has a VXLAN device per network (VNI = network id, head-end replication to every other
// host) and one collect_md VXLAN device for steering (eBPF sets the tunnel key). Node
// interfaces get MTU 1450 so the 50-byte VXLAN overhead never fragments silently.
package hosts

import (
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"net/netip"
	"os/exec"
	"strings"

	"github.com/sfclab/sfclab/netdev"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Ports on the underlay: plain networks and the steering tunnel.
const (
	NetworkVXLANPort = 4789
	SteerVXLANPort   = 4790
	// VXLANOverhead is what VXLAN over IPv4 adds to a frame.
	VXLANOverhead = 50
	// SteerDev is the name of a host's collect_md VXLAN device.
	SteerDev = "vxsteer"
	// UnderlayDev is a host's interface on the underlay.
	UnderlayDev = "ul0"
)

// Undo collects the inverse of every step done.
type Undo interface {
	Push(what string, fn func() error)
}

// Topology is what to build.
type Topology struct {
	Lab      string
	Hosts    []Host
	Networks []Network
	Nodes    []Node
	// NodesExist: the nodes' namespaces were created by a runtime; Build only adds their ports.
	NodesExist bool
	// NoSteering: no collect_md steering device (routed labs steer by routes).
	NoSteering bool
	// Local, when set, builds only this host and its nodes: one machine's part of a topology
	// whose hosts are machines of their own (the kubernetes runtime's agent on each node),
	// with Host.Underlay each machine's own address. No underlay namespace is built: the
	// host's VXLAN devices are created in UnderlayNS (the machine's namespace that holds its
	// address; "" is the caller's own) on its device UnderlayIf and moved into the host's
	// namespace, as Docker's overlay driver does, so that their UDP sockets stay on the
	// machine's network.
	Local      string
	UnderlayNS string
	UnderlayIf string
	// SteerPort is the UDP port of the collect_md steering device (0: SteerVXLANPort). A
	// network namespace takes one such device per port, and a VNI once per port (measured:
	// "A VXLAN device with the specified VNI already exists", even with another local
	// address), so labs sharing a machine's namespace (Local) need a port and VNIs each.
	SteerPort int
}

// builds reports whether Build makes host h here: every host, or only Local.
func (t *Topology) builds(h string) bool { return t.Local == "" || h == t.Local }

// Host is one emulated host.
type Host struct {
	Name string
	ID   uint32
	// Underlay is the host's address on the underlay (only used with several hosts).
	Underlay netip.Prefix
	// CPUs are the host's own cores (nil: none of its own). Packets arriving from the other
	// hosts are then processed on them (RPS on its underlay interface), as a machine's own
	// kernel would, instead of on the sending host's core.
	CPUs []int
}

// Network is one L2 network present on every host.
type Network struct {
	Name   string
	Bridge string // bridge name in each host namespace
	VNI    uint32 // VXLAN id between hosts
	// Hosts are the hosts the network is on (nil: every host); a VXLAN device joins them
	// when there are two or more.
	Hosts []string
}

// on reports whether the network is on host h.
func (n Network) on(h string) bool {
	if n.Hosts == nil {
		return true
	}
	for _, x := range n.Hosts {
		if x == h {
			return true
		}
	}
	return false
}

// Node is an endpoint or function instance.
type Node struct {
	Name  string
	Host  string
	Ports []Port
}

// Port is one interface of a node on a network.
type Port struct {
	Ifname  string // inside the node
	HostIf  string // the host-side end, on the network's bridge
	Network string
	Addr    netip.Prefix
	// Addr6 is the port's IPv6 address (transparent labs are dual-stack): added without
	// duplicate address detection, with IPv6 turned on for the port and router
	// advertisements ignored. Zero: IPv6 stays as the namespace's defaults leave it.
	Addr6 netip.Prefix
	MAC   net.HardwareAddr // nil: kernel-chosen
	// Macvlan: the port is a macvlan (bridge mode) on the network's bridge instead of a veth;
	// HostIf is then unused (the driver macvlan of a routed lab).
	Macvlan bool
	// Macvtap: the port is a macvtap (bridge mode) on the network's bridge, made in the node's
	// namespace, instead of a veth: a VM node's port with vm: {backend: macvtap} in a routed
	// lab (the runtime gives QEMU its character device), or the driver macvtap of a routed
	// lab's endpoint. HostIf is then unused.
	Macvtap bool
}

// NetnsName is the namespace of a node or host of a lab.
func NetnsName(lab, node string) string { return "sfc." + lab + "." + node }

// HostNetns is the namespace of an emulated host.
func HostNetns(lab, host string) string { return NetnsName(lab, "host-"+host) }

// UnderlayNetns is the namespace holding the underlay bridge.
func UnderlayNetns(lab string) string { return NetnsName(lab, "underlay") }

// MTU is the MTU of node interfaces: 1500, or 1450 when VXLAN joins several hosts.
func (t *Topology) MTU() int {
	if len(t.Hosts) > 1 {
		return 1500 - VXLANOverhead
	}
	return 1500
}

// Built is what Build created, by name.
type Built struct {
	// NS holds the open namespaces: hosts by HostNetns, nodes by NetnsName. Close with Close.
	NS map[string]*netdev.NS
}

// Close closes every namespace handle (the namespaces stay).
func (b *Built) Close() {
	for _, n := range b.NS {
		n.Close()
	}
}

// Build creates namespaces, bridges, veths and (with several hosts) the underlay and VXLAN
// devices. Every step pushes its undo.
func Build(t *Topology, undo Undo) (*Built, error) {
	b := &Built{NS: map[string]*netdev.NS{}}
	open := func(name string) (*netdev.NS, error) {
		if err := netdev.CreateNetns(name); err != nil {
			return nil, err
		}
		undo.Push("delete netns "+name, func() error { return netdev.DeleteNetns(name) })
		ns, err := netdev.OpenNS(name)
		if err != nil {
			return nil, err
		}
		b.NS[name] = ns
		return ns, nil
	}
	hostNS := map[string]*netdev.NS{}
	for _, h := range t.Hosts {
		if !t.builds(h.Name) {
			continue
		}
		ns, err := open(HostNetns(t.Lab, h.Name))
		if err != nil {
			return b, fmt.Errorf("build host %s: %w", h.Name, err)
		}
		hostNS[h.Name] = ns
		// No IPv6 neighbour discovery from the host's own bridges and tunnels over the
		// (shaped) host link: the hosts only bridge their nodes' IPv6 (dual-stack ports).
		for _, k := range []string{"net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"} {
			if err := ns.SetSysctl(k, "1"); err != nil {
				return b, fmt.Errorf("build host %s: %w", h.Name, err)
			}
		}
		for _, n := range t.Networks {
			if !n.on(h.Name) {
				continue
			}
			if err := ns.AddBridge(n.Bridge); err != nil {
				return b, fmt.Errorf("build host %s: %w", h.Name, err)
			}
			if err := ns.SetUp(n.Bridge); err != nil {
				return b, fmt.Errorf("build host %s: %w", h.Name, err)
			}
		}
	}
	switch {
	case len(t.Hosts) > 1 && t.Local != "":
		if err := machineVXLANs(t, hostNS[t.Local], undo); err != nil {
			return b, err
		}
	case len(t.Hosts) > 1:
		if err := buildUnderlay(t, hostNS, open); err != nil {
			return b, err
		}
	}
	mtu := t.MTU()
	for _, nd := range t.Nodes {
		if !t.builds(nd.Host) {
			continue
		}
		hn, ok := hostNS[nd.Host]
		if !ok {
			return b, fmt.Errorf("build node %s: host %q: %w", nd.Name, nd.Host, ErrNoHost)
		}
		var ns *netdev.NS
		var err error
		if t.NodesExist {
			ns, err = netdev.OpenNS(NetnsName(t.Lab, nd.Name))
			if err == nil {
				b.NS[NetnsName(t.Lab, nd.Name)] = ns
			}
		} else {
			ns, err = open(NetnsName(t.Lab, nd.Name))
		}
		if err != nil {
			return b, fmt.Errorf("build node %s: %w", nd.Name, err)
		}
		for _, p := range nd.Ports {
			br := ""
			for _, n := range t.Networks {
				if n.Name == p.Network {
					br = n.Bridge
				}
			}
			if br == "" {
				return b, fmt.Errorf("build port %s.%s: unknown network %q", nd.Name, p.Ifname, p.Network)
			}
			if p.Macvlan || p.Macvtap {
				add := hn.AddMacvlan
				if p.Macvtap {
					add = hn.AddMacvtap
				}
				if err := add(br, ns, p.Ifname, mtu); err != nil {
					return b, fmt.Errorf("build node %s: %w", nd.Name, err)
				}
				if err := ns.SetUp(p.Ifname); err != nil {
					return b, fmt.Errorf("build node %s: %w", nd.Name, err)
				}
				if p.Addr.IsValid() {
					if err := ns.AddAddr(p.Ifname, p.Addr); err != nil {
						return b, fmt.Errorf("build node %s: %w", nd.Name, err)
					}
				}
				continue
			}
			if err := ns.AddVeth(p.Ifname, hn, p.HostIf, mtu); err != nil {
				return b, fmt.Errorf("build node %s: %w", nd.Name, err)
			}
			if p.MAC != nil {
				if err := setMAC(NetnsName(t.Lab, nd.Name), p.Ifname, p.MAC); err != nil {
					return b, err
				}
			}
			steps := []func() error{
				func() error { return hn.SetMaster(p.HostIf, br) },
				func() error { return hn.SetUp(p.HostIf) },
				func() error { return ns.SetUp(p.Ifname) },
			}
			if p.Addr.IsValid() {
				steps = append(steps, func() error { return ns.AddAddr(p.Ifname, p.Addr) })
			}
			if p.Addr6.IsValid() {
				steps = append(steps, func() error { return AddAddr6(ns, p.Ifname, p.Addr6) })
			}
			for _, s := range steps {
				if err := s(); err != nil {
					return b, fmt.Errorf("build node %s: %w", nd.Name, err)
				}
			}
		}
	}
	return b, nil
}

func buildUnderlay(t *Topology, hostNS map[string]*netdev.NS, open func(string) (*netdev.NS, error)) error {
	ul, err := open(UnderlayNetns(t.Lab))
	if err != nil {
		return fmt.Errorf("build underlay: %w", err)
	}
	if err := ul.AddBridge("ul"); err != nil {
		return fmt.Errorf("build underlay: %w", err)
	}
	if err := ul.SetUp("ul"); err != nil {
		return fmt.Errorf("build underlay: %w", err)
	}
	for i, h := range t.Hosts {
		hn := hostNS[h.Name]
		peer := fmt.Sprintf("ul-%d", i)
		if err := hn.AddVeth(UnderlayDev, ul, peer, 1500); err != nil {
			return fmt.Errorf("build underlay: %w", err)
		}
		for _, s := range []func() error{
			func() error { return ul.SetMaster(peer, "ul") },
			func() error { return ul.SetUp(peer) },
			func() error { return hn.SetUp(UnderlayDev) },
			func() error { return hn.AddAddr(UnderlayDev, h.Underlay) },
			func() error { return SetRPS(HostNetns(t.Lab, h.Name), UnderlayDev, h.CPUs) },
		} {
			if err := s(); err != nil {
				return fmt.Errorf("build underlay: %w", err)
			}
		}
		if err := vxlans(t, h, HostNetns(t.Lab, h.Name), hn); err != nil {
			return err
		}
	}
	return nil
}

// vxlans creates a host's per-network VXLAN devices (flooding to every other host) and its
// collect_md steering device.
// Equivalent to: ip link add vx-N type vxlan id VNI local ADDR dstport 4789 dev ul0;
// bridge fdb append 00:00:00:00:00:00 dev vx-N dst OTHER; ip link add vxsteer type vxlan external dstport 4790
func vxlans(t *Topology, h Host, nsName string, hn *netdev.NS) error {
	hd, err := handleIn(nsName)
	if err != nil {
		return fmt.Errorf("build vxlan on %s: %w", h.Name, err)
	}
	defer hd.Close()
	ulLink, err := hd.LinkByName(UnderlayDev)
	if err != nil {
		return fmt.Errorf("build vxlan on %s: %w", h.Name, err)
	}
	for i, n := range t.Networks {
		if !n.on(h.Name) || len(n.Hosts) == 1 {
			continue // not here, or on this host only: nothing to carry
		}
		name := fmt.Sprintf("vx%d", i)
		vx := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: 1500 - VXLANOverhead},
			VxlanId: int(n.VNI), SrcAddr: h.Underlay.Addr().AsSlice(), Port: NetworkVXLANPort,
			VtepDevIndex: ulLink.Attrs().Index, Learning: true}
		if err := hd.LinkAdd(vx); err != nil {
			return fmt.Errorf("build vxlan %s on %s: %w", name, h.Name, err)
		}
		link, err := hd.LinkByName(name)
		if err != nil {
			return fmt.Errorf("build vxlan %s on %s: %w", name, h.Name, err)
		}
		for _, o := range t.Hosts {
			if o.Name == h.Name || !n.on(o.Name) {
				continue
			}
			fdb := &netlink.Neigh{LinkIndex: link.Attrs().Index, Family: netlinkAFBridge, State: netlink.NUD_PERMANENT,
				Flags: netlink.NTF_SELF, IP: o.Underlay.Addr().AsSlice(), HardwareAddr: make(net.HardwareAddr, 6)}
			if err := hd.NeighAppend(fdb); err != nil {
				return fmt.Errorf("build vxlan %s on %s: flood to %s: %w", name, h.Name, o.Name, err)
			}
		}
		if err := hn.SetMaster(name, n.Bridge); err != nil {
			return err
		}
		if err := hn.SetUp(name); err != nil {
			return err
		}
	}
	if t.NoSteering {
		return nil
	}
	steer := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: SteerDev, MTU: 1500 - VXLANOverhead},
		FlowBased: true, Port: t.steerPort()}
	if err := hd.LinkAdd(steer); err != nil {
		return fmt.Errorf("build vxlan %s on %s: %w", SteerDev, h.Name, err)
	}
	return hn.SetUp(SteerDev)
}

func (t *Topology) steerPort() int {
	if t.SteerPort != 0 {
		return t.SteerPort
	}
	return SteerVXLANPort
}

// machineVXLANs gives the Local host, on a machine of its own, its per-network VXLAN devices
// (flooding to the other hosts' machines) and its steering device: each is created in
// UnderlayNS on UnderlayIf with the machine's address, under a name of the lab's, then moved
// into the host's namespace and renamed as on emulated hosts (vxN, vxsteer). A device still
// in UnderlayNS when a later step fails is deleted by undo; once moved, it goes with the
// host's namespace.
// Equivalent to: ip link add TMP type vxlan id VNI local ADDR dstport 4789 dev IF;
// ip link set TMP netns HOST; ip -n HOST link set TMP name vxN; bridge fdb append ...
func machineVXLANs(t *Topology, hn *netdev.NS, undo Undo) error {
	var h Host
	for _, x := range t.Hosts {
		if x.Name == t.Local {
			h = x
		}
	}
	if h.Name == "" {
		return fmt.Errorf("build vxlan: host %q: %w", t.Local, ErrNoHost)
	}
	ud, err := handleIn(t.UnderlayNS)
	if err != nil {
		return fmt.Errorf("build vxlan on %s: underlay namespace %q: %w", h.Name, t.UnderlayNS, err)
	}
	defer ud.Close()
	ul, err := ud.LinkByName(t.UnderlayIf)
	if err != nil {
		return fmt.Errorf("build vxlan on %s: underlay device %q: %w", h.Name, t.UnderlayIf, err)
	}
	hostName := HostNetns(t.Lab, h.Name)
	hd, err := handleIn(hostName)
	if err != nil {
		return fmt.Errorf("build vxlan on %s: %w", h.Name, err)
	}
	defer hd.Close()
	hostFd, err := netns.GetFromName(hostName)
	if err != nil {
		return fmt.Errorf("build vxlan on %s: %w", h.Name, err)
	}
	defer hostFd.Close()
	tag := crc32.ChecksumIEEE([]byte(t.Lab + "/" + h.Name))
	// add creates dev in the machine's namespace and moves it into the host's as name.
	add := func(dev *netlink.Vxlan, name string, flood []netip.Addr) error {
		tmp := dev.Name
		if err := ud.LinkAdd(dev); err != nil {
			return fmt.Errorf("build vxlan %s on %s: %w", name, h.Name, err)
		}
		undo.Push("delete vxlan "+tmp, func() error {
			if l, err := ud.LinkByName(tmp); err == nil {
				return ud.LinkDel(l)
			}
			return nil
		})
		l, err := ud.LinkByName(tmp)
		if err == nil {
			err = ud.LinkSetNsFd(l, int(hostFd))
		}
		if err == nil {
			l, err = hd.LinkByName(tmp)
		}
		if err == nil {
			err = hd.LinkSetName(l, name)
		}
		if err != nil {
			return fmt.Errorf("build vxlan %s on %s: move it into %s: %w", name, h.Name, hostName, err)
		}
		for _, dst := range flood {
			fdb := &netlink.Neigh{LinkIndex: l.Attrs().Index, Family: netlinkAFBridge, State: netlink.NUD_PERMANENT,
				Flags: netlink.NTF_SELF, IP: dst.AsSlice(), HardwareAddr: make(net.HardwareAddr, 6)}
			if err := hd.NeighAppend(fdb); err != nil {
				return fmt.Errorf("build vxlan %s on %s: flood to %s: %w", name, h.Name, dst, err)
			}
		}
		return nil
	}
	for i, n := range t.Networks {
		if !n.on(h.Name) || len(n.Hosts) == 1 {
			continue
		}
		var flood []netip.Addr
		for _, o := range t.Hosts {
			if o.Name != h.Name && n.on(o.Name) {
				flood = append(flood, o.Underlay.Addr())
			}
		}
		name := fmt.Sprintf("vx%d", i)
		dev := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("v%07x%d", tag&0xfffffff, i), MTU: 1500 - VXLANOverhead},
			VxlanId: int(n.VNI), SrcAddr: h.Underlay.Addr().AsSlice(), Port: NetworkVXLANPort,
			VtepDevIndex: ul.Attrs().Index, Learning: true}
		if err := add(dev, name, flood); err != nil {
			return err
		}
		if err := hn.SetMaster(name, n.Bridge); err != nil {
			return err
		}
		if err := hn.SetUp(name); err != nil {
			return err
		}
	}
	if t.NoSteering {
		return nil
	}
	dev := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("v%07xs", tag&0xfffffff), MTU: 1500 - VXLANOverhead},
		FlowBased: true, Port: t.steerPort()}
	if err := add(dev, SteerDev, nil); err != nil {
		return err
	}
	return hn.SetUp(SteerDev)
}

const netlinkAFBridge = 7 // AF_BRIDGE

// handleIn opens a netlink handle in the named network namespace; "" is the caller's own
// (a node's agent building its half of a topology on the node's devices).
func handleIn(nsName string) (*netlink.Handle, error) {
	get := func() (netns.NsHandle, error) { return netns.GetFromName(nsName) }
	if nsName == "" { // the caller's own (Topology.UnderlayNS)
		get = netns.Get
	}
	fd, err := get()
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	return netlink.NewHandleAt(fd)
}

func setMAC(nsName, ifname string, mac net.HardwareAddr) error {
	h, err := handleIn(nsName)
	if err != nil {
		return fmt.Errorf("set mac of %s/%s: %w", nsName, ifname, err)
	}
	defer h.Close()
	l, err := h.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("set mac of %s/%s: %w", nsName, ifname, err)
	}
	if err := h.LinkSetHardwareAddr(l, mac); err != nil {
		return fmt.Errorf("set mac of %s/%s: %w", nsName, ifname, err)
	}
	return nil
}

// LinkOf returns a link's ifindex and MAC in a namespace.
// Equivalent to: ip -n NS -o link show IF
func LinkOf(nsName, ifname string) (int, net.HardwareAddr, error) {
	h, err := handleIn(nsName)
	if err != nil {
		return 0, nil, fmt.Errorf("read link %s/%s: %w", nsName, ifname, err)
	}
	defer h.Close()
	l, err := h.LinkByName(ifname)
	if err != nil {
		return 0, nil, fmt.Errorf("read link %s/%s: %w", nsName, ifname, err)
	}
	return l.Attrs().Index, l.Attrs().HardwareAddr, nil
}

// PortLink reads where a netns port is: the ifindex of its veth's end hostIf in its host's
// namespace hostNS (where its steering program sits) and the MAC of its own end ifname in the
// node's namespace nodeNS.
func PortLink(hostNS, hostIf, nodeNS, ifname string) (int, net.HardwareAddr, error) {
	idx, _, err := LinkOf(hostNS, hostIf)
	if err != nil {
		return 0, nil, err
	}
	_, mac, err := LinkOf(nodeNS, ifname)
	if err != nil {
		return 0, nil, err
	}
	return idx, mac, nil
}

// ErrNoHost says a node names a host the topology lacks.
var ErrNoHost = errors.New("unknown host")

// SetRPS steers the receive processing of dev's packets (netif_rx's backlog, where a veth
// delivers) to cores (Receive Packet Steering); no cores leaves it alone. In one kernel a
// packet is otherwise processed end to end on the core that sent it, so an emulated host would
// spend its softirq time on the other host's core.
//
// Equivalent to: ip netns exec NS sh -c 'echo MASK > /sys/class/net/DEV/queues/rx-0/rps_cpus'
func SetRPS(nsName, dev string, cores []int) error {
	if len(cores) == 0 {
		return nil
	}
	mask := rpsMask(cores)
	out, err := exec.Command("ip", "netns", "exec", nsName, "sh", "-c",
		"echo "+mask+" > /sys/class/net/"+dev+"/queues/rx-0/rps_cpus").CombinedOutput()
	if err != nil {
		return fmt.Errorf("steer receive processing of %s/%s to cores %v: %w: %s", nsName, dev, cores, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// rpsMask writes cores as the kernel's hex cpumask, 32-bit words separated by commas.
func rpsMask(cores []int) string {
	top := 0
	for _, c := range cores {
		top = max(top, c)
	}
	words := make([]uint32, top/32+1)
	for _, c := range cores {
		words[c/32] |= 1 << (c % 32)
	}
	var parts []string
	for i := len(words) - 1; i >= 0; i-- {
		parts = append(parts, fmt.Sprintf("%08x", words[i]))
	}
	return strings.Join(parts, ",")
}

// PeerOf returns, for a veth inside an open namespace (a container's), the ifindex of its
// other end in the namespace that end is in (the machine's own, for a container on a Docker
// network) and the veth's own MAC.
// Equivalent to: nsenter --net=NS ip -o link show IF (the @ifN after the name)
func PeerOf(ns *netdev.NS, ifname string) (int, net.HardwareAddr, error) {
	var idx int
	var mac net.HardwareAddr
	err := ns.Do(func() error {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			return err
		}
		if l.Type() != "veth" {
			return fmt.Errorf("%s is a %s, not a veth", ifname, l.Type())
		}
		idx, mac = l.Attrs().ParentIndex, l.Attrs().HardwareAddr
		return nil
	})
	if err == nil && idx == 0 {
		err = fmt.Errorf("%s has no peer index", ifname)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("find the peer of %s in %s: %w", ifname, ns.Name(), err)
	}
	return idx, mac, nil
}

// AddAddr6 turns IPv6 on for a port (the namespace's defaults may have it off), ignores
// router advertisements (addresses and routes are the lab's) and adds addr without duplicate
// address detection, so it is usable at once.
// Equivalent to: sysctl net.ipv6.conf.IF.disable_ipv6=0 net.ipv6.conf.IF.accept_ra=0;
// ip -6 addr add ADDR dev IF nodad
func AddAddr6(ns *netdev.NS, ifname string, addr netip.Prefix) error {
	for _, kv := range [][2]string{{"disable_ipv6", "0"}, {"accept_ra", "0"}} {
		if err := ns.SetSysctl("net.ipv6.conf."+ifname+"."+kv[0], kv[1]); err != nil {
			return err
		}
	}
	return ns.AddAddr(ifname, addr)
}

// PortAt is where a built port is: the ifindex of its veth's host-side end in its host's
// namespace (where its steering program goes) and the MAC of its end in the node.
type PortAt struct {
	Index int              `json:"index"`
	MAC   net.HardwareAddr `json:"mac"`
}

// PortKey keys a port in the map PortLinks returns: NODE/IFNAME.
func PortKey(node, ifname string) string { return node + "/" + ifname }

// PortLinks reads where every veth port of a built topology is (PortLink), by PortKey;
// macvlan and macvtap ports have no host-side end and are left out.
func (t *Topology) PortLinks() (map[string]PortAt, error) {
	out := map[string]PortAt{}
	for _, nd := range t.Nodes {
		if !t.builds(nd.Host) {
			continue
		}
		for _, p := range nd.Ports {
			if p.Macvlan || p.Macvtap {
				continue
			}
			idx, mac, err := PortLink(HostNetns(t.Lab, nd.Host), p.HostIf, NetnsName(t.Lab, nd.Name), p.Ifname)
			if err != nil {
				return nil, err
			}
			out[PortKey(nd.Name, p.Ifname)] = PortAt{Index: idx, MAC: mac}
		}
	}
	return out, nil
}
