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
	var ids []uint32
	for _, h := range p.Hosts {
		ids = append(ids, h.ID)
	}
	b.undo.Push("unpin steering maps", func() error { return steer.Unpin(p.Lab) })
	dp, err := steer.Load(p.Lab, ids)
	if err != nil {
		return fmt.Errorf("load ebpf-redirect: %w", err)
	}
	defer dp.Close()
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
				if err := dp.AttachPort(h.Netns, h.ID, hostIf); err != nil {
					return fmt.Errorf("ebpf-redirect: %w", err)
				}
			}
		}
	}
	if len(p.Hosts) > 1 {
		for _, h := range p.Hosts {
			idx, _, err := hosts.LinkOf(h.Netns, hosts.SteerDev)
			if err != nil {
				return fmt.Errorf("ebpf-redirect: %w", err)
			}
			if err := dp.SetTunnel(h.ID, h.Underlay.Addr(), uint32(idx)); err != nil {
				return fmt.Errorf("ebpf-redirect: %w", err)
			}
			if err := dp.AttachTunnel(h.Netns, h.ID, hosts.SteerDev); err != nil {
				return fmt.Errorf("ebpf-redirect: %w", err)
			}
		}
	}
	tab, err := sfc.Compile(m, bind)
	if err != nil {
		return fmt.Errorf("ebpf-redirect: compile ports: %w", err)
	}
	return dp.Apply(tab)
}
