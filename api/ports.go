package api

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
)

// Journal is what the API reads of the lab journal: which labs are deployed and their plans.
// journal.Journal implements it.
type Journal interface {
	Labs() ([]string, error)
	ReadState(lab string) (*journal.State, error)
	ReadPlan(lab string) (*plan.Plan, error)
	Dir(lab string) string
}

// idSpace is the UUIDv5 namespace of every id sfclab derives from names, so that a port keeps
// its id across restarts of `sfclab serve` (and across redeploys of the same lab file).
var idSpace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/sfclab/sfclab/api"))

// stableID is the UUIDv5 of kind and name in sfclab's namespace.
func stableID(kind, name string) string {
	return uuid.NewSHA1(idSpace, []byte(kind+":"+name)).String()
}

// PortID is the id of interface iface of node in lab: UUIDv5 of "port:LAB/NODE/IFACE".
func PortID(lab, node, iface string) string { return stableID("port", lab+"/"+node+"/"+iface) }

// NetworkID is the id of a lab's segment: UUIDv5 of "network:LAB/SEGMENT".
func NetworkID(lab, segment string) string { return stableID("network", lab+"/"+segment) }

// SubnetID is the id of a segment's subnet: UUIDv5 of "subnet:LAB/SEGMENT".
func SubnetID(lab, segment string) string { return stableID("subnet", lab+"/"+segment) }

// SubnetID6 is the id of a transparent lab network's IPv6 subnet: UUIDv5 of
// "subnet:LAB/NETWORK/ipv6".
func SubnetID6(lab, network string) string { return stableID("subnet", lab+"/"+network+"/ipv6") }

// DeviceID is the id of a node as the device its ports are bound to: UUIDv5 of
// "device:LAB/NODE". A port pair's ingress and egress must have the same one.
func DeviceID(lab, node string) string { return stableID("device", lab+"/"+node) }

// PortName is the Neutron name of a node's interface: NODE-IFACE (e.g. f1-in, client-eth0).
func PortName(node, iface string) string { return node + "-" + iface }

// projectID is the project every resource belongs to (there is no Keystone).
var projectID = uuid.NewSHA1(idSpace, []byte("project:sfclab")).String()

// FixedIP is an address of a port.
type FixedIP struct {
	SubnetID  string `json:"subnet_id"`
	IPAddress string `json:"ip_address"`
}

// Port is a Neutron port: one interface of one node of a deployed lab.
type Port struct {
	ID            string    `json:"id"`
	Name          string    `json:"name"`
	Description   string    `json:"description"`
	NetworkID     string    `json:"network_id"`
	MACAddress    string    `json:"mac_address"`
	FixedIPs      []FixedIP `json:"fixed_ips"`
	DeviceID      string    `json:"device_id"`
	DeviceOwner   string    `json:"device_owner"`
	Status        string    `json:"status"`
	AdminStateUp  bool      `json:"admin_state_up"`
	TenantID      string    `json:"tenant_id"`
	ProjectID     string    `json:"project_id"`
	BindingHostID string    `json:"binding:host_id"`
	// SfclabLab is the lab the port belongs to (sfclab's own attribute, filterable with
	// ?sfclab:lab=LAB; binding:host_id is the emulated host on transparent labs).
	SfclabLab string `json:"sfclab:lab"`

	// Where the port is, for the data plane.
	Lab     string       `json:"-"`
	Node    string       `json:"-"`
	Netns   string       `json:"-"`
	Iface   string       `json:"-"`
	Segment string       `json:"-"`
	Addr    netip.Prefix `json:"-"`
	Addr6   netip.Prefix `json:"-"` // a transparent lab's ports are dual-stack
}

// Network is a Neutron network: one segment (L2 network) of a deployed lab.
type Network struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	Subnets      []string `json:"subnets"`
	Status       string   `json:"status"`
	AdminStateUp bool     `json:"admin_state_up"`
	Shared       bool     `json:"shared"`
	External     bool     `json:"router:external"`
	MTU          int      `json:"mtu"`
	TenantID     string   `json:"tenant_id"`
	ProjectID    string   `json:"project_id"`
}

// Subnet is a Neutron subnet: a segment's address range.
type Subnet struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	NetworkID string `json:"network_id"`
	CIDR      string `json:"cidr"`
	IPVersion int    `json:"ip_version"`
	TenantID  string `json:"tenant_id"`
	ProjectID string `json:"project_id"`
}

// labPorts is the Neutron view of one deployed lab.
type labPorts struct {
	lab      string
	started  time.Time
	ports    []*Port
	networks []*Network
	subnets  []*Subnet
}

