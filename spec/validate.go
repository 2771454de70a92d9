package spec

import (
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Limits on names: node names become interface and container names, so they obey IFNAMSIZ.
const (
	MaxLabName     = 12
	MaxNodeName    = 15
	MaxInstances   = 64
	MaxWeight      = 256
	defaultPrefix  = 24
	smallestSubnet = 30
)

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// Validate fills in defaults and checks a decoded lab against the function kinds it was
// decoded with (lab.Kinds). It returns every problem found.
func Validate(lab *Lab) Errors {
	v := &validator{lab: lab}
	v.run()
	sort.SliceStable(v.errs, func(i, j int) bool {
		a, b := v.errs[i].Pos, v.errs[j].Pos
		return a.Line < b.Line || (a.Line == b.Line && a.Col < b.Col)
	})
	return v.errs
}

type validator struct {
	lab  *Lab
	errs Errors
}

func (v *validator) bad(p Pos, format string, args ...any) {
	v.errs = append(v.errs, &Error{File: v.lab.File, Pos: p, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) run() {
	lab := v.lab
	switch {
	case lab.Name == "":
		v.bad(Pos{}, "the lab needs a name: (lowercase letters, digits and '-', at most %d characters)", MaxLabName)
	case !nameRE.MatchString(lab.Name):
		v.bad(Pos{}, "lab name %q: use lowercase letters, digits and '-', starting with a letter", lab.Name)
	case len(lab.Name) > MaxLabName:
		v.bad(Pos{}, "lab name %q is %d characters; at most %d (it prefixes interface and container names)", lab.Name, len(lab.Name), MaxLabName)
	}
	if lab.Runtime == "" {
		lab.Runtime = DefaultRuntime
	}
	if _, ok := TraitsOf(lab.Runtime); !ok {
		v.bad(Pos{}, "runtime %q is not one of %s", lab.Runtime, strings.Join(RuntimeNames(), ", "))
	}
	if lab.Docker.Attach == "" {
		lab.Docker.Attach = AttachRouted
	}
	if lab.Docker.Attach != AttachRouted && lab.Docker.Attach != AttachNAT {
		v.bad(Pos{}, "docker attach %q is not one of routed, nat", lab.Docker.Attach)
	}
	if !lab.Traits().Containers && lab.Docker.Attach != AttachRouted {
		v.bad(Pos{}, "docker: settings need runtime: docker (docker.attach is the docker runtime's)")
	}
	if !lab.Traits().Images && lab.Docker.Image != "" {
		v.bad(Pos{}, "docker.image %q needs runtime: docker or kubernetes (runtime %s runs no container image); remove it", lab.Docker.Image, lab.Runtime)
	}
	if lab.Steering == "" {
		lab.Steering = SteeringRouted
	}
	switch lab.Steering {
	case SteeringRouted:
		if what, p, ok := lab.transparentFields(); ok {
			v.bad(p, "%s: needs steering: transparent (routed labs list chains: with hops)", what)
		}
	case SteeringTransparent:
	default:
		v.bad(Pos{}, "steering %q is not one of %s, %s", lab.Steering, SteeringRouted, SteeringTransparent)
	}
	if lab.Links == "" {
		lab.Links = "auto"
	}
	if lab.Links != "auto" && lab.Links != "bridge" {
		v.bad(Pos{}, "links %q is not one of auto, bridge", lab.Links)
	}
	if lab.MTU == 0 {
		lab.MTU = 1500
	}
	if lab.MTU < 576 || lab.MTU > 65535 {
		v.bad(Pos{}, "mtu %d is outside 576-65535", lab.MTU)
	}
	v.addressing()
	v.hosts()
	names := map[string]string{}
	v.endpoints(names)
	v.functions(names)
	if lab.Steering == SteeringTransparent {
		if len(v.errs) == 0 {
			v.transparent()
		}
		return
	}
	v.routedHosts()
	v.chains()
}

func (v *validator) addressing() {
	a := &v.lab.Addressing
	if a.Pool == "" {
		a.Pool = DefaultPool.String()
	}
	pool, err := ParsePrefix(a.Pool)
	if err != nil {
		v.bad(a.Pos, "addressing pool: %v", err)
		return
	}
	if a.Prefix == 0 {
		a.Prefix = max(defaultPrefix, pool.Bits())
		a.Auto = true
	}
	if a.Prefix < pool.Bits() || a.Prefix > smallestSubnet {
		v.bad(a.Pos, "addressing prefix /%d must lie between the pool's /%d and /%d", a.Prefix, pool.Bits(), smallestSubnet)
	}
}

func (v *validator) nodeName(name, what string, p Pos, instances int, names map[string]string) {
	full := name
	if instances > 1 {
		full = fmt.Sprintf("%s-%d", name, instances)
	}
	switch {
	case !nameRE.MatchString(name):
		v.bad(p, "%s name %q: use lowercase letters, digits and '-', starting with a letter", what, name)
	case len(full) > MaxNodeName:
		v.bad(p, "%s name %q is too long for an interface name: %q has %d characters, at most %d (Linux IFNAMSIZ)", what, name, full, len(full), MaxNodeName)
	}
	if other, dup := names[name]; dup {
		v.bad(p, "%s name %q is already used by %s %q; names must be unique across endpoints and functions", what, name, other, name)
	}
	names[name] = what
}

func (v *validator) group(p Pos, what, name string, instances *int, weights []int) {
	if *instances == 0 {
		*instances = 1
	}
	if *instances < 1 || *instances > MaxInstances {
		v.bad(p, "%s %q: instances must be 1-%d, got %d", what, name, MaxInstances, *instances)
	}
	if len(weights) > 0 && len(weights) != *instances {
		v.bad(p, "%s %q: %d weights for %d instances; give one weight per instance", what, name, len(weights), *instances)
	}
	for _, w := range weights {
		if w < 1 || w > MaxWeight {
			v.bad(p, "%s %q: weight %d is outside 1-%d", what, name, w, MaxWeight)
		}
	}
}

func (v *validator) endpoints(names map[string]string) {
	if len(v.lab.Endpoints) == 0 {
		v.bad(Pos{}, "the lab has no endpoints; add a client and a server under endpoints:")
	}
	for _, name := range slices.Sorted(maps.Keys(v.lab.Endpoints)) {
		e := v.lab.Endpoints[name]
		if e == nil {
			e = &Endpoint{}
			v.lab.Endpoints[name] = e
		}
		e.Name = name
		if e.Kind == "" {
			e.Kind = EndpointClient
			if name != "client" {
				e.Kind = EndpointServer
			}
		}
		switch e.Kind {
		case EndpointClient, EndpointServer:
			if e.HTTP != nil || e.http != nil {
				v.bad(e.Pos, "endpoint %q: http: is for kind http-server", name)
			}
		case EndpointHTTPServer:
			if e.HTTP == nil {
				p, ok := kindsOr(v.lab.Kinds).NewParams(EndpointHTTPServer)
				if !ok {
					v.bad(e.Pos, "endpoint %q: kind %s is not in this build", name, e.Kind)
					break
				}
				e.HTTP = p
			}
			setDefaults(e.HTTP)
			for _, msg := range paramsProblems(&Function{Kind: e.Kind, Params: e.HTTP, Name: name, Pos: e.Pos}) {
				v.bad(e.Pos, "endpoint %q: %s", name, msg)
			}
		default:
			v.bad(e.Pos, "endpoint %q: kind %q is not one of client, server, http-server", name, e.Kind)
		}
		v.group(e.Pos, "endpoint", name, &e.Instances, e.Weights)
		v.driver(name, e)
		v.vm("endpoint "+strconv.Quote(name), e.VM)
		v.nodeName(name, "endpoint", e.Pos, e.Instances, names)
		for _, r := range e.Run {
			if r == "" {
				v.bad(e.Pos, "endpoint %q: an empty run command", name)
			}
		}
	}
}

func (v *validator) functions(names map[string]string) {
	ks := kindsOr(v.lab.Kinds)
	for _, name := range slices.Sorted(maps.Keys(v.lab.Functions)) {
		f := v.lab.Functions[name]
		if f == nil {
			v.bad(Pos{}, "function %q has no kind; kinds: %v", name, ks.Names())
			continue
		}
		f.Name = name
		if _, ok := ks.NewParams(f.Kind); !ok {
			if f.Kind == "" {
				v.bad(f.Pos, "function %q has no kind; kinds: %v", name, ks.Names())
			} else {
				v.bad(f.Pos, "function %q: unknown kind %q; kinds: %v", name, f.Kind, ks.Names())
			}
			continue
		}
		v.group(f.Pos, "function", name, &f.Instances, f.Weights)
		v.nodeName(name, "function", f.Pos, f.Instances, names)
		if f.VM == nil && v.lab.Traits().Machines {
			f.VM = &VM{Pos: f.Pos}
		}
		v.vm("function "+strconv.Quote(name), f.VM)
		for _, msg := range paramsProblems(f) {
			v.bad(f.Pos, "function %q: %s", name, msg)
		}
		if v.lab.Steering != SteeringTransparent {
			v.routedParams(name, f)
		}
	}
}

// routedParams refuses the parameters only a transparent lab can honour, as their type says
// (RoutedChecker).
func (v *validator) routedParams(name string, f *Function) {
	rc, ok := f.Params.(RoutedChecker)
	if !ok {
		return
	}
	var p Problems
	rc.CheckRouted(&p)
	for _, msg := range p.List() {
		v.bad(f.Pos, "function %q: %s", name, msg)
	}
}

func (v *validator) chains() {
	lab := v.lab
	if len(lab.Chains) == 0 {
		v.bad(Pos{}, "the lab has no chains; add one under chains: with from, to and hops")
		return
	}
	chainNames := map[string]bool{}
	usedBy := map[string]string{}
	var pinned []netip.Prefix
	var pinnedAt []Pos
	for i, c := range lab.Chains {
		if c == nil {
			v.bad(Pos{}, "chain %d is empty; a chain needs from and to", i+1)
			continue
		}
		if c.Name == "" {
			c.Name = fmt.Sprintf("chain%d", i)
		}
		if !nameRE.MatchString(c.Name) {
			v.bad(c.Pos, "chain name %q: use lowercase letters, digits and '-'", c.Name)
		}
		if chainNames[c.Name] {
			v.bad(c.Pos, "chain name %q is used twice", c.Name)
		}
		chainNames[c.Name] = true
		for _, end := range []struct {
			what string
			ref  Ref
		}{{"from", c.From}, {"to", c.To}} {
			switch {
			case end.ref.Name == "":
				v.bad(c.Pos, "chain %q is empty or incomplete: it needs %s: an endpoint name", c.Name, end.what)
			case lab.Endpoints[end.ref.Name] == nil:
				if lab.Functions[end.ref.Name] != nil {
					v.bad(end.ref.Pos, "chain %q: %s %q is a function; from and to name endpoints", c.Name, end.what, end.ref.Name)
				} else {
					v.bad(end.ref.Pos, "chain %q: %s names unknown endpoint %q (endpoints: %v)", c.Name, end.what, end.ref.Name, slices.Sorted(maps.Keys(lab.Endpoints)))
				}
			}
		}
		if c.From.Name != "" && c.From.Name == c.To.Name {
			v.bad(c.To.Pos, "chain %q goes from %q to itself", c.Name, c.From.Name)
		}
		if e := lab.Endpoints[c.From.Name]; e != nil && e.Instances > 1 {
			v.bad(c.From.Pos, "chain %q: from %q has %d instances; a chain starts at one node", c.Name, c.From.Name, e.Instances)
		}
		for _, h := range c.Hops {
			f := lab.Functions[h.Name]
			switch {
			case f == nil && lab.Endpoints[h.Name] != nil:
				v.bad(h.Pos, "chain %q: hop %q is an endpoint; hops name functions", c.Name, h.Name)
				continue
			case f == nil:
				v.bad(h.Pos, "chain %q: hop names unknown function %q (functions: %v)", c.Name, h.Name, slices.Sorted(maps.Keys(lab.Functions)))
				continue
			}
			if other, ok := usedBy[h.Name]; ok {
				v.bad(h.Pos, "chain %q: function %q is already a hop of chain %q; routed steering gives each function one place in one chain, declare another function", c.Name, h.Name, other)
			}
			usedBy[h.Name] = c.Name
		}
		v.classifier(c)
		v.shaping(c)
		if len(c.Subnets) > 0 && len(c.Subnets) != len(c.Hops)+1 {
			v.bad(c.Pos, "chain %q: %d subnets for %d segments; give one per segment (hops + 1)", c.Name, len(c.Subnets), len(c.Hops)+1)
		}
		for _, s := range c.Subnets {
			p, err := ParsePrefix(s)
			if err != nil {
				v.bad(c.Pos, "chain %q: subnet: %v", c.Name, err)
				continue
			}
			if p.Bits() > smallestSubnet {
				v.bad(c.Pos, "chain %q: subnet %s is too small; at most /%d", c.Name, p, smallestSubnet)
			}
			for j, q := range pinned {
				if p.Overlaps(q) {
					v.bad(c.Pos, "chain %q: subnet %s overlaps %s (line %d); segments need distinct subnets", c.Name, p, q, pinnedAt[j].Line)
				}
			}
			pinned, pinnedAt = append(pinned, p), append(pinnedAt, c.Pos)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(lab.Functions)) {
		if f := lab.Functions[name]; f != nil && usedBy[name] == "" {
			v.bad(f.Pos, "function %q is not a hop of any chain; add it to a chain's hops or remove it", name)
		}
	}
}

func (v *validator) classifier(c *Chain) {
	cl := &c.Classifier
	p := cl.Pos
	if p.Line == 0 {
		p = c.Pos
	}
	if cl.Protocol == "any" {
		cl.Protocol = ""
	}
	switch cl.Protocol {
	case "", "icmp":
		if !cl.SourcePort.IsZero() || !cl.DestinationPort.IsZero() {
			v.bad(p, "chain %q: classifier has ports but no protocol; set protocol: tcp or udp", c.Name)
		}
	case "tcp", "udp":
	default:
		v.bad(p, "chain %q: classifier protocol %q is not one of tcp, udp, icmp, any", c.Name, cl.Protocol)
	}
	for _, s := range []string{cl.SourcePrefix, cl.DestinationPrefix} {
		if s == "" {
			continue
		}
		if _, err := ParsePrefix(s); err != nil {
			v.bad(p, "chain %q: classifier: %v", c.Name, err)
		}
	}
}
