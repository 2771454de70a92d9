package telemetry

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestDashboardUsesOurMetrics checks that every query of the Grafana dashboard in docs/ names
// only metrics the collector describes, so a renamed metric cannot leave the dashboard empty.
func TestDashboardUsesOurMetrics(t *testing.T) {
	data, err := os.ReadFile("../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("decode dashboard: %v", err)
	}
	known := map[string]bool{}
	ch := make(chan *prometheus.Desc, 64)
	(&Collector{}).Describe(ch)
	close(ch)
	for desc := range ch {
		m := regexp.MustCompile(`fqName: "([^"]+)"`).FindStringSubmatch(desc.String())
		known[m[1]] = true
	}
	names := regexp.MustCompile(`sfclab_[a-z_]+`)
	var hop, cpu bool
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, n := range names.FindAllString(tg.Expr, -1) {
				if !known[n] {
					t.Errorf("panel %q: query uses %s, which the collector does not export", p.Title, n)
				}
			}
			hop = hop || strings.Contains(tg.Expr, "sfclab_chain_hop_bytes_total")
			cpu = cpu || strings.Contains(tg.Expr, "sfclab_node_cpu_seconds_total")
		}
	}
	if !hop || !cpu {
		t.Errorf("dashboard lacks throughput per hop (%v) or CPU per function (%v)", hop, cpu)
	}
}
