package apiplane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/api"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe/firstpacket"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// apiLab is a deployed transparent lab served by the networking-sfc API with this package's
// data plane.
type apiLab struct {
	p   *plan.Plan
	j   journal.Journal
	url string
	hc  *http.Client
	srv *api.Server
}

// deployAPILab deploys a transparent lab (client, server, functions f1..fN with ports
// ingress and egress and no chain) and serves the API over it.
func deployAPILab(tb testing.TB, name string, n int) *apiLab {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("SKIPPED LOUDLY: deploys a real lab and loads eBPF: needs root")
	}
	var y strings.Builder
	fmt.Fprintf(&y, "name: %s\nsteering: transparent\nnetworks: [lan]\nendpoints:\n  client: {kind: client, ports: {eth0: lan}}\n  server: {kind: server, ports: {eth0: lan}}\nfunctions:\n", name)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&y, "  f%d: {kind: forwarder, ports: {ingress: lan, egress: lan}}\n", i)
	}
	return deployAPILabFile(tb, name, y.String())
}

// deployAPILabFile deploys a transparent lab given as YAML and serves the API over it.
func deployAPILabFile(tb testing.TB, name, yaml string) *apiLab {
	tb.Helper()
	lab, err := spec.Decode([]byte(yaml), name+".yaml", kinds.Spec())
	if err != nil {
		tb.Fatal(err)
	}
	p, err := plan.Build(lab)
	if err != nil {
		tb.Fatal(err)
	}
	j := journal.Journal{Root: tb.TempDir()}
	d := &deploy.Deployer{Journal: j, Log: tb.Logf}
	if _, err := d.Deploy(context.Background(), p, "test"); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := d.Destroy(context.Background(), p.Lab); err != nil {
			tb.Error(err)
		}
	})
	s, err := api.New(context.Background(), api.Config{Journal: j,
		DataPlane: &Switch{Plane: &Plane{Journal: j}, Other: &api.Recorder{}}, Log: tb.Logf})
	if err != nil {
		tb.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	hc := &http.Client{Transport: &http.Transport{}}
	tb.Cleanup(func() {
		hc.CloseIdleConnections()
		hs.Close()
	})
	return &apiLab{p: p, j: j, url: hs.URL, hc: hc, srv: s}
}

// do sends a request; want is the expected status.
func (l *apiLab) do(tb testing.TB, method, path string, body any, want int) map[string]any {
	tb.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, l.url+path, rd)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.hc.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		tb.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, data, want)
	}
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	return m
}

// create POSTs a resource and returns its id.
func (l *apiLab) create(tb testing.TB, plural, singular string, body map[string]any) string {
	tb.Helper()
	m := l.do(tb, "POST", "/v2.0/sfc/"+plural, map[string]any{singular: body}, 201)
	return m[singular].(map[string]any)["id"].(string)
}

func (l *apiLab) port(node, iface string) string { return api.PortID(l.p.Lab, node, iface) }

// hop creates a port pair and a group for function fn and returns the group's id.
func (l *apiLab) hop(tb testing.TB, fn string) (pp, ppg string) {
	pp = l.create(tb, "port_pairs", "port_pair", map[string]any{"name": "pp-" + fn,
		"ingress": l.port(fn, "ingress"), "egress": l.port(fn, "egress"),
		// mpls, the chains' correlation: a service graph branches only where they agree.
		"service_function_parameters": map[string]any{"correlation": "mpls", "weight": 1}})
	ppg = l.create(tb, "port_pair_groups", "port_pair_group", map[string]any{"name": "ppg-" + fn, "port_pairs": []string{pp}})
	return pp, ppg
}

// probe opens the first-packet probe from the client to the server.
func (l *apiLab) probe(tb testing.TB) *firstpacket.Probe {
	tb.Helper()
	open := func(node string) *netdev.NS {
		ns, err := netdev.OpenNS(l.p.Transparent.Node(node).Netns)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { ns.Close() })
		return ns
	}
	dst := netip.AddrPortFrom(l.p.Transparent.Node("server").Ports[0].Address.Addr(), 40001)
	pr, err := firstpacket.Open(open("client"), open("server"), dst)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { pr.Close() })
	return pr
}

