package plan_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/plan"
)

// TestStudyCGolden pins the plans of study C's labs (placement on four hosts, transparent and
// routed, Fig. 6's three chains sharing v4, the tap on another host than the hop before it).
func TestStudyCGolden(t *testing.T) {
	for _, name := range []string{"t-c6", "r4-c6", "t-fig6", "t-tap-remote"} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := build(t, filepath.Join("..", "experiments", "labs", "study-c", name+".yaml")).WriteText(&buf); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "study-c-"+name+".plan.txt")
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./plan -update)", err)
			}
			if buf.String() != string(want) {
				t.Errorf("plan of %s differs from %s:\n%s", name, golden, buf.String())
			}
		})
	}
}

// TestProbeChain checks the chain a probe sees in routed and transparent labs: source, path
// through the first instance of every group (taps left out), destination, target and port.
func TestProbeChain(t *testing.T) {
	studyC := func(f string) string { return filepath.Join("..", "experiments", "labs", "study-c", f) }
	for _, tc := range []struct {
		lab, chain         string
		name, path, target string
		port               uint16
		hops               int
		err                string
	}{
		{lab: studyC("t-c0.yaml"), name: plan.DirectChain, path: "s d", target: "d"},
		{lab: studyC("t-c0.yaml"), chain: "c1", err: `only "direct"`},
		{lab: studyC("t-c6.yaml"), name: "c6", path: "s v1 v2 v4 v3 v5 v6 d", target: "d", hops: 6},
		{lab: studyC("t-fig6.yaml"), chain: "sfp2", name: "sfp2", path: "s v2 v4 v6 d", target: "d", port: 5202, hops: 3},
		{lab: studyC("t-fig6.yaml"), chain: "nope", err: "port chains: sfp1, sfp2, sfp3"},
		{lab: studyC("t-tap-remote.yaml"), name: "tap", path: "s v1 v6 d", target: "d", port: 5201, hops: 3},
		{lab: studyC("r-c2.yaml"), name: "c2", path: "s v1 v6 d", target: "d", hops: 2},
		{lab: studyC("r-c2.yaml"), chain: "c3", err: `no chain "c3"`},
		{lab: studyC("r4-c6.yaml"), name: "c6", path: "s v1 v2 v4 v3 v5 v6 d", target: "d", hops: 6},
		{lab: "../examples/transparent-fw.yaml", chain: "ping", name: "ping", path: "client fw server", target: "server", hops: 1},
	} {
		t.Run(filepath.Base(tc.lab)+"/"+tc.chain, func(t *testing.T) {
			p := build(t, tc.lab)
			c, err := p.ProbeChain(tc.chain)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Name != tc.name || strings.Join(c.Path, " ") != tc.path || c.TargetNode != tc.target || c.Port != tc.port || len(c.Hops) != tc.hops {
				t.Errorf("chain = %s path %v target %s port %d hops %d; want %s %s %s %d %d", c.Name, c.Path, c.TargetNode, c.Port, len(c.Hops), tc.name, tc.path, tc.target, tc.port, tc.hops)
			}
			if !c.Target.IsValid() {
				t.Error("no target address")
			}
		})
	}
}
