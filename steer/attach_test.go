package steer_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/hosts"
	"github.com/sfclab/sfclab/steer"
)

// TestAttachDetach: every port of a built lab carries the steering program (tcx, or cls_bpf
// without it) and Detach removes it; a second Detach finds nothing and is no error.
func TestAttachDetach(t *testing.T) {
	l := buildLab(t, "steer-att", []string{"h1"}, []fnode{
		{name: "s", host: "h1", ports: []string{"eth0"}},
		{name: "d", host: "h1", ports: []string{"eth0"}},
	})
	hns := hosts.HostNetns(l.name, "h1")
	for _, n := range []string{"s", "d"} {
		hif := hostIf(n, "eth0")
		on, err := steer.Attached(hns, hif)
		if err != nil || !on {
			t.Fatalf("%s: attached %v, %v; want attached", hif, on, err)
		}
	}
	// Which mechanism carries it: tcx leaves no tc filter.
	hif := hostIf("s", "eth0")
	out, _ := exec.Command("ip", "netns", "exec", hns, "tc", "filter", "show", "dev", hif, "ingress").CombinedOutput()
	if strings.Contains(string(out), steer.FilterName) {
		t.Logf("%s: attached as a cls_bpf filter (no tcx in this kernel)", hif)
	} else {
		t.Logf("%s: attached by tcx", hif)
	}
	for i := 0; i < 2; i++ {
		if err := steer.Detach(hns, hif); err != nil {
			t.Fatalf("detach %d: %v", i+1, err)
		}
	}
	if on, err := steer.Attached(hns, hif); err != nil || on {
		t.Fatalf("%s after Detach: attached %v, %v", hif, on, err)
	}
	if on, err := steer.Attached(hns, hostIf("d", "eth0")); err != nil || !on {
		t.Fatalf("the other port after Detach: attached %v, %v", on, err)
	}
}
