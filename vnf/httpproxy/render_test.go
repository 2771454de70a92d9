package httpproxy_test

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/vnf/httpproxy"
)

var update = flag.Bool("update", false, "rewrite golden files")

const goldenLab = `
name: t-golden
endpoints:
  client: {kind: client}
  web: {kind: http-server, http: {objects: [1k, 10k]}}
functions:
  proxy: {kind: http-proxy}
chains:
  - {name: web, from: client, to: web, hops: [proxy]}
`

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./vnf/httpproxy -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s:\n%s", name, path, got)
	}
}

// TestSquidConfigGolden pins squid.conf for cache off (study B's forwarding proxy), cache on
// in memory, cache on disk with SMP workers and another policy, and with the access log on.
func TestSquidConfigGolden(t *testing.T) {
	p := labtest.Plan(t, goldenLab)
	f := p.Node("proxy").Function
	with := func(edit func(*httpproxy.HTTPProxyParams)) *plan.Function {
		g := *f
		pp := *f.Params.(*httpproxy.HTTPProxyParams)
		edit(&pp)
		g.Params = &pp
		return &g
	}
	dir := "/run/sfclab/labs/t-golden/nodes/proxy.squid"
	golden(t, "squid.cache-off.conf", httpproxy.SquidConfig(f, dir))
	golden(t, "squid.cache-mem.conf", httpproxy.SquidConfig(with(func(p *httpproxy.HTTPProxyParams) { p.Cache = true }), dir))
	golden(t, "squid.cache-disk-smp.conf", httpproxy.SquidConfig(with(func(p *httpproxy.HTTPProxyParams) {
		p.Cache, p.CacheDir, p.Workers, p.Policy, p.CacheMem, p.MaxObject = true, 512, 2, "heap LFUDA", 64, 32
	}), dir))
	golden(t, "squid.access-log.conf", httpproxy.Proxy{AccessLog: true}.Config(f, dir))
}

func TestServiceName(t *testing.T) {
	a, b := httpproxy.ServiceName("sfc.t-a.proxy"), httpproxy.ServiceName("sfc.t-b.proxy")
	if a == b || a != httpproxy.ServiceName("sfc.t-a.proxy") {
		t.Errorf("service names %q, %q: want distinct and stable", a, b)
	}
	for _, c := range a {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			t.Errorf("service name %q: squid -n takes letters and digits only", a)
		}
	}
}

func TestParseCounters(t *testing.T) {
	got := httpproxy.ParseCounters([]byte("sample_time = 1795306628.446147 (Sun, 22 Nov 2026 00:17:08 GMT)\nclient_http.requests = 12\nclient_http.hits = 11\nserver.all.kbytes_in = 3\n"))
	if got["client_http.requests"] != 12 || got["client_http.hits"] != 11 || got["server.all.kbytes_in"] != 3 {
		t.Errorf("ParseCounters = %v", got)
	}
	if _, ok := got["sample_time"]; ok {
		t.Errorf("sample_time is not a number, got %v", got["sample_time"])
	}
}

// TestHostsText: every address of the node's subnets and routed /22-or-smaller prefixes, once,
// without network and broadcast addresses; a wider route is left to DNS.
func TestHostsText(t *testing.T) {
	n := &plan.Node{
		Interfaces: []*plan.Interface{{Address: netip.MustParsePrefix("198.18.0.2/24")}, {Address: netip.MustParsePrefix("198.18.1.1/24")}},
		Routes: []plan.Route{{Dst: netip.MustParsePrefix("198.18.1.0/24")}, {Dst: netip.MustParsePrefix("198.18.4.0/25")},
			{Dst: netip.MustParsePrefix("198.18.0.0/15")}},
	}
	text := httpproxy.HostsText(n)
	lines := strings.Split(strings.TrimSpace(text), "\n")[1:]
	if got, want := len(lines), 254+254+126; got != want {
		t.Errorf("%d entries, want %d", got, want)
	}
	for _, tt := range []struct {
		line string
		in   bool
	}{
		{"198.18.0.1 sfclab-198-18-0-1", true},
		{"198.18.1.254 sfclab-198-18-1-254", true},
		{"198.18.4.126 sfclab-198-18-4-126", true},
		{"198.18.0.0 ", false},
		{"198.18.0.255 ", false},
		{"198.18.4.127 ", false},
		{"198.18.9.1 ", false},
	} {
		if strings.Contains(text, "\n"+tt.line) != tt.in {
			t.Errorf("hosts text has %q: %v, want %v", tt.line, !tt.in, tt.in)
		}
	}
}
