package docker

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// LabelExported marks what a compose file exported from a lab creates (with the lab's name);
// sfclab never removes those: docker-compose down does.
const LabelExported = "sfclab.exported-from"

// ComposeVersion is the compose file format written: 2.4 is read by docker-compose v1 (as
// Debian ships it) and `docker compose` v2, and keeps ipam gateways and sysctls.
const ComposeVersion = "2.4"

type composeFile struct {
	Version  string                    `yaml:"version"`
	Services map[string]composeService `yaml:"services"`
	Networks map[string]composeNetwork `yaml:"networks"`
}

type composeService struct {
	Image    string                     `yaml:"image"`
	Hostname string                     `yaml:"hostname"`
	Init     bool                       `yaml:"init"`
	CapAdd   []string                   `yaml:"cap_add"`
	Labels   map[string]string          `yaml:"labels"`
	Sysctls  map[string]string          `yaml:"sysctls,omitempty"`
	Networks map[string]composeEndpoint `yaml:"networks"`
	Ports    []string                   `yaml:"ports,omitempty"`
	Volumes  []string                   `yaml:"volumes,omitempty"`
	Cpuset   string                     `yaml:"cpuset,omitempty"`
	Command  []string                   `yaml:"command"`
}

type composeEndpoint struct {
	IPv4Address string `yaml:"ipv4_address"`
}

type composeNetwork struct {
	Driver     string            `yaml:"driver"`
	DriverOpts map[string]string `yaml:"driver_opts"`
	Labels     map[string]string `yaml:"labels"`
	IPAM       composeIPAM       `yaml:"ipam"`
}

type composeIPAM struct {
	Config []composeSubnet `yaml:"config"`
}

type composeSubnet struct {
	Subnet  string `yaml:"subnet"`
	Gateway string `yaml:"gateway"`
}

// ComposeOptions is what an export needs beyond the plan.
type ComposeOptions struct {
	// Executable is the host's sfclab program, bind-mounted read-only at SfclabPath into the
	// containers whose function runs it (l4lb impl sfclab); "" is the running executable.
	Executable string
}

// Export is a lab exported for plain Docker tools: the compose file and the files beside it
// that its services mount (an sfclab balancer's configuration).
type Export struct {
	Compose []byte
	Files   []ExportFile
}

// ExportFile is a file written beside the compose file; Name has no directory.
type ExportFile struct {
	Name string
	Data []byte
}

