package httpproxy_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/internal/nettest"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf"
	"github.com/sfclab/sfclab/vnf/httpproxy"
	"github.com/sfclab/sfclab/vnf/httpserver"
)

func lab(name, proxyParams string) string {
	return `
name: ` + name + `
endpoints:
  client: {kind: client}
  web: {kind: http-server, http: {objects: [1k, 10k]}}
functions:
  proxy: {kind: http-proxy, params: ` + proxyParams + `}
chains:
  - {name: web, from: client, to: web, hops: [proxy]}
`
}

// client returns an HTTP client whose connections are made inside node, sending every
// request through proxy.
func client(node runtime.Node, proxy string) *http.Client {
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: proxy}),
		DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			err = node.Do(func() error {
				c, err = (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
		DisableKeepAlives: true,
	}
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

func get(t *testing.T, c *http.Client, u string) (int, []byte) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", u, err)
	}
	return resp.StatusCode, body
}

func want(size int64) []byte {
	b, _ := io.ReadAll(httpserver.Content(size))
	return b
}

func txBytes(t *testing.T, p *plan.Plan, node, ifname string) uint64 {
	t.Helper()
	return nettest.LinkStats(t, p.Node(node).Netns, ifname).TxBytes
}

// TestProxyForwards deploys client -> squid (cache off) -> apache and fetches both objects
// through the proxy: right bytes, nothing served from cache, the origin sends every copy.
// udpOut is the UDP datagrams node's network namespace has sent (/proc/net/snmp).
func udpOut(t *testing.T, node runtime.Node) uint64 {
	t.Helper()
	var b []byte
	if err := node.Do(func() (err error) {
		b, err = os.ReadFile("/proc/thread-self/net/snmp")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var head []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if head == nil {
			head = f
			continue
		}
		for i, k := range head {
			if k == "OutDatagrams" && i < len(f) {
				v, err := strconv.ParseUint(f[i], 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
		}
	}
	t.Fatalf("no Udp OutDatagrams in /proc/net/snmp:\n%s", b)
	return 0
}

func TestProxyForwards(t *testing.T) {
	l := labtest.Deploy(t, lab("t-sq-fwd", "{}"))
	c := l.P.Chains[0]
	proxy := net.JoinHostPort(c.Target.String(), "3128")
	origin := l.P.Node("proxy").Function.Backends[0]
	cl := client(l.Node(t, "client"), proxy)
	before := txBytes(t, l.P, "web", "eth0")
	dnsBefore := udpOut(t, l.Node(t, "proxy"))
	for i := 0; i < 5; i++ {
		for _, o := range []string{"1k", "10k"} {
			size, _ := spec.ParseSize(o)
			st, body := get(t, cl, "http://"+net.JoinHostPort(origin.Addr.String(), "80")+spec.ObjectPath(o))
			if st != 200 || !bytes.Equal(body, want(size)) {
				t.Fatalf("GET %s through squid: status %d, %d bytes (want 200, %d bytes of Content)", o, st, len(body), size)
			}
		}
	}
	// Squid looks up each client's reverse name; the lab's hosts file answers it, so not one
	// DNS query leaves the node (without it: one per connection, each queued for 30 s).
	if n := udpOut(t, l.Node(t, "proxy")) - dnsBefore; n != 0 {
		t.Errorf("the proxy's node sent %d UDP datagrams (DNS) for 10 requests; want 0: its hosts file names the lab's addresses", n)
	}
	sent := txBytes(t, l.P, "web", "eth0") - before
	if sent < 5*(1024+10240) {
		t.Errorf("origin sent %d bytes for 5 x (1k + 10k) with the cache off; some came from a cache", sent)
	}
	ctr, err := httpproxy.Counters(context.Background(), l.Node(t, "proxy"), l.P.Node("proxy").Function)
	if err != nil {
		t.Fatal(err)
	}
	if ctr["client_http.requests"] < 10 || ctr["client_http.hits"] != 0 {
		t.Errorf("squid counters: requests %v hits %v; want >= 10 and 0", ctr["client_http.requests"], ctr["client_http.hits"])
	}
}

// TestProxyCache checks that with the cache on Squid answers repeated requests itself: its
// hit counter rises, the origin sends the object about once, and (with the access log on)
// access.log shows memory hits. It runs in memory, and on disk with two SMP workers.
func TestProxyCache(t *testing.T) {
	for _, tc := range []struct{ name, params string }{
		{"mem", "{cache: true}"},
		{"smp", "{cache: true, cache_dir_mb: 32, workers: 2, policy: heap LFUDA}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := labtest.Deploy(t, lab("t-sq-"+tc.name, tc.params))
			c := l.P.Chains[0]
			pf := l.P.Node("proxy").Function
			proxy := net.JoinHostPort(c.Target.String(), "3128")
			u := "http://" + net.JoinHostPort(pf.Backends[0].Addr.String(), "80") + "/obj-10k"
			cl := client(l.Node(t, "client"), proxy)

			// Restart the proxy with its access log on, as a user would to look at it.
			env := l.VnfEnv(t, "proxy")
			withLog := httpproxy.Proxy{AccessLog: true}
			if err := withLog.Teardown(context.Background(), env); err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			if err := withLog.Setup(context.Background(), env); err != nil {
				t.Fatal(err)
			}
			t.Logf("squid restarted in %s", time.Since(t0).Round(time.Millisecond))
			before := txBytes(t, l.P, "web", "eth0")
			const n = 30
			t0 = time.Now()
			for i := 0; i < n; i++ {
				if st, body := get(t, cl, u); st != 200 || len(body) != 10240 {
					t.Fatalf("request %d: status %d, %d bytes", i, st, len(body))
				}
			}
			t.Logf("%d requests in %s", n, time.Since(t0).Round(time.Millisecond))
			sent := txBytes(t, l.P, "web", "eth0") - before
			// SMP workers share the memory cache, but a worker misses while another one is
			// still storing the object, and each miss stores a new copy that the other worker
			// then misses on: under load (CI) runs of misses follow runs of hits (13 hits of
			// 30 seen). What must hold is that the workers serve from the shared cache at all:
			// with the cache off there are no hits and 30 copies.
			copies, minHits := 1, n-3
			if strings.Contains(tc.params, "workers") {
				copies, minHits = n-n/5, n/5
			}
			if sent > uint64(copies)*(10240+2000) {
				t.Errorf("origin sent %d bytes for %d requests of 10k with the cache on; want about one copy", sent, n)
			}
			ctr, err := httpproxy.Counters(context.Background(), l.Node(t, "proxy"), pf)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("origin sent %d bytes; squid requests %v hits %v", sent, ctr["client_http.requests"], ctr["client_http.hits"])
			if ctr["client_http.hits"] < float64(minHits) {
				t.Errorf("squid hits = %v of %d requests", ctr["client_http.hits"], n)
			}
			log, err := os.ReadFile(filepath.Join(httpproxy.Dir(env), httpproxy.AccessFile))
			if err != nil {
				t.Fatal(err)
			}
			t0 = time.Now()
			if err := withLog.Teardown(context.Background(), env); err != nil {
				t.Error(err)
			}
			t.Logf("teardown in %s", time.Since(t0).Round(time.Millisecond))
			if hits := strings.Count(string(log), "TCP_MEM_HIT/200") + strings.Count(string(log), "TCP_HIT/200"); hits < minHits {
				t.Errorf("access.log has %d hits of %d requests:\n%s", hits, n, log)
			}
		})
	}
}

// TestProxySetupErrors checks that Squid's own words come back when it cannot start: a
// replacement policy it does not know, and its port taken by another Squid. Both fail fast
// and leave nothing running.
func TestProxySetupErrors(t *testing.T) {
	l := labtest.Deploy(t, lab("t-sq-err", "{}"))
	env := l.VnfEnv(t, "proxy")
	ctx := context.Background()

	bad := env
	badPlan := *env.Plan
	badPlan.Name, badPlan.Netns = "proxy-bad", env.Plan.Netns+"-bad"
	f := *badPlan.Function
	pp := *f.Params.(*httpproxy.HTTPProxyParams)
	pp.Cache, pp.CacheDir = true, 99999999999 // spec allows it, squid does not
	f.Params = &pp
	badPlan.Function = &f
	bad.Plan = &badPlan
	err := httpproxy.Proxy{}.Setup(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), "Bungled") {
		t.Errorf("setup with cache_dir_mb 99999999999: %v; want squid's complaint", err)
	} else {
		t.Logf("bad cache_dir_mb: %v", err)
	}
	if err := (httpproxy.Proxy{}).Teardown(ctx, bad); err != nil {
		t.Error(err)
	}

	// A second proxy on the same address and port, in the same node.
	dup := env
	dupPlan := *env.Plan
	dupPlan.Name, dupPlan.Netns = "proxy-dup", env.Plan.Netns+"-dup"
	dup.Plan = &dupPlan
	t0 := time.Now()
	err = httpproxy.Proxy{}.Setup(ctx, dup)
	took := time.Since(t0)
	if terr := (httpproxy.Proxy{}).Teardown(ctx, dup); terr != nil {
		t.Error(terr)
	}
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second squid on the same port: %v; want squid's 'Address already in use'", err)
	} else {
		t.Logf("port taken (%s): %v", took.Round(time.Millisecond), err)
	}
	if took > httpproxy.ReadyTimeout {
		t.Errorf("setup with the port taken took %s", took)
	}
	// The first proxy still serves.
	c := l.P.Chains[0]
	cl := client(l.Node(t, "client"), net.JoinHostPort(c.Target.String(), "3128"))
	u := "http://" + net.JoinHostPort(l.P.Node("proxy").Function.Backends[0].Addr.String(), "80") + "/obj-1k"
	if st, _ := get(t, cl, u); st != 200 {
		t.Errorf("first squid after the failed second: status %d", st)
	}
}

// TestTeardownTwice checks Teardown after Teardown, and Teardown with nothing set up.
func TestTeardownTwice(t *testing.T) {
	l := labtest.Deploy(t, lab("t-sq-td", "{}"))
	env := l.VnfEnv(t, "proxy")
	for i := 0; i < 2; i++ {
		if err := (httpproxy.Proxy{}).Teardown(context.Background(), env); err != nil {
			t.Fatalf("teardown %d: %v", i+1, err)
		}
	}
	none := vnf.Env{Node: env.Node, Plan: &plan.Node{Name: "nothing", Netns: "x", Function: env.Plan.Function}, StateDir: env.StateDir}
	if err := (httpproxy.Proxy{}).Teardown(context.Background(), none); err != nil {
		t.Errorf("teardown of a proxy never set up: %v", err)
	}
	c := l.P.Chains[0]
	err := l.Node(t, "client").Do(func() error {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(c.Target.String(), "3128"), time.Second)
		if err == nil {
			conn.Close()
		}
		return err
	})
	if err == nil {
		t.Error("squid still accepts after teardown")
	}
}
