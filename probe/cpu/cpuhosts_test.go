package cpu

import (
	"testing"

	"github.com/sfclab/sfclab/plan"
)

// TestCPUHostsMachine checks a lab without emulated hosts is sampled host-wide as one shared
// host holding every node (study A's firewall CPU is decided on it), and a lab with hosts
// keeps its own.
func TestCPUHostsMachine(t *testing.T) {
	p := &plan.Plan{Nodes: []*plan.Node{{Name: "client"}, {Name: "fw"}}}
	hs := cpuHosts(p)
	if len(hs) != 1 || hs[0].Name != MachineHost || !hs[0].Shared || len(hs[0].Cores) == 0 || len(hs[0].Nodes) != 2 {
		t.Errorf("cpuHosts without hosts = %+v, want the machine, shared, every core and node", hs)
	}
	p.Hosts = []*plan.Host{{Name: "h1", CPUs: "0"}}
	p.Nodes[0].Host = "h1"
	hs = cpuHosts(p)
	if len(hs) != 1 || hs[0].Name != "h1" || hs[0].Shared || len(hs[0].Nodes) != 1 {
		t.Errorf("cpuHosts with a host = %+v", hs)
	}
}
