package steer

import (
	"fmt"
	"net/netip"
)

// Attachment is where a lab's steering programs go on one machine: a program copy per
// emulated host, attached at the host-side end of every port's veth and, with several hosts,
// at each host's collect_md VXLAN device. It is plain data, so that what deploy computes can be
// sent to the machine that holds the ports (the kubernetes runtime's agent).
type Attachment struct {
	Hosts   []uint32           `json:"hosts"`
	Ports   []PortAttachment   `json:"ports"`
	Tunnels []TunnelAttachment `json:"tunnels,omitempty"`
}

// PortAttachment is one port: the host-side end Ifname of its veth in namespace NS ("" is the
// machine's own), steered by host Host's program.
type PortAttachment struct {
	NS     string `json:"ns"`
	Host   uint32 `json:"host"`
	Ifname string `json:"ifname"`
}

// TunnelAttachment is one host's steering VXLAN device Ifname in namespace NS, and the host's
// address on the underlay. Remote: the host is on another machine (a Kubernetes node's part
// of a lab): only its underlay address is recorded, for the local host's program to send to.
type TunnelAttachment struct {
	NS       string     `json:"ns"`
	Host     uint32     `json:"host"`
	Underlay netip.Addr `json:"underlay"`
	Ifname   string     `json:"ifname"`
	Remote   bool       `json:"remote,omitempty"`
}

// Install loads the lab's data plane (maps pinned under PinDir(lab), a program per host of a),
// attaches the programs to every port and tunnel of a and records each host's tunnel in the
// maps. The chains' tables are written afterwards, through the pinned maps (Open, Apply).
// Undo is Unpin (and, for ports in the machine's own namespace, Detach).
// Equivalent to: bpftool prog loadall ... pinmaps PinDir(lab); ip netns exec NS bpftool net
// attach tcx_ingress ... dev IF (per port and tunnel); bpftool map update name tunnels ...
func Install(lab string, a Attachment) error {
	dp, err := Load(lab, a.Hosts)
	if err != nil {
		return err
	}
	defer dp.Close()
	for _, p := range a.Ports {
		if err := dp.AttachPort(p.NS, p.Host, p.Ifname); err != nil {
			return err
		}
	}
	for _, t := range a.Tunnels {
		if t.Remote {
			if err := dp.SetTunnel(t.Host, t.Underlay, 0); err != nil {
				return err
			}
			continue
		}
		h, err := handleIn(t.NS)
		if err != nil {
			return fmt.Errorf("attach steering to tunnel %s/%s: %w", t.NS, t.Ifname, err)
		}
		l, err := h.LinkByName(t.Ifname)
		h.Close()
		if err != nil {
			return fmt.Errorf("attach steering to tunnel %s/%s: %w", t.NS, t.Ifname, err)
		}
		if err := dp.SetTunnel(t.Host, t.Underlay, uint32(l.Attrs().Index)); err != nil {
			return err
		}
		if err := dp.AttachTunnel(t.NS, t.Host, t.Ifname); err != nil {
			return err
		}
	}
	return nil
}
