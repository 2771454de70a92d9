package http_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/probe"
	httpprobe "github.com/sfclab/sfclab/probe/http"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/vnf/httpproxy"
	"github.com/sfclab/sfclab/vnf/httpserver"
)

func lab(name, cache string) string {
	return `
name: ` + name + `
endpoints:
  client: {kind: client}
  web: {kind: http-server, http: {objects: [1k, 10k]}}
functions:
  proxy: {kind: http-proxy, params: {cache: ` + cache + `}}
chains:
  - {name: web, from: client, to: web, hops: [proxy]}
  - {name: direct, from: client, to: web}
`
}

// TestParseAB parses a report of ab 2.3 (Debian 12) taken through a Squid proxy.
func TestParseAB(t *testing.T) {
	out, err := os.ReadFile("testdata/ab.txt")
	if err != nil {
		t.Fatal(err)
	}
	r, err := httpprobe.ParseAB(out)
	if err != nil {
		t.Fatal(err)
	}
	want := httpprobe.ABResult{TimeTaken: 0.352, Complete: 500, Failed: 2, Non2xx: 3, RPS: 1420.05,
		TimePerRequest: 7.042, HTMLBytes: 5099520, TotalBytes: 5253620}
	if r != want {
		t.Errorf("ParseAB = %+v\nwant      %+v", r, want)
	}
	if _, err := httpprobe.ParseAB([]byte("apr_socket_connect(): Connection refused (111)\n")); err == nil {
		t.Error("ParseAB of an aborted run: no error")
	}
}

func TestResolveAndABArgs(t *testing.T) {
	p := labtest.Plan(t, lab("t-resolve", "false"))
	tg, err := httpprobe.Resolve(p, p.Chain("web"), "10k")
	if err != nil {
		t.Fatal(err)
	}
	if tg.Source != "client" || tg.Proxy != netip.MustParseAddrPort("198.18.0.2:3128") || tg.URL != "http://198.18.1.2:80/obj-10k" || tg.Size != 10240 {
		t.Errorf("Resolve(web) = %+v", tg)
	}
	got := strings.Join(httpprobe.ABArgs(tg, httpprobe.Config{Requests: 500, Concurrency: 10}), " ")
	if want := "ab -q -r -n 500 -c 10 -s 30 -X 198.18.0.2:3128 http://198.18.1.2:80/obj-10k"; got != want {
		t.Errorf("ABArgs = %s\nwant    %s", got, want)
	}
	d, err := httpprobe.Resolve(p, p.Chain("direct"), "")
	if err != nil {
		t.Fatal(err)
	}
	if d.Proxy.IsValid() || !strings.HasSuffix(d.URL, ":80/obj-1k") {
		t.Errorf("Resolve(direct, first object) = %+v", d)
	}
	if _, err := httpprobe.Resolve(p, p.Chain("web"), "2k"); err == nil {
		t.Error("Resolve of an object the origin does not serve: no error")
	}
}

// run runs the probe and collects its samples by metric.
func run(t testing.TB, env probe.Env, cfg httpprobe.Config) (map[string][]float64, error) {
	t.Helper()
	got := map[string][]float64{}
	err := httpprobe.New(cfg).Run(context.Background(), env, func(s results.Sample) {
		got[s.Metric] = append(got[s.Metric], s.Value)
		if s.Probe != httpprobe.Name || s.Labels["object"] != cfg.Object {
			t.Errorf("sample %+v: probe or labels wrong", s)
		}
	})
	return got, err
}

func one(t testing.TB, m map[string][]float64, metric string) float64 {
	t.Helper()
	if len(m[metric]) != 1 {
		t.Fatalf("metric %s: %d samples, want 1", metric, len(m[metric]))
	}
	return m[metric][0]
}

