package deploy

import (
	"fmt"

	"github.com/sfclab/sfclab/hosts"
	"github.com/sfclab/sfclab/sfc"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/steer"
)

// redirects gives a routed lab on emulated hosts its ebpf-redirect attachments: package
// steer's data plane with no chain, every node's port bound (so a redirected packet finds its
// destination's namespace), the port program on the host-side end of every ebpf-redirect
// node's port, and the tunnel program on every host's steering VXLAN device. IPv4 from those
// ports then skips the bridge: bpf_redirect_peer into the destination on the same host, or
// the steering tunnel to its host; the rest (ARP) takes the bridge.
func (b *build) redirects() error {
	p := b.p
	a := steer.Attachment{}
	for _, h := range p.Hosts {
		a.Hosts = append(a.Hosts, h.ID)
	}
	b.undo.Push("unpin steering maps", func() error { return steer.Unpin(p.Lab) })
	port := map[string]string{} // node/ifname -> host-side port
	for _, s := range p.Segments {
		for i, m := range s.Members {
			if i < len(s.Ports) {
				port[m] = s.Ports[i]
			}
		}
	}
	m := &sfc.Model{}
	bind := map[string]sfc.Binding{}
	for _, n := range p.Nodes {
		h := p.HostOf(n.Name)
		if h == nil || (n.Driver != nil && n.Driver.Type != spec.DriverEBPFRedirect) {
			continue // macvlan has no port of its own to attach to or to deliver into
		}
		for _, i := range n.Interfaces {
			hostIf := port[n.Name+"/"+i.Name]
			idx, _, err := hosts.LinkOf(h.Netns, hostIf)
			if err != nil {
				return fmt.Errorf("ebpf-redirect: %w", err)
			}
			_, mac, err := hosts.LinkOf(n.Netns, i.Name)
			if err != nil {
				return fmt.Errorf("ebpf-redirect: %w", err)
			}
			name := n.Name + "." + i.Name
			m.Ports = append(m.Ports, sfc.Port{Name: name, Node: n.Name, Network: i.Segment, Host: h.Name, IP: i.Address.Addr()})
			bind[name] = sfc.Binding{Host: h.ID, Ifindex: uint32(idx), MAC: mac, IP: i.Address.Addr()}
			if n.Driver != nil && n.Driver.Type == spec.DriverEBPFRedirect {
				a.Ports = append(a.Ports, steer.PortAttachment{NS: h.Netns, Host: h.ID, Ifname: hostIf})
			}
		}
	}
	if len(p.Hosts) > 1 {
		for _, h := range p.Hosts {
			a.Tunnels = append(a.Tunnels, steer.TunnelAttachment{NS: h.Netns, Host: h.ID, Underlay: h.Underlay.Addr(), Ifname: hosts.SteerDev})
		}
	}
	if err := steer.Install(p.Lab, a); err != nil {
		return fmt.Errorf("ebpf-redirect: %w", err)
	}
	tab, err := sfc.Compile(m, bind)
	if err != nil {
		return fmt.Errorf("ebpf-redirect: compile ports: %w", err)
	}
	dp, err := steer.Open(p.Lab)
	if err != nil {
		return fmt.Errorf("ebpf-redirect: %w", err)
	}
	defer dp.Close()
	return dp.Apply(tab)
}
