package experiment

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe/load"
	"github.com/sfclab/sfclab/spec"
	"go.yaml.in/yaml/v3"
)

// BackgroundNodes makes background nodes (study D's background containers) a factor of the
// experiment: every scenario is measured once per cell of count x kind x host, each cell a
// scenario of its own ("SCENARIO.bg-KIND-HOST-COUNT", or "SCENARIO.bg-0"), whose lab gets
// COUNT extra nodes in pairs (see probe/load.AddNodes) loading their CPU or the network while
// the probes run. With the scenarios' labs varying the attachment driver and the rtt probe's
// rates, the runner covers count x kind x host x driver x rate, each cell deployed once per
// repetition.
//
// The file writes it as the issue's `background: {count, kind, host}` (a `background:` with
// host:, see Background) or as `background_nodes: {count, kind, side}`; host and side are the
// same field.
type BackgroundNodes struct {
	// Count lists the numbers of background nodes (even, 0 up to load.NodeLimit), e.g.
	// [0, 8, 32, 64], or one number.
	Count Ints `yaml:"count"`
	// Kind lists the load kinds: cpu, network.
	Kind Strings `yaml:"kind"`
	// Side lists the hosts the load is on: sender, responder (written host: or side:). On a
	// lab with emulated hosts it picks the host the background nodes run on (see
	// probe/load.AddNodes); on one host every node shares the machine, so it is recorded but
	// changes nothing.
	Side Strings `yaml:"side,omitempty"`
	// Host is Side as the file may write it (merged into Side when decoded).
	Host Strings `yaml:"host,omitempty"`
	// Bitrate caps each background pair's UDP stream for kind network (default 100M); "max"
	// leaves it unthrottled (iperf3 -b 0: study D's "highest bandwidth occupation of each VM").
	// A list makes it a factor of the network cells, e.g. [100M, max].
	Bitrate Strings `yaml:"bitrate,omitempty"`
	// Driver lists how the background nodes are attached, a factor of every cell with
	// nodes: "same" (the main pair's driver), veth, macvlan or ebpf-redirect; unset: the
	// default driver (veth). Study D's §5.2 put every background container on SR-IOV while
	// the main pair used the bridge, and everything on the bridge: with the drivers' scenarios
	// macvlan and ebpf-redirect, driver: [same, ebpf-redirect] gives both.
	Driver Strings `yaml:"driver,omitempty"`

	// Key is the file's key ("background" or "background_nodes") and HostKey the name the
	// file gave the host field ("host" or "side"), so that errors use the user's words.
	Key, HostKey string `yaml:"-"`
	// Line is the line of the mapping in the file.
	Line int `yaml:"-"`
}

// UnmarshalYAML decodes background_nodes: strictly, with host: and side: as one field.
func (g *BackgroundNodes) UnmarshalYAML(unmarshal func(any) error) error {
	_, line, err := mappingOf(unmarshal, "background_nodes", "{count: [0, 8, 32, 64], kind: [cpu, network], side: [sender, responder]}")
	if err != nil {
		return err
	}
	type backgroundNodes BackgroundNodes // without this method; its name is in unknown-field errors
	if err := unmarshal((*backgroundNodes)(g)); err != nil {
		return err
	}
	g.Key, g.Line = "background_nodes", line
	return g.mergeHost()
}

// mergeHost moves Host into Side; both given is an error.
func (g *BackgroundNodes) mergeHost() error {
	g.HostKey = "side"
	switch {
	case len(g.Host) > 0 && len(g.Side) > 0:
		return lineError(g.Line, "%s has both host: and side:, which are the same field; write host: sender, host: responder or host: [sender, responder]", g.Key)
	case len(g.Host) > 0:
		g.Side, g.Host, g.HostKey = g.Host, nil, "host"
	}
	return nil
}

// lineError is an error the YAML decoder reports as "line N: ...", which Decode turns into
// file:N.
func lineError(line int, f string, a ...any) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: "+f, append([]any{line}, a...)...)}}
}

// Ints is one integer or a list of them.
type Ints []int

// UnmarshalYAML reads `8` or `[0, 8]`.
func (s *Ints) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var v int
		if err := n.Decode(&v); err != nil {
			return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q is not a whole number", n.Line, n.Value)}}
		}
		*s = Ints{v}
		return nil
	}
	var l []int
	if err := n.Decode(&l); err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: give a whole number or a list of them, e.g. [0, 8, 32, 64]", n.Line)}}
	}
	*s = l
	return nil
}

// Strings is one string or a list of them.
type Strings []string

// UnmarshalYAML reads `x` or `[x, y]`.
func (s *Strings) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*s = Strings{n.Value}
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return err
	}
	*s = l
	return nil
}

// Cell is one background cell of a scenario.
type Cell struct {
	Count   int
	Kind    string
	Side    string
	Bitrate string
	// Driver attaches the background nodes ("" = the default; see BackgroundNodes.Driver).
	Driver string
	// name is the cell's suffix of the scenario name.
	name string
}

