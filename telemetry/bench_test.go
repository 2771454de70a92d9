package telemetry

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/journal"
)

// chainLab is a lab of n nodes: a client, n-2 forwarders in a row and a server.
func chainLab(name string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nendpoints: {client: {}, server: {}}\nfunctions:\n", name)
	var hops []string
	for i := 1; i <= n-2; i++ {
		fmt.Fprintf(&b, "  f%d: {kind: forwarder}\n", i)
		hops = append(hops, fmt.Sprintf("f%d", i))
	}
	fmt.Fprintf(&b, "chains: [{name: c, from: client, to: server, hops: [%s]}]\n", strings.Join(hops, ", "))
	return b.String()
}

// benchScrape measures one full scrape (collect + text encoding) of a deployed lab of n nodes;
// the target is < 50 ms for 100 nodes.
func benchScrape(b *testing.B, n int) {
	if testing.Short() {
		b.Skip("scrape benchmarks deploy real labs")
	}
	labtest.RequireRoot(b)
	p := labtest.Plan(b, chainLab(fmt.Sprintf("t-telem-b%d", n), n))
	d := &deploy.Deployer{Journal: journal.Journal{Root: b.TempDir()}}
	b.Cleanup(func() {
		if err := d.Destroy(context.Background(), p.Lab); err != nil {
			b.Errorf("destroy %s: %v", p.Lab, err)
		}
	})
	if _, err := d.Deploy(context.Background(), p, "bench"); err != nil {
		b.Fatal(err)
	}
	h := HandlerFor(&Collector{Reader: &Reader{Source: FromDeployer(d)}})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `node="server"`) {
		b.Fatalf("scrape: %d\n%.500s", rec.Code, rec.Body)
	}
	size := rec.Body.Len()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	}
	b.StopTimer()
	b.ReportMetric(float64(size), "bytes/scrape")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/scrape")
}

func BenchmarkScrape10Nodes(b *testing.B)  { benchScrape(b, 10) }
func BenchmarkScrape100Nodes(b *testing.B) { benchScrape(b, 100) }
