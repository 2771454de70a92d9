package experiment

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sfclab/sfclab/bench/load"
	"github.com/sfclab/sfclab/plan"
	"go.yaml.in/yaml/v3"
)

// BackgroundNodes makes background nodes (study D's background containers) a factor of the
// experiment: every scenario is measured once per cell of count x kind x side, each cell a
// scenario of its own ("SCENARIO.bg-KIND-SIDE-COUNT", or "SCENARIO.bg-0"), whose lab gets
// COUNT extra nodes in pairs (see bench/load.AddNodes) loading their CPU or the network while
// the probes run. With the scenarios' labs varying the attachment driver and the rtt probe's
// rates, the runner covers count x kind x side x driver x rate, each cell deployed once per
// repetition.
type BackgroundNodes struct {
	// Count lists the numbers of background nodes (even, 0-256), e.g. [0, 8, 32, 64].
	Count []int `yaml:"count"`
	// Kind lists the load kinds: cpu, network.
	Kind Strings `yaml:"kind"`
	// Side lists where the load is: sender, responder. On a lab with emulated hosts it picks
	// the host the background nodes run on (see bench/load.AddNodes); on one host every node
	// shares the machine, so the side is recorded but changes nothing.
	Side Strings `yaml:"side,omitempty"`
	// Bitrate caps each background pair's UDP stream for kind network (default 100M).
	Bitrate string `yaml:"bitrate,omitempty"`
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
	if g.Bitrate == "" {
		g.Bitrate = "100M"
	}
	ok := len(g.Count) > 0 && len(g.Kind) > 0
	if !ok {
		bad(0, "background_nodes needs count: (e.g. [0, 8, 32, 64]) and kind: (cpu, network)")
	}
	lim := load.NodeLimit()
	for _, c := range g.Count {
		if c < 0 || c > lim.Max || c%2 != 0 {
			bad(0, "background_nodes count %d must be even and 0-%d (%s)", c, lim.Max, lim.Why)
			ok = false
		}
	}
	for _, k := range g.Kind {
		if k != "cpu" && k != "network" {
			bad(0, "background_nodes kind %q is not cpu or network", k)
			ok = false
		}
	}
	for _, s := range g.Side {
		if s != "sender" && s != "responder" {
			bad(0, "background_nodes side %q is not sender or responder", s)
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
			d.Name = s.Name + ".bg-0"
			if cell.Count > 0 {
				d.Name = fmt.Sprintf("%s.bg-%s-%s-%d", s.Name, cell.Kind, cell.Side, cell.Count)
			}
			lab, err := loadLab(s.LabPath)
			if err == nil {
				err = Override(lab, s.Runtime, s.Attach)
			}
			if err == nil {
				err = load.AddNodes(lab, cell.Count, load.Placement{Kind: cell.Kind, Side: cell.Side})
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

// cells lists the cells in grid order; count 0 appears once.
func cells(g *BackgroundNodes) []Cell {
	var out []Cell
	for _, c := range g.Count {
		if c == 0 {
			out = append(out, Cell{Count: 0})
			continue
		}
		for _, k := range g.Kind {
			for _, s := range g.Side {
				out = append(out, Cell{Count: c, Kind: k, Side: s, Bitrate: g.Bitrate})
			}
		}
	}
	return out
}