// TestServiceGraphSteered: a service graph created over the API makes the traffic of one
// chain continue into the next (UDP from the client crosses f1, then f2: its TTL drops by 2);
// deleting the graph makes it leave after f1 again.
func TestServiceGraphSteered(t *testing.T) {
	l := deployAPILab(t, "api-graph", 2)
	pr := l.probe(t)
	_, g1 := l.hop(t, "f1")
	_, g2 := l.hop(t, "f2")
	fcA := l.create(t, "flow_classifiers", "flow_classifier", map[string]any{"name": "udp-in", "protocol": "udp",
		"logical_source_port": l.port("client", "eth0")})
	// The next chain's own classifier sits on the server's port (no overlap with the first
	// chain's on the client's); in the graph it classifies what leaves the first chain.
	fcB := l.create(t, "flow_classifiers", "flow_classifier", map[string]any{"name": "udp-next", "protocol": "udp",
		"logical_source_port": l.port("server", "eth0")})
	pcA := l.create(t, "port_chains", "port_chain", map[string]any{"name": "a", "port_pair_groups": []string{g1}, "flow_classifiers": []string{fcA}})
	pcB := l.create(t, "port_chains", "port_chain", map[string]any{"name": "b", "port_pair_groups": []string{g2}, "flow_classifiers": []string{fcB}})
	ctx := context.Background()
	crosses := func(hops int) bool {
		pr.Timeout = time.Second
		_, err := pr.Run(ctx, hops)
		return err == nil
	}
	if !crosses(1) {
		t.Fatal("before the graph, UDP from the client did not cross chain a (f1)")
	}
	sg := l.create(t, "service_graphs", "service_graph", map[string]any{"name": "a-then-b", "port_chains": map[string]any{pcA: []string{pcB}}})
	if !crosses(2) {
		t.Fatal("with the graph a -> b, UDP from the client did not cross f1 and then f2")
	}
	l.do(t, "DELETE", "/v2.0/sfc/service_graphs/"+sg, nil, 204)
	if !crosses(1) {
		t.Fatal("after deleting the graph, UDP no longer crosses chain a alone")
	}
}

// TestAPIOnDockerHosts: the API steers a docker lab on two emulated hosts (containers that got
// their ports from package hosts, Plan.HostPorts): UDP from the client goes straight to the
// server (both on h1); a chain created over the API takes it through f1 on h2 (its TTL drops
// by 1); deleting the chain lets it go straight again.
func TestAPIOnDockerHosts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED LOUDLY: deploys a real lab and loads eBPF: needs root")
	}
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		t.Skipf("SKIPPED LOUDLY: no Docker Engine answers: %v %s", err, out)
	}
	l := deployAPILabFile(t, "api-dkh", `name: api-dkh
runtime: docker
steering: transparent
networks: [lan]
hosts: [h1, h2]
endpoints:
  client: {kind: client, host: h1, ports: {eth0: lan}}
  server: {kind: server, host: h1, ports: {eth0: lan}}
functions:
  f1: {kind: forwarder, host: h2, ports: {ingress: lan, egress: lan}}
`)
	if !l.p.HostPorts() {
		t.Fatal("the docker lab on two hosts does not take its ports from package hosts")
	}
	pr := l.probe(t)
	_, g1 := l.hop(t, "f1")
	fc := l.create(t, "flow_classifiers", "flow_classifier", map[string]any{"name": "udp-in", "protocol": "udp",
		"logical_source_port": l.port("client", "eth0")})
	crosses := func(hops int) bool {
		pr.Timeout = time.Second
		_, err := pr.Run(context.Background(), hops)
		return err == nil
	}
	// straight: probes arrive, none of them through a function (their TTL unchanged).
	straight := func() bool {
		pr.Timeout = 300 * time.Millisecond
		r, err := pr.Run(context.Background(), 1)
		return err != nil && r != nil && r.Direct > 0
	}
	if !straight() {
		t.Fatal("before any chain, UDP from the client did not reach the server straight")
	}
	pc := l.create(t, "port_chains", "port_chain", map[string]any{"name": "a", "port_pair_groups": []string{g1}, "flow_classifiers": []string{fc}})
	if !crosses(1) {
		t.Fatal("with the chain, UDP from the client on h1 did not cross f1 on h2")
	}
	l.do(t, "DELETE", "/v2.0/sfc/port_chains/"+pc, nil, 204)
	if !straight() {
		t.Fatal("after deleting the chain, UDP does not go straight to the server")
	}
}

