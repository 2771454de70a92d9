package sfcclient

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func chainOf(n int) *ChainFile {
	f := &ChainFile{Source: "client", Destination: "server", MatchFields: map[string]any{"protocol": "udp"}}
	for i := 1; i <= n; i++ {
		f.Chain = append(f.Chain, Element{Name: fmt.Sprintf("f%d", i), Direction: DirOut})
	}
	return f
}

// noop is one HTTP round trip that changes nothing: the baseline the API's steps are
// compared with, measured interleaved in the same run.
func noop(b *testing.B, c *Client) time.Duration {
	start := time.Now()
	if err := c.do(context.Background(), http.MethodGet, "/v2.0/extensions", nil, nil); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkChain6 deploys a 6-function chain over the API in the four steps (1 FC, 6 PP,
// 6 PPG, 1 PC: 14 requests) and removes it; it reports the deploy time, the port-chain
// step per function, and the deploy time as a multiple of one no-op round trip.
func BenchmarkChain6(b *testing.B) {
	c, rec, _ := serve(&testing.T{}, "api-b6", 6)
	ctx := context.Background()
	f := chainOf(6)
	var total, pc, base time.Duration
	for i := 0; i < b.N; i++ {
		d, err := c.Apply(ctx, f, "b6")
		if err != nil {
			b.Fatal(err)
		}
		total += d.Total()
		pc += d.Times[3]
		b.StopTimer()
		if err := c.Remove(ctx, d); err != nil {
			b.Fatal(err)
		}
		base += noop(b, c)
		b.StartTimer()
	}
	if len(rec.Installed()) != 0 {
		b.Fatalf("left in the data plane: %d", len(rec.Installed()))
	}
	n := float64(b.N)
	b.ReportMetric(total.Seconds()*1000/n, "ms/chain")
	b.ReportMetric(pc.Seconds()*1000/n/6, "ms-PC/function")
	b.ReportMetric(float64(total)/float64(base), "x-noop-RTT")
}

// BenchmarkPortChainStep times the port-chain step alone for chains of 1 and 10 functions.
func BenchmarkPortChainStep(b *testing.B) {
	for _, n := range []int{1, 10} {
		b.Run(fmt.Sprintf("functions=%d", n), func(b *testing.B) {
			c, _, _ := serve(&testing.T{}, "api-bpc", 10)
			ctx := context.Background()
			f := chainOf(n)
			var pc time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				d, err := c.Apply(ctx, f, "bpc")
				if err != nil {
					b.Fatal(err)
				}
				pc += d.Times[3]
				if err := c.Remove(ctx, d); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(pc.Seconds()*1000/float64(b.N), "ms-PC")
			b.ReportMetric(pc.Seconds()*1000/float64(b.N)/float64(n), "ms-PC/function")
		})
	}
}

// TestHundredChainsLeaveNothing creates and deletes 100 chains of 3 functions through the
// client and checks that no chain stays in the data plane, no resource in the API or its
// stored state, and no goroutine behind.
func TestHundredChainsLeaveNothing(t *testing.T) {
	c, rec, _ := serve(t, "api-100", 3)
	hc := &http.Client{Transport: &http.Transport{}}
	c.HTTP = hc
	ctx := context.Background()
	before := runtime.NumGoroutine()
	for i := 0; i < 100; i++ {
		d, err := c.Apply(ctx, chainOf(3), fmt.Sprintf("c%d", i))
		if err != nil {
			t.Fatalf("chain %d: %v", i, err)
		}
		if err := c.Remove(ctx, d); err != nil {
			t.Fatalf("chain %d: %v", i, err)
		}
	}
	if n := len(rec.Installed()); n != 0 {
		t.Errorf("%d chains left in the data plane", n)
	}
	if calls := rec.Calls(); len(calls) != 200 {
		t.Errorf("%d data plane calls, want 100 applies and 100 removes", len(calls))
	}
	for _, plural := range []string{"flow_classifiers", "port_pairs", "port_pair_groups", "port_chains", "service_graphs"} {
		var left map[string][]any
		if err := c.do(ctx, "GET", "/v2.0/sfc/"+plural, nil, &left); err != nil || len(left[plural]) != 0 {
			t.Errorf("%s left: %v %v", plural, left, err)
		}
	}
	hc.CloseIdleConnections()
	var after int
	for i := 0; i < 50; i++ { // server goroutines of closed connections end asynchronously
		if after = runtime.NumGoroutine(); after <= before {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if after > before {
		t.Errorf("goroutines: %d before, %d after 100 chains", before, after)
	}
	t.Logf("goroutines: %d before, %d after 100 chains created and deleted", before, after)
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), "*", "*", "api-100", "sfc.json*"))
	if len(matches) == 0 {
		t.Errorf("found no stored state to check under %s", os.TempDir())
	}
	for _, m := range matches {
		data, _ := os.ReadFile(m)
		if strings.Contains(string(data), `"id"`) {
			t.Errorf("stored state %s still holds resources: %s", m, data)
		}
	}
}