// expand replaces every scenario by one per background cell.
func (e *Experiment) expand(loadLab LabLoader, bad func(int, string, ...any)) {
	g := e.BackgroundNodes
	if g == nil {
		return
	}
	if len(g.Side) == 0 {
		g.Side = Strings{"sender"}
	}
	if g.Key == "" {
		g.Key = "background_nodes"
	}
	if g.HostKey == "" {
		g.HostKey = "side"
	}
	if len(g.Bitrate) == 0 {
		g.Bitrate = Strings{load.DefaultNodeBitrate}
	}
	k := g.Key
	ok := len(g.Count) > 0 && len(g.Kind) > 0
	if !ok {
		bad(g.Line, "%s needs count: and kind:, e.g. %s: {count: [0, 8, 32, 64], kind: [cpu, network], host: [sender, responder]}", k, k)
	}
	lim := load.NodeLimit()
	for _, c := range g.Count {
		if c < 0 || c > lim.Max || c%2 != 0 {
			bad(g.Line, "%s count %d must be even and 0-%d (%s); write e.g. count: [0, 8, 32, 64]", k, c, lim.Max, lim.Why)
			ok = false
		}
	}
	for _, kind := range g.Kind {
		if kind != "cpu" && kind != "network" {
			bad(g.Line, "%s kind %q is not cpu or network; write kind: cpu, kind: network or kind: [cpu, network]", k, kind)
			ok = false
		}
	}
	for _, s := range g.Side {
		if s != "sender" && s != "responder" {
			bad(g.Line, "%s %s %q is not sender or responder (the host of the chain's source or of its destination); write %s: sender, %s: responder or %s: [sender, responder]",
				k, g.HostKey, s, g.HostKey, g.HostKey, g.HostKey)
			ok = false
		}
	}
	for _, b := range g.Bitrate {
		if !validBitrate(b) {
			bad(g.Line, "%s bitrate %q is not a rate like 100M, 1G or 500K, or max (unthrottled); write e.g. bitrate: [100M, max]", k, b)
			ok = false
		}
	}
	for _, d := range g.Driver {
		if !slices.Contains(load.BackgroundDrivers(), d) {
			bad(g.Line, "%s driver %q is not one of %s (host-device and sriov take a device per node)", k, d, strings.Join(load.BackgroundDrivers(), ", "))
			ok = false
		}
	}
	if !ok {
		return
	}
	var out []*Scenario
	for _, s := range e.Scenarios {
		if s == nil || s.Plan == nil {
			continue
		}
		for _, cell := range cells(g) {
			d := *s
			d.Background = &cell
			d.Name = s.Name + ".bg-" + cell.name
			lab, err := loadLab(s.LabPath)
			if err == nil {
				err = Override(lab, s.Runtime, s.Attach)
			}
			if err == nil && cell.Driver != "" && cell.Driver != load.DriverSame && slices.Contains(g.Driver, load.DriverSame) && mainDriver(lab) == cell.Driver {
				continue // the same cell as driver "same": measured once
			}
			if err == nil {
				err = load.AddNodes(lab, cell.Count, load.Placement{Kind: cell.Kind, Side: cell.Side, Driver: cell.Driver})
			}
			var p *plan.Plan
			if err == nil {
				p, err = plan.Build(lab)
			}
			if err != nil {
				bad(s.Line, "scenario %q with %d background nodes: %v", s.Name, cell.Count, err)
				continue
			}
			d.Plan = p
			out = append(out, &d)
		}
	}
	if e.Baseline != "" && !strings.Contains(e.Baseline, ".bg-") {
		e.Baseline += ".bg-0"
		if !slices.Contains(g.Count, 0) && len(out) > 0 {
			e.Baseline = out[0].Name
		}
	}
	e.Scenarios = out
}

// cells lists the cells in grid order; count 0 appears once. A cell's name is "0" or
// KIND-HOST-COUNT, followed, when the factor has more than one level, by "-at-BITRATE" (network
// cells) and "-on-DRIVER" (the background nodes' driver).
func cells(g *BackgroundNodes) []Cell {
	drivers := []string(g.Driver)
	if len(drivers) == 0 {
		drivers = []string{""}
	}
	var out []Cell
	for _, c := range g.Count {
		if c == 0 {
			out = append(out, Cell{Count: 0, name: "0"})
			continue
		}
		for _, k := range g.Kind {
			rates := []string{""}
			if k == load.KindNetwork {
				rates = g.Bitrate
			}
			for _, s := range g.Side {
				for _, b := range rates {
					for _, d := range drivers {
						name := fmt.Sprintf("%s-%s-%d", k, s, c)
						if len(rates) > 1 {
							name += "-at-" + b
						}
						if len(drivers) > 1 {
							name += "-on-" + d
						}
						out = append(out, Cell{Count: c, Kind: k, Side: s, Bitrate: b, Driver: d, name: name})
					}
				}
			}
		}
	}
	return out
}

// validBitrate reports whether b is "max" or a rate iperf3 -b takes: a positive number with
// an optional K, M or G.
func validBitrate(b string) bool {
	if b == load.BitrateMax {
		return true
	}
	num := strings.TrimRight(b, "KMGkmg")
	if len(b)-len(num) > 1 {
		return false
	}
	v, err := strconv.ParseFloat(num, 64)
	return err == nil && v > 0
}

// mainDriver is the driver of the lab's first chain's source (veth when none is set).
func mainDriver(lab *spec.Lab) string {
	if len(lab.Chains) == 0 {
		return ""
	}
	if e := lab.Endpoints[lab.Chains[0].From.Name]; e != nil && e.Driver != nil && e.Driver.Type != "" {
		return e.Driver.Type
	}
	return spec.DriverVeth
}
