package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/sfclab/sfclab/spec"
)

// WriteText prints the plan for people: nodes with interfaces, routes, rules and sysctls,
// then segments and chains. `sfclab deploy --dry-run` shows this.
func (p *Plan) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "lab %s\truntime %s\tsteering %s\tmtu %d\n", p.Lab, p.Runtime, p.Steering, p.MTU)
	if p.Fabric != "" {
		fmt.Fprintf(tw, "fabric namespace %s (bridges)\n", p.Fabric)
	}
	if p.Containers() {
		image := p.Image
		if image == "" {
			image = "sfclab's own (sfclab images build)"
		}
		fmt.Fprintf(tw, "docker image %s, attach %s\n", image, p.Attach)
		for _, pub := range p.Publish {
			fmt.Fprintf(tw, "publish %s:%d -> %s:%d/%s\n", pub.HostIP, pub.HostPort, pub.Node, pub.Port, pub.Protocol)
		}
	} else if p.Image != "" {
		fmt.Fprintf(tw, "image %s\n", p.Image)
	}
	if p.Transparent != nil {
		if err := tw.Flush(); err != nil {
			return err
		}
		return p.Transparent.writeText(w, p)
	}
	p.writeHosts(tw)
	fmt.Fprintf(tw, "\nnodes (%d):\n", len(p.Nodes))
	for _, n := range p.Nodes {
		extra := ""
		if n.Chain != "" {
			extra = " chain " + n.Chain
		}
		if n.Host != "" {
			extra += " host " + n.Host
		}
		fmt.Fprintf(tw, "  %s\t%s %s%s\tnetns %s\n", n.Name, n.Role, kindLabel(n), extra, n.Netns)
		for _, i := range n.Interfaces {
			fmt.Fprintf(tw, "    if %s\t%s\tsegment %s, peer %s%s\n", i.Name, i.Address, i.Segment, i.Peer, driverText(n.Driver))
		}
		for _, r := range n.Routes {
			fmt.Fprintf(tw, "    route %s\t%s\t%s\n", r.Dst, hopsText(r.NextHops), tableText(r.Table))
		}
		for _, r := range n.Rules {
			fmt.Fprintf(tw, "    rule %d\t%s\tlookup %d\n", r.Priority, r.Selector(), r.Table)
		}
		if f := n.Function; f != nil {
			if f.Port != 0 {
				fmt.Fprintf(tw, "    listen %s:%d\t", f.IngressAddr, f.Port)
				var bs []string
				for _, b := range f.Backends {
					bs = append(bs, fmt.Sprintf("%s=%s:%d w%d", b.Name, b.Addr, b.Port, b.Weight))
				}
				fmt.Fprintf(tw, "backends %s\n", strings.Join(bs, " "))
			}
			for _, d := range f.DNAT {
				fmt.Fprintf(tw, "    dnat %s/%d\t-> %s:%d\n", d.Protocol, d.Port, d.To, d.ToPort)
			}
		}
		var sc []string
		for _, s := range n.Sysctls {
			sc = append(sc, s.Key+"="+s.Value)
		}
		if len(sc) > 0 {
			fmt.Fprintf(tw, "    sysctl %s\n", strings.Join(sc, " "))
		}
		for _, r := range n.Run {
			fmt.Fprintf(tw, "    run %s\n", r)
		}
		if n.VM != nil {
			fmt.Fprintf(tw, "    vm %s\n", n.VM.Text())
		}
	}
	fmt.Fprintf(tw, "\nsegments (%d):\n", len(p.Segments))
	for _, s := range p.Segments {
		link := "veth pair"
		if s.Bridge != "" {
			link = "bridge " + s.Bridge
		}
		if s.Gateway.IsValid() {
			link = "docker network, gateway " + s.Gateway.String()
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", s.Name, s.Subnet, link, strings.Join(s.Members, " "))
		if s.Shape != nil {
			fmt.Fprintf(tw, "    shaped\t%s\n", s.Shape)
		}
	}
	fmt.Fprintf(tw, "\nchains (%d):\n", len(p.Chains))
	for _, c := range p.Chains {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Name, strings.Join(c.Path, " -> "))
		var hops []string
		for _, h := range c.Hops {
			hops = append(hops, fmt.Sprintf("%s(%s)[%s]", h.Group, h.Kind, strings.Join(h.Instances, ",")))
		}
		if len(hops) == 0 {
			hops = []string{"none (direct)"}
		}
		fmt.Fprintf(tw, "    hops\t%s\n", strings.Join(hops, " "))
		fmt.Fprintf(tw, "    classifier\t%s\n", classifierText(c))
		target := c.Target.String()
		if c.Port != 0 {
			target = fmt.Sprintf("%s:%d", c.Target, c.Port)
		}
		fmt.Fprintf(tw, "    target\t%s (%s)\n", target, c.TargetNode)
	}
	return tw.Flush()
}

// WriteJSON prints the plan as indented JSON.
func (p *Plan) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(p)
}

func kindLabel(n *Node) string {
	if n.Role == RoleFunction {
		return n.Kind
	}
	return ""
}

func hopsText(hs []NextHop) string {
	var parts []string
	for _, h := range hs {
		s := "via " + h.Via.String() + " dev " + h.Dev
		if len(hs) > 1 {
			s += fmt.Sprintf(" weight %d", h.Weight)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func tableText(t int) string {
	if t == 0 {
		return "table main"
	}
	return fmt.Sprintf("table %d", t)
}

// Selector renders a rule's match in `ip rule` words ("all" when it matches everything).
func (r Rule) Selector() string {
	var parts []string
	if r.Protocol != "" {
		parts = append(parts, "ipproto "+r.Protocol)
	}
	if !r.SrcPort.IsZero() {
		parts = append(parts, "sport "+r.SrcPort.String())
	}
	if !r.DstPort.IsZero() {
		parts = append(parts, "dport "+r.DstPort.String())
	}
	if r.Src.IsValid() {
		parts = append(parts, "from "+r.Src.String())
	}
	if r.Dst.IsValid() {
		parts = append(parts, "to "+r.Dst.String())
	}
	if len(parts) == 0 {
		return "all"
	}
	return strings.Join(parts, " ")
}

func classifierText(c *Chain) string {
	r := Rule{Protocol: c.Classifier.Protocol, SrcPort: c.Classifier.SourcePort, DstPort: c.Classifier.DestinationPort}
	s := r.Selector()
	if c.Classifier.SourcePrefix != "" {
		s += " from " + c.Classifier.SourcePrefix
	}
	if c.Classifier.DestinationPrefix != "" {
		s += " to " + c.Classifier.DestinationPrefix
	}
	return strings.TrimPrefix(s, "all ")
}

// driverText says how an interface is attached when not by veth.
func driverText(d *spec.Driver) string {
	switch {
	case d == nil:
		return ""
	case d.Device != "":
		return ", driver " + d.Type + " (host " + d.Device + ")"
	case d.PF != "":
		return ", driver " + d.Type + " (pf " + d.PF + ")"
	}
	return ", driver " + d.Type
}
