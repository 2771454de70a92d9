// Package attach holds the attachment drivers that are not a plain veth: macvlan (bridge mode
// on the segment's bridge), host-device (an existing host interface moved into a node, as the
// CNI plugin of that name, and given back at destroy) and sriov (a virtual function of a named
// physical function, MAC and VLAN set by the PF, then moved like a host device). The checks run
// before anything is created; nothing here ever takes the host's uplink or an addressed
// interface.
package attach

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/vishvananda/netlink"
)

// Errors the checks wrap; test them with errors.Is.
var (
	// ErrNoSRIOV: the named PF is not an SR-IOV physical function with VFs.
	ErrNoSRIOV = errors.New("no SR-IOV physical function")
	// ErrRefused: a host-device the driver must not or cannot take.
	ErrRefused = errors.New("host device refused")
)

// AliasPrefix starts the alias (ifalias) of every device sfclab moved into a node:
// "sfclab-host-device:LAB:ORIGINAL-NAME". Destroy finds the devices to give back by it, also
// after a crash and without the lab file.
const AliasPrefix = "sfclab-host-device:"

// Host is what the checks read of the machine.
type Host struct {
	// Sysfs is the sysfs root ("/sys"); tests point it at a fake tree.
	Sysfs string
	// NS is the host's network namespace (where host devices are).
	NS *netdev.NS
}