// TestLimitsUpFront: on a deployed transparent lab, what networking-sfc accepts and the data
// plane cannot take is a 400 SfcBadRequest before anything is stored (chain_id beyond the
// data plane's paths, a tap group first), or is lifted and answered 201 (no classifier,
// weights above 64, one-sided port ranges, source port equal to destination port); no 500.
func TestLimitsUpFront(t *testing.T) {
	l := deployAPILab(t, "api-lim", 2)
	_, g1 := l.hop(t, "f1")
	heavy := l.create(t, "port_pairs", "port_pair", map[string]any{"name": "heavy",
		"ingress": l.port("f2", "ingress"), "egress": l.port("f2", "egress"),
		"service_function_parameters": map[string]any{"correlation": "mpls", "weight": 1000}})
	g2 := l.create(t, "port_pair_groups", "port_pair_group", map[string]any{"name": "g-heavy", "port_pairs": []string{heavy}})
	tapPair := l.create(t, "port_pairs", "port_pair", map[string]any{"name": "tap",
		"ingress": l.port("f2", "egress"), "egress": l.port("f2", "ingress")})
	tap := l.create(t, "port_pair_groups", "port_pair_group", map[string]any{"name": "g-tap", "port_pairs": []string{tapPair}, "tap_enabled": true})
	fc := func(name string, body map[string]any) string {
		body["name"] = name
		if body["logical_source_port"] == nil {
			body["logical_source_port"] = l.port("client", "eth0")
		}
		return l.create(t, "flow_classifiers", "flow_classifier", body)
	}
	oneSided := fc("one-sided", map[string]any{"protocol": "tcp", "destination_port_range_min": 8000})
	fromZero := fc("from-zero", map[string]any{"protocol": "udp", "destination_port_range_min": 0, "destination_port_range_max": 99})
	zero := fc("zero", map[string]any{"protocol": "tcp", "source_port_range_min": 0, "source_port_range_max": 0,
		"logical_source_port": l.port("server", "eth0")})
	bigID := fc("big-id", map[string]any{"protocol": "udp", "destination_port_range_min": 7000, "destination_port_range_max": 7000})
	same := fc("same", map[string]any{"protocol": "icmp", "logical_destination_port": l.port("client", "eth0")})
	for _, tc := range []struct {
		name string
		body map[string]any
		want int
		typ  string
	}{
		{"no classifier", map[string]any{"port_pair_groups": []string{g1}}, 201, ""},
		{"weight 1000", map[string]any{"port_pair_groups": []string{g2}, "flow_classifiers": []string{oneSided}}, 201, ""},
		{"range from 0", map[string]any{"port_pair_groups": []string{g1, g2}, "flow_classifiers": []string{fromZero}}, 201, ""},
		{"source port is destination port", map[string]any{"port_pair_groups": []string{g2, g1}, "flow_classifiers": []string{same}}, 201, ""},
		{"chain_id 20000", map[string]any{"port_pair_groups": []string{g1, tap}, "chain_id": 20000, "flow_classifiers": []string{bigID}}, 400, "SfcBadRequest"},
		{"port 0 alone", map[string]any{"port_pair_groups": []string{g1, tap}, "flow_classifiers": []string{zero}}, 400, "SfcBadRequest"},
		{"tap first", map[string]any{"port_pair_groups": []string{tap, g1}}, 201, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := l.do(t, "POST", "/v2.0/sfc/port_chains", map[string]any{"port_chain": tc.body}, tc.want)
			if tc.typ != "" {
				if ne, _ := m["NeutronError"].(map[string]any); ne == nil || ne["type"] != tc.typ {
					t.Errorf("%v, want %s", m, tc.typ)
				}
			}
		})
	}
	// A tap first in a chain that classifies: refused up front.
	tapFirst := fc("tap-first", map[string]any{"protocol": "udp", "destination_port_range_min": 5000, "destination_port_range_max": 5000})
	m := l.do(t, "POST", "/v2.0/sfc/port_chains", map[string]any{"port_chain": map[string]any{"port_pair_groups": []string{tap, g2},
		"flow_classifiers": []string{tapFirst}}}, 400)
	if ne, _ := m["NeutronError"].(map[string]any); ne == nil || ne["type"] != "SfcBadRequest" || !strings.Contains(fmt.Sprint(ne["message"]), "tap") {
		t.Errorf("tap first: %v, want SfcBadRequest about the tap", m)
	}
}
