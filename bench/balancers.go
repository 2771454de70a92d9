package bench

import (
	"strings"

	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/spec"
)

// balancers names each scenario's load balancer for the report (report.EnvBalancers):
// "SCENARIO=NODE:IMPL;...", for scenarios whose chain has an l4lb.
func balancers(e *experiment.Experiment) string {
	var out []string
	for _, s := range e.Scenarios {
		if s.Plan == nil {
			continue
		}
		for _, n := range s.Plan.Nodes {
			if n.Function == nil || n.Function.Kind != spec.KindL4LB {
				continue
			}
			p, ok := n.Function.Params.(*spec.L4LBParams)
			if !ok {
				continue
			}
			impl := p.Impl
			switch {
			case impl == spec.ImplHAProxy && p.SpliceOn():
				impl = report.BalancerHAProxySplice
			case impl == spec.ImplHAProxy:
				impl = report.BalancerHAProxy
			}
			out = append(out, s.Name+"="+n.Name+":"+impl)
			break
		}
	}
	return strings.Join(out, ";")
}