func abMetric(samples []results.Sample, metric string) float64 {
	for _, s := range samples {
		if s.Metric == metric {
			return s.Value
		}
	}
	return math.NaN()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// abTolerance is how far sfclab's client may be from ab on the declared estimate in the
// benchmark of study B's cells, which runs alone under the suite lock.
const abTolerance = 0.05

// abTestTolerance is the bound for TestProbeMatchesAB in `make test`. A probe that waits,
// retries or miscounts is off by far more than it: one SYN retransmission (1 s) in a run of
// 100 requests of about 1 ms each is +1000 %, one wakeup missed until the 50 ms poll tick +55 %
// on a 90 ms run (+125 % on the 40 ms runs of an idle host).
// Beside other work the estimate moves by much less but by more than 5 %: on CI (2026-11-27,
// stop 21) the pairs split by order, the probe run right after ab took 0.098-0.116 s and the
// probe run right after a probe 0.081-0.108 s, while ab stayed at 0.077-0.107 s, so the median
// of the 32 pair ratios landed between the two groups (+16 %). With one core of the 2-core
// development host busy (stress-ng --cpu 1, 2026-11-27) the probe was slower in both orders:
// +17, +25, +26 and +22 % on the c=1 and c=10 cells, +25 % over 32 pairs (single pairs up to
// +73 %), where the idle host gave -7 to +6 %. Under that load the probe's median request
// (0.30-0.34 ms) was no slower than ab's mean (0.34-0.38 ms); a tail of requests at 1.5-2 ms
// (a wakeup queued behind the busy core) made the difference. 40 % lies between that noise
// (1.26) and the smallest fault (1.55), about their geometric middle, so the test still fails
// every fault above. With both cores busy (stress-ng --cpu 2, more than the suite runs
// beside) 9 cells gave +1 to +29 %, and once +71 % over the first 16 pairs, +36 % over all
// 32: that load can still fail it. The 5 % agreement is the benchmark's claim, which runs alone under the
// suite lock, not the unit test's.
const abTestTolerance = 0.40

// abCell is one HTTP load cell compared between the probe and ab.
type abCell struct {
	n, c   int
	object string
	pairs  int
}

// compareWithAB runs sfclab's client and ab alternately (who goes first alternates) through
// the chain of env, pairs runs of each cell, and judges on one estimate declared in advance:
// the median of the probe/ab ratios of the pairs (a pair runs back to back, so slow changes of
// the host's load cancel out). It reports the direction (probe slower or faster than ab). On a
// busy two-core host single runs vary by far more than 5 %; when the estimate is outside 5 %,
// it takes as many pairs again once before it judges. It returns the estimate per cell.
func compareWithAB(tb testing.TB, env probe.Env, cells []abCell, tolerance float64) []float64 {
	tb.Helper()
	var out []float64
	for _, tc := range cells {
		size := map[string]float64{"1k": 1024, "10k": 10240, "100k": 102400, "1M": 1 << 20}[tc.object]
		cfg := httpprobe.Config{Requests: tc.n, Concurrency: tc.c, Object: tc.object, Timeout: 30 * time.Second}
		// Warm up both paths (connection tracking, page cache, Squid's server connections).
		if _, err := run(tb, env, httpprobe.Config{Requests: 100, Concurrency: tc.c, Object: tc.object}); err != nil {
			tb.Fatal(err)
		}
		var ours, abs, ratios []float64
		for round := 1; ; round++ {
			for i := 0; i < tc.pairs; i++ {
				var s []results.Sample
				var err error
				if i%2 == 1 {
					if s, err = httpprobe.RunAB(context.Background(), env, cfg); err != nil {
						tb.Fatal(err)
					}
				}
				m, err := run(tb, env, cfg)
				if err != nil {
					tb.Fatal(err)
				}
				if e, n := one(tb, m, "errors"), one(tb, m, "non2xx"); e != 0 || n != 0 {
					tb.Fatalf("probe: %v errors, %v non-2xx", e, n)
				}
				if got := len(m["request_time"]); got != cfg.Requests {
					tb.Errorf("probe: %d request_time samples, want %d", got, cfg.Requests)
				}
				if b := one(tb, m, "bytes"); b != float64(cfg.Requests)*size {
					tb.Errorf("probe: %v bytes, want %v", b, float64(cfg.Requests)*size)
				}
				if i%2 == 0 {
					if s, err = httpprobe.RunAB(context.Background(), env, cfg); err != nil {
						tb.Fatal(err)
					}
				}
				if f := abMetric(s, "errors"); f != 0 {
					tb.Fatalf("ab: %v failed requests", f)
				}
				ours = append(ours, one(tb, m, "total_time"))
				abs = append(abs, abMetric(s, "total_time"))
				ratios = append(ratios, ours[len(ours)-1]/abs[len(abs)-1])
			}
			est := median(ratios) - 1
			dir := "slower than"
			if est < 0 {
				dir = "faster than"
			}
			tb.Logf("c=%d, %d x %s through squid, %d pairs: probe %.3f s median, ab %.3f s median; declared estimate (median of the pair ratios): the probe is %.1f %% %s ab",
				tc.c, tc.n, tc.object, len(ours), median(ours), median(abs), 100*math.Abs(est), dir)
			if math.Abs(est) <= tolerance {
				out = append(out, est)
				break
			}
			if round == 2 {
				tb.Errorf("c=%d, %s: the probe is %.1f %% %s ab (median of %d pair ratios), more than %.0f %%\nprobe %.3f\nab    %.3f",
					tc.c, tc.object, 100*math.Abs(est), dir, len(ratios), 100*tolerance, ours, abs)
				out = append(out, est)
				break
			}
		}
	}
	return out
}

// TestProbeMatchesAB compares the probe with ab on small cells (see compareWithAB); study B's
// hard cells are BenchmarkProbeVsABStudyCells.
func TestProbeMatchesAB(t *testing.T) {
	labtest.Exclusive(t) // not while another package's test burns CPU
	l := labtest.Deploy(t, lab("t-http-ab", "false"))
	est := compareWithAB(t, l.ProbeEnv(t, "web"), []abCell{{100, 1, "10k", 16}, {250, 10, "10k", 10}}, abTestTolerance)
	if len(est) != 2 {
		t.Fatalf("%d estimates for 2 cells", len(est))
	}
}

// BenchmarkProbeVsABStudyCells compares the probe with ab on the test's small cells and on
// study B's hard cells: 10,000
// requests at concurrency 100 (1k objects), and a 1M object (1,000 requests at concurrency 1
// and 100: 10,000 would move 10 GB per run). It fails when the declared estimate (median of
// the pair ratios) is outside 5 %, and reports it per cell as probe/ab-1.
//
//	flock /tmp/sfclab-suite.lock go test ./probe/http -run '^$' -bench ProbeVsAB -benchtime 1x
func BenchmarkProbeVsABStudyCells(b *testing.B) {
	labtest.Exclusive(b)
	l := labtest.Deploy(b, lab1M("t-http-abh"))
	// The test's small cells first, held here to the 5 % the test cannot hold beside other work.
	cells := []abCell{{100, 1, "10k", 16}, {250, 10, "10k", 10}, {10000, 100, "1k", 3}, {1000, 1, "1M", 3}, {1000, 100, "1M", 3}}
	for i := 0; i < b.N; i++ {
		est := compareWithAB(b, l.ProbeEnv(b, "web"), cells, abTolerance)
		for k, e := range est {
			b.ReportMetric(e, fmt.Sprintf("probe/ab-1_c%d_%s", cells[k].c, cells[k].object))
		}
	}
}

// lab1M is lab with the study's 1M object on the origin as well, cache off.
func lab1M(name string) string {
	return strings.Replace(lab(name, "false"), "objects: [1k, 10k]", "objects: [1k, 10k, 1M]", 1)
}

// TestCacheServesRepeats checks that through a caching Squid the origin is asked once.
func TestCacheServesRepeats(t *testing.T) {
	l := labtest.Deploy(t, lab("t-http-cache", "true"))
	env := l.ProbeEnv(t, "web")
	m, err := run(t, env, httpprobe.Config{Requests: 200, Concurrency: 4, Object: "10k"})
	if err != nil {
		t.Fatal(err)
	}
	if e := one(t, m, "errors") + one(t, m, "non2xx"); e != 0 {
		t.Fatalf("%v failed requests", e)
	}
	ctr, err := httpproxy.Counters(context.Background(), l.Node(t, "proxy"), l.P.Node("proxy").Function)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("200 requests at c=4 in %.3f s; squid: requests %v, hits %v, server requests %v",
		one(t, m, "total_time"), ctr["client_http.requests"], ctr["client_http.hits"], ctr["server.http.requests"])
	if ctr["client_http.hits"] < 190 || ctr["server.http.requests"] > 10 {
		t.Errorf("squid hits %v, origin requests %v of 200: the cache does not serve repeats", ctr["client_http.hits"], ctr["server.http.requests"])
	}
}

// TestDeadChain stops the origin, then the proxy: the probe must count errors quickly.
func TestDeadChain(t *testing.T) {
	l := labtest.Deploy(t, lab("t-http-dead", "false"))
	env := l.ProbeEnv(t, "web")
	ctx := context.Background()
	if err := (httpserver.Server{}).Teardown(ctx, l.VnfEnv(t, "web")); err != nil {
		t.Fatal(err)
	}
	// Squid answers 503 for a dead origin: answers, not errors.
	t0 := time.Now()
	m, err := run(t, env, httpprobe.Config{Requests: 200, Concurrency: 10, Object: "1k", Timeout: 2 * time.Second})
	took := time.Since(t0)
	if err != nil {
		t.Fatalf("origin down: %v", err)
	}
	t.Logf("origin down: 200 requests in %s: errors %v, non2xx %v", took.Round(time.Millisecond), one(t, m, "errors"), one(t, m, "non2xx"))
	if one(t, m, "non2xx") != 200 || took > 10*time.Second {
		t.Errorf("origin down: non2xx %v of 200 in %s", one(t, m, "non2xx"), took)
	}
	// ab agrees.
	s, err := httpprobe.RunAB(ctx, env, httpprobe.Config{Requests: 200, Concurrency: 10, Object: "1k", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("ab, origin down: %v", err)
	}
	if abMetric(s, "non2xx") != 200 {
		t.Errorf("ab, origin down: non2xx %v", abMetric(s, "non2xx"))
	}
	// No proxy either: connections are refused; the run stops early as a dead chain.
	if err := (httpproxy.Proxy{}).Teardown(ctx, l.VnfEnv(t, "proxy")); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	m, err = run(t, env, httpprobe.Config{Requests: 10000, Concurrency: 10, Object: "1k", Timeout: 2 * time.Second})
	took = time.Since(t0)
	t.Logf("proxy down: %s: errors %v, requests %v: %v", took.Round(time.Millisecond), one(t, m, "errors"), one(t, m, "requests"), err)
	if !errors.Is(err, httpprobe.ErrDeadChain) || one(t, m, "errors") < httpprobe.DeadAfter || took > 5*time.Second {
		t.Errorf("proxy down: err %v, errors %v, in %s; want ErrDeadChain quickly", err, one(t, m, "errors"), took)
	}
	// ab gives up, or counts every request failed.
	s, err = httpprobe.RunAB(ctx, env, httpprobe.Config{Requests: 100, Concurrency: 10, Object: "1k", Timeout: 2 * time.Second})
	t.Logf("ab, proxy down: %v, errors %v", err, abMetric(s, "errors"))
	if err == nil && abMetric(s, "errors") < 100 {
		t.Errorf("ab with the proxy down: no error, %v failed requests", abMetric(s, "errors"))
	}
}
