package plan

import (
	"fmt"
	"io"
	"net/netip"

	"github.com/sfclab/sfclab/spec"
)

// Host is an emulated host: a namespace (sfc.LAB.host-NAME) that holds the lab's bridges for
// the nodes placed on it; with several hosts, each has an underlay interface on a bridge
// joining them (its "link") and a VXLAN device per network that spans hosts.
type Host struct {
	Name string `json:"name"`
	ID   uint32 `json:"id"`
	// Netns is the host's namespace; "" is the machine's own (a transparent lab's one host
	// on docker, whose networks are the engine's bridges).
	Netns    string       `json:"netns"`
	Underlay netip.Prefix `json:"underlay,omitzero"`
	// CPUs are the cores every node on the host is confined to ("" = all).
	CPUs string `json:"cpus,omitempty"`
	// Link shapes the host's underlay interface (egress), nil = unshaped.
	Link *spec.Shape `json:"link,omitempty"`
	// Where is the host's place in the lab file (file:line:col), for errors found once the
	// machine is read (a core it does not have).
	Where string `json:"-"`
}

// AllHosts returns the plan's emulated hosts, routed or transparent (nil: none).
func (p *Plan) AllHosts() []*Host {
	if p.Transparent != nil {
		return p.Transparent.Hosts
	}
	return p.Hosts
}

// HostOf returns the host a node runs on, nil when it runs on the machine itself.
func (p *Plan) HostOf(node string) *Host {
	n := p.Node(node)
	if n == nil || n.Host == "" {
		return nil
	}
	for _, h := range p.AllHosts() {
		if h.Name == n.Host {
			return h
		}
	}
	return nil
}

// hosts resolves the lab's hosts: ids from 1 in file order, underlay addresses from
// UnderlayPool when there are several, cores and link shaping.
func (b *builder) hosts() []*Host {
	lab := b.lab
	var out []*Host
	for i, hs := range lab.Hosts {
		h := &Host{Name: hs.Name, ID: uint32(i + 1), Netns: NetnsName(lab.Name, "host-"+hs.Name), CPUs: hs.CPUs,
			Where: (&spec.Error{File: lab.File, Pos: hs.Pos}).Where()}
		if len(lab.Hosts) > 1 {
			a := UnderlayPool.Addr().As4()
			a[3] = byte(i + 1)
			h.Underlay = netip.PrefixFrom(netip.AddrFrom4(a), UnderlayPool.Bits())
		}
		if hs.Link != nil {
			if sh, err := hs.Link.Parse(); err == nil {
				h.Link = &sh
			}
		}
		out = append(out, h)
	}
	return out
}

// routedHosts finishes a routed plan whose nodes are placed on emulated hosts: the bridges
// live in the hosts' namespaces (no fabric namespace), and with several hosts node
// interfaces lose the 50 bytes VXLAN adds on the underlay.
func (b *builder) routedHosts() {
	p := b.plan
	p.Hosts = b.hosts()
	if len(p.Hosts) > 1 {
		p.Underlay = NetnsName(b.lab.Name, "underlay")
		p.MTU = min(p.MTU, 1500-50)
	}
}

// extraText is a host's cores and link shaping for the plan text ("" when it has neither).
func (h *Host) extraText() string {
	out := ""
	if h.CPUs != "" {
		out += "\tcpus " + h.CPUs
	}
	if h.Link != nil {
		out += "\tlink " + h.Link.String()
	}
	return out
}

// writeHosts prints a routed plan's hosts.
func (p *Plan) writeHosts(w io.Writer) {
	if len(p.Hosts) == 0 {
		return
	}
	fmt.Fprintf(w, "\nhosts (%d):\n", len(p.Hosts))
	for _, h := range p.Hosts {
		ul := ""
		if h.Underlay.IsValid() {
			ul = "underlay " + h.Underlay.String()
		}
		fmt.Fprintf(w, "  %s\tid %d\tnetns %s\t%s%s\n", h.Name, h.ID, h.Netns, ul, h.extraText())
	}
	if p.Underlay != "" {
		fmt.Fprintf(w, "  underlay netns %s, vxlan per segment that spans hosts (udp 4789)\n", p.Underlay)
	}
}

// Redirects reports whether any node is attached by the ebpf-redirect driver (the lab then
// loads package steer's programs on those nodes' ports and its hosts' steering devices).
func (p *Plan) Redirects() bool {
	for _, n := range p.Nodes {
		if n.Driver != nil && n.Driver.Type == spec.DriverEBPFRedirect {
			return true
		}
	}
	return false
}
