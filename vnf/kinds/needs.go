package kinds

import (
	"slices"
	"strings"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/vnf"
)

// Need is a program a plan starts and the nodes that start it.
type Need struct {
	Program string
	Nodes   []string
}

// Needs lists, sorted by program, every program a plan's functions and run commands start:
// what a runtime checks is installed (on the host, or in the image) before anything is created.
func Needs(p *plan.Plan) ([]Need, error) {
	who := map[string][]string{}
	for _, n := range p.Nodes {
		if n.Function != nil {
			k, err := Get(n.Function.Kind)
			if err != nil {
				return nil, err
			}
			for _, prog := range k.Requires(n.Function) {
				who[prog] = append(who[prog], n.Name)
			}
		}
		for _, r := range n.Run {
			if w := vnf.FirstWord(r); w != "" {
				who[w] = append(who[w], n.Name)
			}
		}
	}
	out := make([]Need, 0, len(who))
	for prog, nodes := range who {
		out = append(out, Need{Program: prog, Nodes: slices.Compact(slices.Sorted(slices.Values(nodes)))})
	}
	slices.SortFunc(out, func(a, b Need) int { return strings.Compare(a.Program, b.Program) })
	return out, nil
}

// ImagePackages are the Debian packages the registered kinds run inside a node (see
// vnf.ImagePackager), sorted, each once.
func ImagePackages() []string {
	var out []string
	for _, k := range all() {
		if ip, ok := k.(vnf.ImagePackager); ok {
			out = append(out, ip.ImagePackages()...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// PackagesOf are the Debian packages one kind runs inside a node (none for a kind that runs
// only the host's tools, or an unknown one), sorted.
func PackagesOf(kind string) []string {
	f, err := Get(kind)
	if err != nil {
		return nil
	}
	ip, ok := f.(vnf.ImagePackager)
	if !ok {
		return nil
	}
	return slices.Sorted(slices.Values(ip.ImagePackages()))
}
