package studies

import (
	"slices"
	"testing"

	"github.com/sfclab/sfclab/plan"
)

// TestOpenStackSFCModesMatch checks that every case of study C's modes table compares like
// with like: each scenario it names is in the experiment, the four columns send S's traffic
// through the same functions in the same order, the routed four-host lab puts every node on
// the host the transparent lab does (so both cross hosts at the same hops), and the one-host
// columns put every node on one host or none.
func TestOpenStackSFCModesMatch(t *testing.T) {
	st, err := Get(OpenStackSFC)
	if err != nil {
		t.Fatal(err)
	}
	e, _, err := st.Load(Full, "")
	if err != nil {
		t.Fatal(err)
	}
	m := st.Published.Modes
	want := []string{"transparent, 4 hosts", "routed, 4 hosts", "transparent, 1 host", "routed, 1 host"}
	if !slices.Equal(m.Columns, want) {
		t.Fatalf("columns %q, want %q (the checks below index them)", m.Columns, want)
	}
	hostOf := func(p *plan.Plan, node string) string {
		if h := p.HostOf(node); h != nil {
			return h.Name
		}
		return ""
	}
	for _, row := range m.Rows {
		t.Run(row.Case, func(t *testing.T) {
			if len(row.Scenarios) != len(m.Columns) {
				t.Fatalf("%d scenarios for %d columns", len(row.Scenarios), len(m.Columns))
			}
			var ref []string
			for i, name := range row.Scenarios {
				if name == "" {
					continue
				}
				s := e.Scenario(name)
				if s == nil {
					t.Fatalf("column %q: no scenario %q in %s", m.Columns[i], name, st.Experiment)
				}
				c, err := s.Plan.ProbeChain(s.Chain)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if ref == nil {
					ref = c.Path
				} else if !slices.Equal(c.Path, ref) {
					t.Errorf("%s goes %v, %s goes %v", name, c.Path, row.Scenarios[0], ref)
				}
				hosts := map[string]bool{}
				for _, n := range c.Path {
					hosts[hostOf(s.Plan, n)] = true
				}
				switch i {
				case 0:
					if len(hosts) < 2 {
						t.Errorf("%s: every node on one host %v", name, hosts)
					}
				case 1:
					four := e.Scenario(row.Scenarios[0]).Plan
					if got, want := len(s.Plan.AllHosts()), len(four.AllHosts()); got != want {
						t.Errorf("%s has %d hosts, %s %d", name, got, row.Scenarios[0], want)
					}
					for _, n := range c.Path {
						if got, want := hostOf(s.Plan, n), hostOf(four, n); got != want || got == "" {
							t.Errorf("%s: %s on host %q, in %s on %q", name, n, got, row.Scenarios[0], want)
						}
					}
				default:
					if len(hosts) != 1 {
						t.Errorf("%s: nodes on hosts %v, want one", name, hosts)
					}
				}
			}
		})
	}
}