// readLabPorts builds the Neutron view of a ready lab from its plan; MAC addresses are read
// from the interfaces (netns runtime), "" where the namespace cannot be opened.
//
// Equivalent to: ip -n sfc.LAB.NODE link show IFACE (for the MAC)
func readLabPorts(j Journal, lab string, st *journal.State) (*labPorts, error) {
	p, err := j.ReadPlan(lab)
	if err != nil {
		return nil, fmt.Errorf("read ports of lab %s: %w", lab, err)
	}
	lp := &labPorts{lab: lab, started: st.Started}
	if tp := p.Transparent; tp != nil {
		// Transparent: the lab's networks (present on every emulated host) and every node's
		// ports, bound to the emulated host the node sits on.
		for _, tn := range tp.Networks {
			lp.addNetwork(tn.Name, tn.Subnet, p.MTU)
			lp.addSubnet6(tn.Name, tn.Subnet6)
		}
		for _, node := range tp.Nodes {
			macs := readMACs(node.Netns)
			for _, pt := range node.Ports {
				port := lp.addPort(node.Name, node.Role, node.Netns, node.Host, pt.Ifname, pt.Network, pt.Address, macs)
				if pt.Address6.IsValid() {
					port.Addr6 = pt.Address6
					port.FixedIPs = append(port.FixedIPs, FixedIP{SubnetID: SubnetID6(lab, pt.Network), IPAddress: pt.Address6.Addr().String()})
				}
			}
		}
	} else {
		for _, s := range p.Segments {
			lp.addNetwork(s.Name, s.Subnet, p.MTU)
		}
		for _, node := range p.Nodes {
			macs := readMACs(node.Netns)
			for _, ifc := range node.Interfaces {
				lp.addPort(node.Name, node.Role, node.Netns, lab, ifc.Name, ifc.Segment, ifc.Address, macs)
			}
		}
	}
	sort.SliceStable(lp.ports, func(a, b int) bool { return lp.ports[a].Name < lp.ports[b].Name })
	return lp, nil
}

// addNetwork adds a network (a segment, or a transparent lab's network) and its subnet.
func (lp *labPorts) addNetwork(name string, subnet netip.Prefix, mtu int) {
	n := &Network{ID: NetworkID(lp.lab, name), Name: name, Description: "lab " + lp.lab,
		Status: "ACTIVE", AdminStateUp: true, MTU: mtu, TenantID: projectID, ProjectID: projectID}
	if subnet.IsValid() {
		sn := &Subnet{ID: SubnetID(lp.lab, name), Name: name, NetworkID: n.ID, CIDR: subnet.String(),
			IPVersion: 4, TenantID: projectID, ProjectID: projectID}
		if subnet.Addr().Is6() {
			sn.IPVersion = 6
		}
		n.Subnets = append(n.Subnets, sn.ID)
		lp.subnets = append(lp.subnets, sn)
	}
	lp.networks = append(lp.networks, n)
}

// addPort adds one interface of a node as a port on its network, bound to host (the lab, or
// a transparent lab's emulated host).
func (lp *labPorts) addPort(node, role, netns, host, iface, network string, addr netip.Prefix, macs map[string]string) *Port {
	port := &Port{
		ID: PortID(lp.lab, node, iface), Name: PortName(node, iface),
		Description: fmt.Sprintf("lab %s node %s interface %s", lp.lab, node, iface),
		NetworkID:   NetworkID(lp.lab, network), MACAddress: macs[iface],
		DeviceID: DeviceID(lp.lab, node), DeviceOwner: "sfclab:" + role,
		Status: "ACTIVE", AdminStateUp: true, TenantID: projectID, ProjectID: projectID,
		BindingHostID: host, SfclabLab: lp.lab,
		Lab: lp.lab, Node: node, Netns: netns, Iface: iface, Segment: network, Addr: addr,
	}
	port.FixedIPs = []FixedIP{}
	if addr.IsValid() {
		port.FixedIPs = append(port.FixedIPs, FixedIP{SubnetID: SubnetID(lp.lab, network), IPAddress: addr.Addr().String()})
	}
	lp.ports = append(lp.ports, port)
	return port
}

// addSubnet6 adds a transparent lab network's IPv6 subnet (ip_version 6) to the network added
// last; nothing for a zero prefix (a plan from before labs were dual-stack).
func (lp *labPorts) addSubnet6(name string, subnet netip.Prefix) {
	if !subnet.IsValid() || len(lp.networks) == 0 {
		return
	}
	n := lp.networks[len(lp.networks)-1]
	sn := &Subnet{ID: SubnetID6(lp.lab, name), Name: name + "-v6", NetworkID: n.ID, CIDR: subnet.String(),
		IPVersion: 6, TenantID: projectID, ProjectID: projectID}
	n.Subnets = append(n.Subnets, sn.ID)
	lp.subnets = append(lp.subnets, sn)
}

// readMACs maps a namespace's interface names to their MAC addresses; empty when the
// namespace does not exist (a docker node, or a lab being destroyed).
func readMACs(ns string) map[string]string {
	out := map[string]string{}
	if ns == "" {
		return out
	}
	h, err := netdev.OpenNS(ns)
	if err != nil {
		return out
	}
	defer h.Close()
	links, err := h.Links()
	if err != nil {
		return out
	}
	for _, l := range links {
		out[l.Name] = l.MAC
	}
	return out
}

// isNotDeployed reports a lab that vanished between listing and reading.
func isNotDeployed(err error) bool { return errors.Is(err, journal.ErrNotDeployed) }
