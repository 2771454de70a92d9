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
				Expr   string `json:"expr"`
				Legend string `json:"legendFormat"`
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
			if strings.Contains(tg.Expr, "sfclab_node_cpu_seconds_total") {
				cpu = true
				// A TCG guest's CPU is the emulator's: the panel must keep and show its mark.
				if why := dropsLabel(tg.Expr, "mark"); why != "" {
					t.Errorf("panel %q: query %s drops the CPU's mark label (%s): a TCG node's CPU would look comparable", p.Title, tg.Expr, why)
				}
				if !strings.Contains(tg.Legend, "{{mark}}") {
					t.Errorf("panel %q: legend %q does not show the CPU's mark ({{mark}}): a TCG node's CPU would look comparable", p.Title, tg.Legend)
				}
			}
		}
	}
	if !hop || !cpu {
		t.Errorf("dashboard lacks throughput per hop (%v) or CPU per function (%v)", hop, cpu)
	}
}

// aggregation matches a PromQL aggregation operator with its grouping clause, if any, before
// or after its argument ("sum by (node) (...)", "sum(...) by (node)").
var (
	aggregation = regexp.MustCompile(`\b(sum|avg|min|max|count|count_values|group|stddev|stdvar|topk|bottomk|quantile)\s*(?:(by|without)\s*\(([^)]*)\))?\s*\(`)
	grouping    = regexp.MustCompile(`\)\s*(by|without)\s*\(([^)]*)\)`)
)

// dropsLabel says why expr's result lacks label (an aggregation without it in its by
// clause, or with it in its without clause), "" when every aggregation keeps it. A query
// without aggregation keeps every label of its series.
func dropsLabel(expr, label string) string {
	trailing := grouping.FindAllStringSubmatch(expr, -1)
	for _, m := range aggregation.FindAllStringSubmatch(expr, -1) {
		op, clause, labels := m[1], m[2], m[3]
		if clause == "" {
			if len(trailing) == 0 {
				return op + " without a by clause"
			}
			clause, labels, trailing = trailing[0][1], trailing[0][2], trailing[1:]
		}
		has := false
		for _, l := range strings.Split(labels, ",") {
			has = has || strings.TrimSpace(l) == label
		}
		if clause == "by" && !has {
			return op + " by (" + labels + ")"
		}
		if clause == "without" && has {
			return op + " without (" + labels + ")"
		}
	}
	return ""
}

// TestDropsLabel: the dashboard test's check of a query's aggregations, with queries that
// keep the mark and queries that drop it.
func TestDropsLabel(t *testing.T) {
	for _, tc := range []struct {
		expr  string
		drops bool
	}{
		{`rate(sfclab_node_cpu_seconds_total{lab="$lab"}[1m])`, false},
		{`sum by (node, mark) (rate(sfclab_node_cpu_seconds_total[1m]))`, false},
		{`sum by (node,mode,mark) (rate(sfclab_node_cpu_seconds_total[1m]))`, false},
		{`sum(rate(sfclab_node_cpu_seconds_total[1m])) by (node, mark)`, false},
		{`sum without (mode) (rate(sfclab_node_cpu_seconds_total[1m]))`, false},
		{`sum by (node) (rate(sfclab_node_cpu_seconds_total[1m]))`, true},
		{`sum by (node, mode) (rate(sfclab_node_cpu_seconds_total[1m]))`, true},
		{`sum(rate(sfclab_node_cpu_seconds_total[1m])) by (node)`, true},
		{`sum(rate(sfclab_node_cpu_seconds_total[1m]))`, true},
		{`sum without (mark) (rate(sfclab_node_cpu_seconds_total[1m]))`, true},
		{`max by (node, mark) (sum by (node) (rate(sfclab_node_cpu_seconds_total[1m])))`, true},
	} {
		if why := dropsLabel(tc.expr, "mark"); (why != "") != tc.drops {
			t.Errorf("dropsLabel(%s) = %q, want drops = %v", tc.expr, why, tc.drops)
		}
	}
}