// Check refuses, before anything is created, a plan whose drivers the host cannot serve: a
// host-device that is missing, is the interface of a default route (the host's uplink) or
// carries an address; an sriov PF that is not an SR-IOV PF with a free VF.
func (h Host) Check(p *plan.Plan) error {
	var errs []error
	for _, n := range p.Nodes {
		if n.Driver == nil {
			continue
		}
		switch n.Driver.Type {
		case spec.DriverHostDevice:
			if err := h.checkHostDevice(n.Driver.Device); err != nil {
				errs = append(errs, fmt.Errorf("node %s: %w", n.Name, err))
			}
		case spec.DriverSRIOV:
			if _, err := h.FindVF(n.Driver.PF, n.Driver.VF); err != nil {
				errs = append(errs, fmt.Errorf("node %s: %w", n.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

func (h Host) checkHostDevice(dev string) error {
	d, err := h.NS.Inspect(dev)
	if err != nil {
		return fmt.Errorf("check host device %s: %w", dev, err)
	}
	switch {
	case !d.Exists:
		return fmt.Errorf("host device %s: %w: no such interface on the host (ip link show %s)", dev, ErrRefused, dev)
	case d.DefaultRoute:
		return fmt.Errorf("host device %s: %w: it is the host's uplink (a default route leaves through it); sfclab never takes the host's connectivity", dev, ErrRefused)
	case d.HasAddress:
		return fmt.Errorf("host device %s: %w: it carries an address; remove it first (ip addr flush dev %s) if the interface is really free", dev, ErrRefused, dev)
	}
	return nil
}

// VF is a virtual function found for a PF.
type VF struct {
	PF     string
	Index  int
	Netdev string // the VF's interface in the host
}

// FindVF finds VF number vf of pf (nil: the first whose netdev is still in the host) by
// sysfs: /sys/class/net/PF/device/sriov_totalvfs, sriov_numvfs, virtfnN/net/NAME.
func (h Host) FindVF(pf string, vf *int) (VF, error) {
	dev := filepath.Join(h.Sysfs, "class/net", pf, "device")
	total, err := readInt(filepath.Join(dev, "sriov_totalvfs"))
	if err != nil || total == 0 {
		return VF{}, fmt.Errorf("driver sriov on pf %s: %w: %s/sriov_totalvfs is missing or 0; %s",
			pf, ErrNoSRIOV, filepath.Join(h.Sysfs, "class/net", pf, "device"), h.pfHint())
	}
	num, _ := readInt(filepath.Join(dev, "sriov_numvfs"))
	if num == 0 {
		return VF{}, fmt.Errorf("driver sriov on pf %s: %w: no VFs enabled (of %d); enable them: echo %d > %s",
			pf, ErrNoSRIOV, total, total, filepath.Join(dev, "sriov_numvfs"))
	}
	for i := 0; i < num; i++ {
		if vf != nil && *vf != i {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(dev, fmt.Sprintf("virtfn%d", i), "net"))
		if err == nil && len(ents) > 0 {
			return VF{PF: pf, Index: i, Netdev: ents[0].Name()}, nil
		}
	}
	if vf != nil {
		return VF{}, fmt.Errorf("driver sriov on pf %s: %w: vf %d has no interface in the host (of %d enabled; taken, or bound to a non-network driver)", pf, ErrNoSRIOV, *vf, num)
	}
	return VF{}, fmt.Errorf("driver sriov on pf %s: %w: all %d enabled VFs are taken", pf, ErrNoSRIOV, num)
}

// pfHint names the SR-IOV PFs of the host, or says there is none.
func (h Host) pfHint() string {
	m, _ := filepath.Glob(filepath.Join(h.Sysfs, "class/net/*/device/sriov_totalvfs"))
	var pfs []string
	for _, f := range m {
		if n, err := readInt(f); err == nil && n > 0 {
			pfs = append(pfs, filepath.Base(filepath.Dir(filepath.Dir(f))))
		}
	}
	if len(pfs) == 0 {
		return "this host has no PF with sriov_totalvfs > 0 (no SR-IOV NIC): use driver macvlan or veth here"
	}
	sort.Strings(pfs)
	return "SR-IOV PFs on this host: " + strings.Join(pfs, ", ")
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// Wire attaches interface iface of node n (ns) by the node's driver: a macvlan on the
// segment's bridge in fabric, or the host device / VF moved in from host. It leaves the
// interface down and unaddressed, as a veth would be.
//
// Equivalent to (macvlan): ip -n FABRIC link add IFACE link BRIDGE netns NODE type macvlan mode bridge;
// (macvtap): the same with type macvtap;
// (host-device): ip link set DEV alias sfclab-host-device:LAB:DEV name IFACE netns NODE;
// (sriov): ip link set PF vf N mac MAC vlan VLAN, then the VF's netdev as a host device.
func Wire(lab string, n *plan.Node, iface *plan.Interface, seg *plan.Segment, fabric, ns, host *netdev.NS, h Host, mtu int) error {
	switch n.Driver.Type {
	case spec.DriverMacvlan:
		return fabric.AddMacvlan(seg.Bridge, ns, iface.Name, mtu)
	case spec.DriverMacvtap:
		return fabric.AddMacvtap(seg.Bridge, ns, iface.Name, mtu)
	case spec.DriverHostDevice:
		return take(lab, n.Driver.Device, iface.Name, ns, host)
	case spec.DriverSRIOV:
		vf, err := h.FindVF(n.Driver.PF, n.Driver.VF)
		if err != nil {
			return err
		}
		if err := configureVF(vf, n.Driver); err != nil {
			return err
		}
		return take(lab, vf.Netdev, iface.Name, ns, host)
	}
	return fmt.Errorf("wire %s of node %s: driver %q is not one of %v", iface.Name, n.Name, n.Driver.Type, spec.Drivers())
}

func take(lab, dev, name string, ns, host *netdev.NS) error {
	return host.MoveLink(dev, ns, name, AliasPrefix+lab+":"+dev)
}

// configureVF sets the VF's MAC and VLAN through its PF.
func configureVF(vf VF, d *spec.Driver) error {
	pf, err := netlink.LinkByName(vf.PF)
	if err != nil {
		return fmt.Errorf("configure vf %d of %s: %w", vf.Index, vf.PF, err)
	}
	if d.MAC != "" {
		mac, _ := net.ParseMAC(d.MAC)
		if err := netlink.LinkSetVfHardwareAddr(pf, vf.Index, mac); err != nil {
			return fmt.Errorf("set mac of vf %d of %s: %w", vf.Index, vf.PF, err)
		}
	}
	if d.VLAN != 0 {
		if err := netlink.LinkSetVfVlan(pf, vf.Index, d.VLAN); err != nil {
			return fmt.Errorf("set vlan of vf %d of %s: %w", vf.Index, vf.PF, err)
		}
	}
	return nil
}

// GiveBack moves every device sfclab took for lab out of ns back to host under its original
// name, and clears the alias. Destroy calls it for every node namespace before deleting it
// (a deleted namespace would destroy a virtual device, and hand a physical one back under the
// node's name).
//
// Equivalent to: ip -n NODE link set IFACE down name ORIG netns 1; ip link set ORIG alias ""
func GiveBack(lab string, ns, host *netdev.NS) error {
	taken, err := ns.Aliased(AliasPrefix + lab + ":")
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range taken {
		orig := strings.TrimPrefix(l.Alias, AliasPrefix+lab+":")
		if l.Name != orig { // renamed in the node first: the node's name may be taken in the host
			if err := ns.RenameLink(l.Name, orig); err != nil {
				errs = append(errs, fmt.Errorf("give %s back to the host: %w", orig, err))
				continue
			}
		}
		if err := ns.MoveLink(orig, host, orig, ""); err != nil {
			errs = append(errs, fmt.Errorf("give %s back to the host: %w", orig, err))
			continue
		}
		if err := host.ClearAlias(orig); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