// Write writes the compose file at path and its files beside it, in the same directory (the
// compose file mounts them by paths relative to its own directory).
// Equivalent to: sfclab export --format compose -o PATH LAB.yaml
func (e *Export) Write(path string) error {
	dir := filepath.Dir(path)
	for _, f := range e.Files {
		name := filepath.Join(dir, f.Name)
		if err := os.WriteFile(name, f.Data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	if err := os.WriteFile(path, e.Compose, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Compose writes the lab's compose file to w (see ComposeExport). A lab whose nodes read files
// beside the compose file (l4lb impl sfclab) is refused: write it with Export.Write.
func Compose(w io.Writer, p *plan.Plan) error {
	e, err := ComposeExport(p, ComposeOptions{})
	if err != nil {
		return err
	}
	if len(e.Files) > 0 {
		names := make([]string, len(e.Files))
		for i, f := range e.Files {
			names[i] = f.Name
		}
		return fmt.Errorf("export lab %s: %w (%s): write it to a file with -o FILE", p.Lab, ErrNeedsDir, strings.Join(names, ", "))
	}
	if _, err := w.Write(e.Compose); err != nil {
		return fmt.Errorf("write compose file: %w", err)
	}
	return nil
}

// ErrNeedsDir is returned when an export has files beside the compose file but was asked for
// the compose file alone.
var ErrNeedsDir = errors.New("its nodes read files written beside the compose file")

// ComposeExport renders a docker-compose file that brings the plan up with plain Docker tools,
// as study A's authors worked: a service per node (the plan's image, NET_ADMIN and NET_RAW,
// the node's sysctls, one network per segment with the plan's address) whose command is a
// shell script generated from the plan (NodeScript): it finds its interfaces by address (it
// renames nothing), deletes the default route, adds the plan's routes and policy rules, loads
// the function's configuration and then runs `sleep infinity` or the function's daemon.
// Networks have the plan's subnet and gateway. In routed mode they are plain bridges without
// masquerading, not internal: a compose file cannot add the DOCKER-USER rule that lets a
// chain's traffic cross an internal network's bridge (see hostfw.go). In nat mode the
// published ports are published on the source's network, which masquerades as the engine's
// default does; a compose file cannot add sfclab's nat PREROUTING rule either, so there the
// source's connections to the published port go through the engine's userland proxy
// (docker-proxy, the target sees the gateway as their source) where `sfclab deploy` sends
// them through the kernel's DNAT (see hostfw.go). A node whose function runs sfclab itself
// (l4lb impl sfclab) gets the host's sfclab executable bind-mounted read-only at SfclabPath, as
// deploy does, and the files its kind asks for (vnf.ComposeFiler: the balancer's
// configuration), which the export writes beside the compose file as LAB.NODE.NAME and the
// service mounts read-only.
//
// What a compose file can carry is written and said in its header: a segment's shaping as tc
// commands in each member's script (egress, as deploy shapes it), and a lab on one emulated
// host as this machine with the host's cores as every container's cpuset. What it cannot is
// refused with an error naming it, never dropped: several emulated hosts (ErrComposeHosts),
// an attachment driver other than veth (ErrComposeDriver), a VM node (ErrComposeVM),
// transparent steering (ErrTransparentExport).
// Equivalent to: sfclab export --format compose -o compose.yaml LAB.yaml; docker-compose -f compose.yaml up -d
func ComposeExport(p *plan.Plan, opts ComposeOptions) (*Export, error) {
	if p.Transparent != nil {
		return nil, fmt.Errorf("export lab %s: %w", p.Lab, ErrTransparentExport)
	}
	host, err := composeHost(p)
	if err != nil {
		return nil, err
	}
	for _, n := range p.Nodes {
		if n.Driver != nil && n.Driver.Type != "" && n.Driver.Type != spec.DriverVeth {
			return nil, fmt.Errorf("export lab %s: node %s: %w: driver %s; export it with the default driver (veth), or deploy it with sfclab deploy", p.Lab, n.Name, ErrComposeDriver, n.Driver.Type)
		}
		if n.VM != nil {
			return nil, fmt.Errorf("export lab %s: node %s: %w; remove its vm: to export it as a container, or deploy it with sfclab deploy", p.Lab, n.Name, ErrComposeVM)
		}
	}
	f := composeFile{Version: ComposeVersion, Services: map[string]composeService{}, Networks: map[string]composeNetwork{}}
	lbl := map[string]string{LabelExported: p.Lab}
	for _, s := range p.Segments {
		drv := map[string]string{"com.docker.network.driver.mtu": fmt.Sprint(mtu(p))}
		if !published(p, s) {
			drv["com.docker.network.bridge.enable_ip_masquerade"] = "false"
		}
		gw, err := composeGateway(p, s)
		if err != nil {
			return nil, err
		}
		f.Networks[s.Name] = composeNetwork{Driver: "bridge", DriverOpts: drv, Labels: lbl,
			IPAM: composeIPAM{Config: []composeSubnet{{Subnet: s.Subnet.Masked().String(), Gateway: gw.String()}}}}
	}
	e := &Export{}
	var selfRunners []string
	for _, n := range p.Nodes {
		script, err := NodeScript(p, n)
		if err != nil {
			return nil, err
		}
		svc := composeService{
			Image: Image(p), Hostname: n.Name, Init: true, CapAdd: []string{"NET_ADMIN", "NET_RAW"},
			Labels:   map[string]string{LabelExported: p.Lab, LabelNode: n.Name},
			Sysctls:  map[string]string{},
			Networks: map[string]composeEndpoint{},
			// compose interpolates $VAR in the file: $$ is a literal $.
			Command: []string{"/bin/sh", "-c", strings.ReplaceAll(script, "$", "$$")},
		}
		for _, sc := range n.Sysctls {
			svc.Sysctls[sc.Key] = sc.Value
		}
		if host != nil && n.Host == host.Name {
			svc.Cpuset = host.CPUs
		}
		for _, i := range n.Interfaces {
			svc.Networks[i.Segment] = composeEndpoint{IPv4Address: i.Address.Addr().String()}
		}
		for _, pub := range p.Publish {
			if pub.Node == n.Name {
				svc.Ports = append(svc.Ports, fmt.Sprintf("%s:%d:%d/%s", pub.HostIP, pub.HostPort, pub.Port, pub.Protocol))
			}
		}
		if RunsSfclab(n) {
			exe, err := Runtime{Executable: opts.Executable}.executable()
			if err != nil {
				return nil, err
			}
			if strings.ContainsAny(exe, ":,") {
				return nil, fmt.Errorf("export node %s: the sfclab program %s cannot be a compose volume (its path has ':' or ',')", n.Name, exe)
			}
			svc.Volumes = append(svc.Volumes, exe+":"+SfclabPath+":ro")
			selfRunners = append(selfRunners, n.Name)
		}
		files, err := composeFiles(p, n)
		if err != nil {
			return nil, err
		}
		for _, cf := range files {
			svc.Volumes = append(svc.Volumes, "./"+cf.Name+":"+cf.Path+":ro")
			e.Files = append(e.Files, ExportFile{Name: cf.Name, Data: cf.Data})
		}
		f.Services[n.Name] = svc
	}
	var data bytes.Buffer
	fmt.Fprintf(&data, "# Lab %s exported by sfclab (attach %s): bring it up with plain Docker tools.\n"+
		"#   docker-compose -p %s -f THIS_FILE up -d; docker-compose -p %s -f THIS_FILE down\n"+
		"# Image %s: build it with `sfclab images build`, or use any image with\n# %s.\n",
		p.Lab, attach(p), p.Lab, p.Lab, Image(p), strings.Join(Packages(), ", "))
	if len(selfRunners) > 0 {
		fmt.Fprintf(&data, "# Run the host's sfclab program, mounted read-only (see their volumes): %s.\n"+
			"# It must be at that path and run in the image (same libc, or built with CGO_ENABLED=0).\n", strings.Join(selfRunners, ", "))
	}
	if len(p.Publish) > 0 {
		data.WriteString("# Published ports: the chain's source sits on the same bridge as the published address,\n" +
			"# so here the engine's userland proxy (docker-proxy) carries its connections and the target\n" +
			"# sees the gateway as their source; `sfclab deploy` adds a host nat rule (a compose file\n" +
			"# cannot) so that the kernel's DNAT carries them, as for a client outside the host.\n")
	}
	for _, ef := range e.Files {
		fmt.Fprintf(&data, "# Reads ./%s, written beside this file.\n", ef.Name)
	}
	if host != nil {
		fmt.Fprintf(&data, "# Emulated host %s is written as this machine: its nodes' networks are Docker bridges here\n"+
			"# (sfclab deploy puts them in the host's own namespace)", host.Name)
		if host.CPUs != "" {
			fmt.Fprintf(&data, ", and its containers are confined to\n# cores %s (cpuset), as deploy confines them", host.CPUs)
		}
		data.WriteString(".\n")
	}
	for _, s := range p.Segments {
		if s.Shape != nil {
			fmt.Fprintf(&data, "# Segment %s is shaped (%s) by tc in its members' containers, on each member's egress", s.Name, s.Shape)
			if s.Shape.NeedsNetem() {
				data.WriteString(";\n# delay, jitter and loss need the kernel's netem (module sch_netem)")
			}
			data.WriteString(".\n")
		}
	}
	enc := yaml.NewEncoder(&data)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("encode compose file: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode compose file: %w", err)
	}
	e.Compose = data.Bytes()
	return e, nil
}

// composeFiles are the files a node's function reads in an exported container, named
// LAB.NODE.NAME beside the compose file.
func composeFiles(p *plan.Plan, n *plan.Node) ([]vnf.ComposeFile, error) {
	if n.Function == nil {
		return nil, nil
	}
	k, err := kinds.Get(n.Function.Kind)
	if err != nil {
		return nil, err
	}
	cf, ok := k.(vnf.ComposeFiler)
	if !ok {
		return nil, nil
	}
	files, err := cf.ComposeFiles(n.Function)
	if err != nil {
		return nil, fmt.Errorf("export node %s: %w", n.Name, err)
	}
	for i := range files {
		if files[i].Name == "" || strings.ContainsAny(files[i].Name, "/:,") || !filepath.IsAbs(files[i].Path) {
			return nil, fmt.Errorf("export node %s: kind %s asks for file %q at %q: want a plain name and an absolute path", n.Name, n.Function.Kind, files[i].Name, files[i].Path)
		}
		files[i].Name = p.Lab + "." + n.Name + "." + files[i].Name
	}
	return files, nil
}

func attach(p *plan.Plan) string {
	if p.Attach == "" {
		return AttachRouted
	}
	return p.Attach
}

// ifVar is the shell variable holding the container's name of a plan interface.
func ifVar(name string) string {
	return "IF_" + strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, name)
}

// placeholder stands for an interface name in rendered rules until it becomes ${IF_NAME}.
func placeholder(name string) string { return "@@" + ifVar(name) + "@@" }

// heredoc embeds rendered configuration in the script: the shell expands nothing in it but
// the interface variables (in unquoted here-documents $, ` and \ are special).
func heredoc(cmd, text string, ifaces []*plan.Interface) string {
	r := strings.NewReplacer(`\`, `\\`, "$", `\$`, "`", "\\`", "\t", "  ")
	text = r.Replace(text)
	for _, i := range ifaces {
		text = strings.ReplaceAll(text, placeholder(i.Name), "${"+ifVar(i.Name)+"}")
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return cmd + " <<SFCLAB_EOF\n" + text + "SFCLAB_EOF\n"
}

// NodeScript is the shell script an exported node runs at start: it waits for its interfaces
// and finds their names by address, deletes default routes, adds the plan's routes and rules,
// loads the function (nftables/iptables rules rendered by the function kinds, HAProxy's
// configuration) and ends in `exec sleep infinity`, or in the function's daemon.
// Equivalent to what deploy does through netlink and Node.Output, with ip(8) and the tools.
func NodeScript(p *plan.Plan, n *plan.Node) (string, error) {
	var b strings.Builder
	kind := n.Kind
	fmt.Fprintf(&b, "# sfclab lab %s, node %s (%s %s), generated from its plan\nset -e\n", p.Lab, n.Name, n.Role, kind)
	b.WriteString(`ifname() { ip -o -4 addr show | while read -r _ dev _ addr _; do [ "$addr" = "$1" ] && { echo "${dev%%@*}"; break; }; done; }` + "\n")
	b.WriteString(`wait_if() { i=0; until [ -n "$(ifname "$1")" ]; do i=$((i+1)); [ "$i" -lt 100 ] || { echo "no interface has $1" >&2; exit 1; }; sleep 0.1; done; ifname "$1"; }` + "\n")
	for _, i := range n.Interfaces {
		fmt.Fprintf(&b, "%s=$(wait_if %s)  # plan: %s on segment %s\n", ifVar(i.Name), i.Address, i.Name, i.Segment)
	}
	if RunsSfclab(n) {
		fmt.Fprintf(&b, "%s=%s  # the host's sfclab, mounted read-only\n", vnf.ComposeProgramVar, SfclabPath)
	}
	b.WriteString("while ip route del default 2>/dev/null; do :; done  # lab traffic never leaves the lab\n")
	for _, r := range n.Routes {
		b.WriteString("ip route add " + r.Dst.Masked().String())
		if r.Table != 0 {
			fmt.Fprintf(&b, " table %d", r.Table)
		}
		if len(r.NextHops) == 1 {
			h := r.NextHops[0]
			fmt.Fprintf(&b, " via %s dev \"$%s\"", h.Via, ifVar(h.Dev))
		} else {
			for _, h := range r.NextHops {
				fmt.Fprintf(&b, " nexthop via %s dev \"$%s\" weight %d", h.Via, ifVar(h.Dev), max(h.Weight, 1))
			}
		}
		b.WriteString("\n")
	}
	for _, r := range n.Rules {
		fmt.Fprintf(&b, "ip rule add priority %d", r.Priority)
		if r.Src.IsValid() {
			fmt.Fprintf(&b, " from %s", r.Src)
		}
		if r.Dst.IsValid() {
			fmt.Fprintf(&b, " to %s", r.Dst)
		}
		if r.Protocol != "" {
			fmt.Fprintf(&b, " ipproto %s", r.Protocol)
		}
		if s := portRange(r.SrcPort); s != "" {
			fmt.Fprintf(&b, " sport %s", s)
		}
		if s := portRange(r.DstPort); s != "" {
			fmt.Fprintf(&b, " dport %s", s)
		}
		fmt.Fprintf(&b, " lookup %d\n", r.Table)
	}
	for _, i := range n.Interfaces {
		if sh := segmentShape(p, i.Segment); sh != nil {
			b.WriteString(shapeCommands(ifVar(i.Name), *sh))
		}
	}
	final := "exec sleep infinity"
	if f := n.Function; f != nil {
		pf := *f // rendered rules name interfaces by placeholder
		pf.Ingress, pf.Egress = placeholder(f.Ingress), placeholder(f.Egress)
		k, err := kinds.Get(f.Kind)
		if err != nil {
			return "", err
		}
		c, ok := k.(vnf.Composer)
		if !ok {
			fmt.Fprintf(&b, "# function kind %s: not exported (sfclab sets it up itself)\n", f.Kind)
		} else {
			steps, fin, err := c.Compose(&pf)
			if err != nil {
				return "", fmt.Errorf("export node %s: %w", n.Name, err)
			}
			for _, st := range steps {
				if st.Stdin != "" {
					b.WriteString(heredoc(st.Cmd, st.Stdin, n.Interfaces))
				} else {
					b.WriteString(st.Cmd + "\n")
				}
			}
			if fin != "" {
				final = fin
			}
		}
	}
	for _, c := range n.Run {
		fmt.Fprintf(&b, "( %s ) &\n", c)
	}
	b.WriteString(final + "\n")
	return b.String(), nil
}

// ErrComposeDriver says a node's attachment driver has no compose form: sfclab attaches a
// macvlan, moved device, SR-IOV VF or eBPF redirect itself, after the container starts.
var ErrComposeDriver = errors.New("a compose file cannot attach an interface by another driver than veth (sfclab attaches it after the container starts)")

// ErrComposeVM says a VM node (vm:) has no compose form: sfclab boots its QEMU in the node's
// container namespace after the container starts (machines.go).
var ErrComposeVM = errors.New("a compose file cannot boot a VM (sfclab starts QEMU in the node's container namespace, spliced to its interfaces, after the container starts)")

// ErrComposeHosts says a lab on several emulated hosts has no compose form.
var ErrComposeHosts = errors.New("emulated hosts are namespaces of their own joined by VXLAN over an underlay bridge, which a compose file cannot make")

// composeHost checks a lab's emulated hosts for export: none is fine (nil); one is written as
// the machine itself, its cores as each of its containers' cpuset (returned); several are
// refused (a single host has no link to shape: the lab file refuses one).
func composeHost(p *plan.Plan) (*plan.Host, error) {
	hs := p.AllHosts()
	switch {
	case len(hs) == 0:
		return nil, nil
	case len(hs) > 1:
		names := make([]string, len(hs))
		for i, h := range hs {
			names[i] = h.Name
		}
		return nil, fmt.Errorf("export lab %s: %d emulated hosts (%s): %w; export it with one host or none, or deploy it with sfclab deploy", p.Lab, len(hs), strings.Join(names, ", "), ErrComposeHosts)
	}
	return hs[0], nil
}

// composeGateway is a segment's Docker network gateway: the plan's, or on an emulated host
// (where the plan gives none: deploy makes its own bridges) the subnet's last usable address,
// as the plan gives a Docker network.
func composeGateway(p *plan.Plan, s *plan.Segment) (netip.Addr, error) {
	if s.Gateway.IsValid() {
		return s.Gateway, nil
	}
	pre := s.Subnet.Masked()
	if !pre.Addr().Is4() || pre.Bits() > 30 {
		return netip.Addr{}, fmt.Errorf("export lab %s: segment %s (%s) has no room for a Docker gateway; give the chain a larger subnet", p.Lab, s.Name, s.Subnet)
	}
	a := pre.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v |= 1<<(32-pre.Bits()) - 1
	v--
	gw := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	for _, n := range p.Nodes {
		for _, i := range n.Interfaces {
			if i.Address.Addr() == gw {
				return netip.Addr{}, fmt.Errorf("export lab %s: segment %s: node %s has %s, the address a Docker gateway needs; give the chain a larger subnet", p.Lab, s.Name, n.Name, gw)
			}
		}
	}
	return gw, nil
}

func segmentShape(p *plan.Plan, name string) *spec.Shape {
	for _, s := range p.Segments {
		if s.Name == name {
			return s.Shape
		}
	}
	return nil
}

// tbfQueue is how long a packet may wait in the tbf queue, as deploy sizes it (netdev).
const tbfQueue = 50 * time.Millisecond

// shapeCommands are the tc commands that shape an interface's egress as deploy does
// (netdev.NS.SetShape): netem at the root for delay, jitter or loss, a tbf for the rate
// (below netem when both).
func shapeCommands(v string, sh spec.Shape) string {
	var b strings.Builder
	parent := "root"
	if sh.NeedsNetem() {
		fmt.Fprintf(&b, "tc qdisc replace dev \"$%s\" root handle 1: netem limit 10000", v)
		if sh.Delay > 0 {
			fmt.Fprintf(&b, " delay %dus", sh.Delay.Microseconds())
			if sh.Jitter > 0 {
				fmt.Fprintf(&b, " %dus", sh.Jitter.Microseconds())
			}
		}
		if sh.LossPercent > 0 {
			fmt.Fprintf(&b, " loss %s%%", strconv.FormatFloat(sh.LossPercent, 'f', -1, 64))
		}
		b.WriteString("  # segment shaping\n")
		parent = "parent 1:1"
	}
	if sh.RateBits > 0 {
		limit := uint64(float64(sh.RateBits/8)*tbfQueue.Seconds()) + uint64(sh.BurstBytes)
		fmt.Fprintf(&b, "tc qdisc replace dev \"$%s\" %s handle 2: tbf rate %dbit burst %d limit %d  # segment shaping\n",
			v, parent, sh.RateBits, sh.BurstBytes, min(limit, math.MaxUint32))
	}
	return b.String()
}

func portRange(r spec.PortRange) string {
	switch {
	case r.From == 0 && r.To == 0:
		return ""
	case r.To == 0 || r.To == r.From:
		return fmt.Sprint(r.From)
	}
	return fmt.Sprintf("%d-%d", r.From, r.To)
}

// ErrTransparentExport says a transparent lab has no compose form: its steering is tc eBPF that
// sfclab attaches to the containers' host-side veths and fills with the chains, which plain
// Docker tools cannot do.
var ErrTransparentExport = errors.New("steering: transparent is tc eBPF sfclab attaches to the containers' host-side veths, which a compose file cannot carry; deploy it with sfclab deploy (runtime: docker), or export a routed lab")

// ComposeGaps lists what of a plan a compose file does not reproduce (function kinds that do
// not implement vnf.Composer), for the export command to warn about.
func ComposeGaps(p *plan.Plan) []string {
	var out []string
	for _, n := range p.Nodes {
		if n.Function == nil {
			continue
		}
		if k, err := kinds.Get(n.Function.Kind); err != nil || !composes(k) {
			out = append(out, fmt.Sprintf("node %s: function kind %s is not exported", n.Name, n.Function.Kind))
		}
	}
	return out
}

func composes(k vnf.Function) bool {
	_, ok := k.(vnf.Composer)
	return ok
}
