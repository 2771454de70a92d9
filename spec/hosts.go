package spec

import (
	"fmt"
	"maps"
	"slices"

	"go.yaml.in/yaml/v3"
)

// HostSpec is an emulated host: `hosts: [h1, h2]`, or the mapping form with the host's own
// cores and link: `hosts: [{name: sender, cpus: "0", link: {rate: 10gbit}}]`. Hosts serve
// transparent steering (networking-sfc's compute nodes) and routed labs alike (placement:
// study D's sender and responder servers).
type HostSpec struct {
	// Name of the host (at most 10 characters: it names the host's namespace sfc.LAB.host-NAME).
	Name string `yaml:"name" json:"name"`
	// CPUs are the cores every node on the host is confined to (a cgroup cpuset), in the
	// kernel's list form: "0", "0-1", "0,2". Empty: every core, shared with all.
	CPUs string `yaml:"cpus,omitempty" json:"cpus,omitempty"`
	// Link limits the host's link to the other hosts (tbf on its underlay interface, each
	// host shaping what it sends): {rate: 10gbit} is study D's back-to-back link.
	Link *Shaping `yaml:"link,omitempty" json:"link,omitempty"`

	Pos Pos `yaml:"-" json:"-"`
}

// UnmarshalYAML reads a host name or the mapping form.
func (h *HostSpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*h = HostSpec{Name: n.Value, Pos: pos(n)}
		return nil
	}
	type plain HostSpec
	return decodeAt(n, (*plain)(h), &h.Pos)
}

// HostNames lists the lab's hosts by name, in file order.
func (lab *Lab) HostNames() []string {
	out := make([]string, 0, len(lab.Hosts))
	for _, h := range lab.Hosts {
		out = append(out, h.Name)
	}
	return out
}

// Host returns the named host, nil if the lab has none of that name.
func (lab *Lab) Host(name string) *HostSpec {
	for _, h := range lab.Hosts {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// MaxHostName bounds a host's name: it becomes part of namespace and interface names.
const MaxHostName = 10

// hosts checks the hosts list (any steering): names, cores in list form, link shaping.
// Whether the cores exist on this machine is the runtime's preflight (it reads the machine;
// spec does not).
func (v *validator) hosts() {
	seen := map[string]bool{}
	for _, h := range v.lab.Hosts {
		if h == nil {
			v.bad(Pos{}, "hosts: an empty entry; write a name or {name: N, cpus: \"0\"}")
			continue
		}
		if !nameRE.MatchString(h.Name) || len(h.Name) > MaxHostName {
			v.bad(h.Pos, "host %q: use lowercase letters, digits and '-', at most %d characters", h.Name, MaxHostName)
		}
		if seen[h.Name] {
			v.bad(h.Pos, "host %q listed twice", h.Name)
		}
		seen[h.Name] = true
		if h.CPUs != "" {
			if _, err := parseCPUList(h.CPUs); err != nil {
				v.bad(h.Pos, "host %q: cpus: %v", h.Name, err)
			}
		}
		if h.Link != nil {
			if h.Link.Segment != nil {
				v.bad(h.Link.Pos, "host %q: link: has no segment: (it shapes the host's own link)", h.Name)
			}
			if _, err := h.Link.Parse(); err != nil {
				v.bad(h.Link.Pos, "host %q: link: %v", h.Name, err)
			}
			if len(v.lab.Hosts) < 2 {
				v.bad(h.Link.Pos, "host %q: link: a single host has no link to shape; list a second host", h.Name)
			}
		}
	}
}

// routedHosts places a routed lab's nodes on its hosts: every node on a listed host (default
// the first), netns runtime only, and no driver that takes a device of the real host.
func (v *validator) routedHosts() {
	lab := v.lab
	placed := func(what, name string, p Pos, host *string) {
		if len(lab.Hosts) == 0 {
			if *host != "" {
				v.bad(p, "%s %q: host %q: the lab lists no hosts:; add hosts: [%s, ...]", what, name, *host, *host)
			}
			return
		}
		if *host == "" {
			*host = lab.Hosts[0].Name
		}
		if lab.Host(*host) == nil {
			v.bad(p, "%s %q: host %q is not in hosts: %v", what, name, *host, lab.HostNames())
		}
	}
	if len(lab.Hosts) > 0 && lab.Traits().Containers && lab.Docker.Attach == AttachNAT {
		v.bad(lab.Hosts[0].Pos, "hosts: docker attach nat publishes the target's port on a Docker network, and nodes on emulated hosts have none (sfclab's bridges in the hosts' namespaces): drop docker.attach or hosts:")
	}
	for _, name := range slices.Sorted(maps.Keys(lab.Endpoints)) {
		e := lab.Endpoints[name]
		if e == nil {
			continue
		}
		placed("endpoint", name, e.Pos, &e.Host)
		if len(lab.Hosts) > 0 {
			if t := e.DriverType(); t == DriverHostDevice || t == DriverSRIOV {
				v.bad(e.Pos, "endpoint %q: driver %s takes a device of the real host, which no emulated host owns; use veth or macvlan with hosts:", name, t)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(lab.Functions)) {
		if f := lab.Functions[name]; f != nil {
			placed("function", name, f.Pos, &f.Host)
		}
	}
}

// parseCPUList checks the kernel's cpu list form ("0", "0-3", "0,2-3").
func parseCPUList(s string) ([]int, error) {
	var out []int
	if s == "" {
		return nil, fmt.Errorf("empty; write e.g. \"0\", \"0-1\" or \"0,2\"")
	}
	for _, part := range splitComma(s) {
		var a, b int
		if n, err := fmt.Sscanf(part, "%d-%d", &a, &b); err == nil && n == 2 {
			if a < 0 || b < a {
				return nil, fmt.Errorf("%q is not a range A-B with 0 <= A <= B", part)
			}
		} else if n, err := fmt.Sscanf(part, "%d", &a); err == nil && n == 1 && fmt.Sprint(a) == part && a >= 0 {
			b = a
		} else {
			return nil, fmt.Errorf("%q in %q is not a core number or range A-B (e.g. \"0\", \"0-1\", \"0,2\")", part, s)
		}
		if b > 4095 {
			return nil, fmt.Errorf("core %d is beyond 4095", b)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}
