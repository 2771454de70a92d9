package flows

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

func studyC(t *testing.T, name string) *plan.Plan {
	t.Helper()
	lab, err := spec.Load(filepath.Join("..", "..", "experiments", "labs", "study-c", name), kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(lab)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPorts checks what the probe counts: every function's egress (on a transparent lab at
// its veth's host-side end, marked ^), a tap's ingress with the hop before it, on transparent
// and routed labs.
func TestPorts(t *testing.T) {
	for _, tc := range []struct{ lab, want string }{
		{"t-fig6.yaml", "v1@contr01:eth0^ v2@comp02:eth0^ v3@comp02:eth0^ v4@comp03:eth0^ v5@contr01:eth0^ v6@comp04:eth0^ v7@comp03:eth0^"},
		{"t-tap-remote.yaml", "tap@comp03:eth0(tap after v1@contr01) v1@contr01:eth0^ v6@comp04:eth0^"},
		{"t-c0.yaml", ""},
		{"r-c2.yaml", "v1@:egress v6@:egress"},
	} {
		var got []string
		for _, p := range Ports(studyC(t, tc.lab)) {
			s := fmt.Sprintf("%s@%s:%s", p.Node, p.Host, p.Ifname)
			if p.Tap {
				s += fmt.Sprintf("(tap after %s@%s)", p.Prev, p.PrevHost)
			}
			if p.Peer {
				s += "^" // counted at the host-side end
			}
			got = append(got, s)
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("%s: ports %q, want %q", tc.lab, g, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	p := studyC(t, "t-fig6.yaml")
	ok := Config{Flows: []Flow{{Chain: "sfp1", Bitrate: "3M", Duration: 9 * time.Second}, {Chain: "sfp2", Duration: time.Second}}}
	if err := ok.Validate(p); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{}, "give 1-16 flows"},
		{Config{Flows: []Flow{{Chain: "sfp1", Duration: time.Second}}, Interval: time.Millisecond}, "interval 1ms"},
		{Config{Flows: []Flow{{Chain: "sfp1", Duration: time.Second, Protocol: "sctp"}}}, `protocol "sctp"`},
		{Config{Flows: []Flow{{Chain: "sfp1", Duration: 2 * time.Hour}}}, "must be 1s-1h"},
		{Config{Flows: []Flow{{Chain: "sfp1", Duration: time.Second}, {Chain: "sfp1", Duration: time.Second}}}, "both use destination port 5201"},
		{Config{Flows: []Flow{{Chain: "x", Duration: time.Second}}}, "no such port chain"},
	} {
		if err := tc.c.Validate(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.c, err, tc.want)
		}
	}
	if err := ok.Validate(studyC(t, "t-c2.yaml")); err == nil || !strings.Contains(err.Error(), "no such port chain") {
		t.Errorf("flows on another lab's chains: %v", err)
	}
}
