package bench

import (
	"strings"

	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/spec"
)

// balancers names each scenario's load balancer for the report (report.EnvBalancers):
// "SCENARIO=NODE:IMPL;...", for scenarios whose chain has a balancer (spec.Balancer).
func balancers(e *experiment.Experiment) string {
	var out []string
	for _, s := range e.Scenarios {
		if s.Plan == nil {
			continue
		}
		for _, n := range s.Plan.Nodes {
			if n.Function == nil {
				continue
			}
			b, ok := n.Function.Params.(spec.Balancer) // the params say what they are
			if !ok {
				continue
			}
			out = append(out, s.Name+"="+n.Name+":"+b.BalancerName())
			break
		}
	}
	return strings.Join(out, ";")
}
