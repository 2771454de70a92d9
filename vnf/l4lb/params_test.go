package l4lb_test

import (
	"testing"

	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/l4lb"
)

// TestBalancerName checks that each implementation names itself as the report groups
// balancers (report.Balancer*), through the capability bench asks (spec.Balancer).
func TestBalancerName(t *testing.T) {
	off := false
	for _, tt := range []struct {
		p    *l4lb.L4LBParams
		want string
	}{
		{&l4lb.L4LBParams{Impl: l4lb.ImplHAProxy}, report.BalancerHAProxySplice},
		{&l4lb.L4LBParams{Impl: l4lb.ImplHAProxy, Splice: &off}, report.BalancerHAProxy},
		{&l4lb.L4LBParams{Impl: l4lb.ImplSfclab}, report.BalancerSfclab},
		{&l4lb.L4LBParams{Impl: l4lb.ImplNft}, report.BalancerNft},
	} {
		var b spec.Balancer = tt.p
		if got := b.BalancerName(); got != tt.want {
			t.Errorf("impl %s splice %v: BalancerName = %q, want %q", tt.p.Impl, tt.p.SpliceOn(), got, tt.want)
		}
	}
}
