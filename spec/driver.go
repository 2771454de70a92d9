package spec

import (
	"net"

	"go.yaml.in/yaml/v3"
)

// Attachment drivers: how an endpoint's interface is attached to its network.
const (
	// DriverVeth is a veth pair to the segment (a bridge port, or the peer's end): the default.
	DriverVeth = "veth"
	// DriverMacvlan is a macvlan device in bridge mode on the segment's bridge (on an emulated
	// host: the host's uplink), the container analogue of study D's macvtap.
	DriverMacvlan = "macvlan"
	// DriverMacvtap is a macvtap device in bridge mode on the segment's bridge: study D's
	// "Linux Bridge via macvtap" device itself. For a namespace or container it carries what
	// a macvlan does: nobody opens its character device, and a macvtap whose character device
	// is not open hands every frame to the node's stack (measured: docs/lab-file.md, "Drivers").
	DriverMacvtap = "macvtap"
	// DriverHostDevice moves an existing host interface into the node, as the CNI plugin of
	// that name; it is given back at destroy.
	DriverHostDevice = "host-device"
	// DriverSRIOV moves a virtual function of a named physical function into the node, with
	// its MAC and VLAN set on the PF.
	DriverSRIOV = "sriov"
	// DriverEBPFRedirect is a veth to the host's bridge with the tc program of package steer
	// on its host-side end: IPv4 skips the bridge, straight into the destination's namespace
	// (bpf_redirect_peer) on the same emulated host, or through the host's steering VXLAN
	// device to the destination's host; ARP and the rest take the bridge. Needs hosts:.
	DriverEBPFRedirect = "ebpf-redirect"
)

// Drivers lists the attachment drivers.
func Drivers() []string {
	return []string{DriverVeth, DriverMacvlan, DriverMacvtap, DriverHostDevice, DriverSRIOV, DriverEBPFRedirect}
}

// Driver is an endpoint's attachment driver: `driver: macvlan`, or a mapping with settings
// (`driver: {type: host-device, device: eth5}`).
type Driver struct {
	// Type is one of Drivers(); default veth.
	Type string `yaml:"type" json:"type"`
	// Device is the host interface a host-device driver takes.
	Device string `yaml:"device,omitempty" json:"device,omitempty"`
	// PF is the physical function whose VF an sriov driver takes.
	PF string `yaml:"pf,omitempty" json:"pf,omitempty"`
	// VF is the VF's number (default: the first VF whose netdev is still in the host).
	VF *int `yaml:"vf,omitempty" json:"vf,omitempty"`
	// VLAN is set on the VF by the PF (0: none).
	VLAN int `yaml:"vlan,omitempty" json:"vlan,omitempty"`
	// MAC is set on the VF by the PF ("": keep).
	MAC string `yaml:"mac,omitempty" json:"mac,omitempty"`

	Pos Pos `yaml:"-" json:"-"`
}

// UnmarshalYAML reads `driver: NAME` or the mapping form.
func (d *Driver) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*d = Driver{Type: n.Value, Pos: pos(n)}
		return nil
	}
	type plain Driver
	return decodeAt(n, (*plain)(d), &d.Pos)
}

// DriverType is the endpoint's driver type (veth when none is given).
func (e *Endpoint) DriverType() string {
	if e.Driver == nil || e.Driver.Type == "" {
		return DriverVeth
	}
	return e.Driver.Type
}

// driver checks an endpoint's driver settings (what needs no look at the host).
func (v *validator) driver(name string, e *Endpoint) {
	d := e.Driver
	if d == nil {
		return
	}
	p := d.Pos
	if d.Type == "" {
		d.Type = DriverVeth
	}
	onlyFor := func(field string, set bool, types ...string) {
		if !set {
			return
		}
		for _, t := range types {
			if d.Type == t {
				return
			}
		}
		v.bad(p, "endpoint %q: driver %s has no %s (it is for %v)", name, d.Type, field, types)
	}
	onlyFor("device", d.Device != "", DriverHostDevice)
	onlyFor("pf", d.PF != "", DriverSRIOV)
	onlyFor("vf", d.VF != nil, DriverSRIOV)
	onlyFor("vlan", d.VLAN != 0, DriverSRIOV)
	onlyFor("mac", d.MAC != "", DriverSRIOV)
	switch d.Type {
	case DriverVeth, DriverMacvlan, DriverMacvtap:
	case DriverEBPFRedirect:
		if len(v.lab.Hosts) == 0 {
			v.bad(p, "endpoint %q: driver ebpf-redirect needs hosts: (its program sits on the host side of the node's port, on an emulated host's bridge); add hosts: [h1] and host: h1", name)
		}
	case DriverHostDevice:
		if d.Device == "" {
			v.bad(p, "endpoint %q: driver host-device needs device: the host interface to move into the node", name)
		}
	case DriverSRIOV:
		if d.PF == "" {
			v.bad(p, "endpoint %q: driver sriov needs pf: the physical function (a NIC port with sriov_totalvfs > 0) whose VF the node gets", name)
		}
		if d.VLAN < 0 || d.VLAN > 4094 {
			v.bad(p, "endpoint %q: vlan %d is outside 0-4094", name, d.VLAN)
		}
		if d.VF != nil && *d.VF < 0 {
			v.bad(p, "endpoint %q: vf %d is negative", name, *d.VF)
		}
		if d.MAC != "" {
			if hw, err := net.ParseMAC(d.MAC); err != nil || len(hw) != 6 || hw[0]&1 == 1 {
				v.bad(p, "endpoint %q: mac %q is not a unicast Ethernet address like 02:00:00:00:00:01", name, d.MAC)
			}
		}
	default:
		v.bad(p, "endpoint %q: driver %q is not one of %v", name, d.Type, Drivers())
		return
	}
	if (d.Type == DriverHostDevice || d.Type == DriverSRIOV) && e.Instances > 1 {
		v.bad(p, "endpoint %q: driver %s gives one device; it cannot serve %d instances", name, d.Type, e.Instances)
	}
}

// String is the driver as written in a plan.
func (d *Driver) String() string {
	if d == nil {
		return DriverVeth
	}
	return d.Type
}
