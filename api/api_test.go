package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/journal"
)

// TestMain lets a test run a server in a child process that it can kill -9.
func TestMain(m *testing.M) {
	if root := os.Getenv("SFCLAB_API_CHILD"); root != "" {
		os.Exit(childServer(root, os.Getenv("SFCLAB_API_RECORD")))
	}
	code := m.Run()
	batch.close()
	os.Exit(code)
}

// childServer serves the journal at root with a Recorder that writes its calls to record
// and then hangs in ApplyChain, so the parent can kill the server in the middle of a create.
func childServer(root, record string) int {
	s, err := New(context.Background(), Config{Journal: journal.Journal{Root: root},
		DataPlane: &Recorder{Path: record, Delay: time.Minute}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(ln.Addr().String())
	_ = http.Serve(ln, s.Handler())
	return 0
}

// chainLab has three functions between a client and a server.
const chainLab = `
name: LAB
endpoints:
  client: {kind: client}
  server: {kind: server}
functions:
  f1: {kind: forwarder}
  f2: {kind: forwarder}
  f3: {kind: forwarder}
chains:
  - name: main
    from: client
    to: server
    hops: [f1, f2, f3]
`

// fixture writes a journal with ready labs (plans only: no namespaces, so MACs are empty)
// and returns its root.
func fixture(t testing.TB, labs ...string) string {
	t.Helper()
	root := t.TempDir()
	j := journal.Journal{Root: root}
	for _, lab := range labs {
		p := labtest.Plan(t, strings.ReplaceAll(chainLab, "LAB", lab))
		if err := os.MkdirAll(j.NodeDir(lab), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := j.WritePlan(p); err != nil {
			t.Fatal(err)
		}
		if err := j.WriteState(&journal.State{Lab: lab, Status: journal.StatusReady, Started: time.Unix(1700000000, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

type harness struct {
	t   testing.TB
	s   *Server
	rec *Recorder
	url string
	tok string
}

func newHarness(t testing.TB, root string, cfg Config) *harness {
	t.Helper()
	rec := &Recorder{}
	cfg.Journal = journal.Journal{Root: root}
	if cfg.DataPlane == nil {
		cfg.DataPlane = rec
	}
	cfg.Log = t.Logf
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return &harness{t: t, s: s, rec: rec, url: hs.URL, tok: cfg.Token}
}

// do sends a request and decodes the JSON answer.
func (h *harness) do(method, path string, body any) (int, map[string]any) {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, _ := json.Marshal(b)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, h.url+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if h.tok != "" {
		req.Header.Set("X-Auth-Token", h.tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(data) > 0 {
		if err := json.Unmarshal(data, &m); err != nil {
			h.t.Fatalf("%s %s: answer is not JSON: %s", method, path, data)
		}
	}
	return resp.StatusCode, m
}

// mustCreate creates a resource and returns its id.
func (h *harness) mustCreate(plural, singular string, body map[string]any) string {
	h.t.Helper()
	code, m := h.do("POST", "/v2.0/sfc/"+plural, map[string]any{singular: body})
	if code != http.StatusCreated {
		h.t.Fatalf("create %s: %d %v", singular, code, m)
	}
	return m[singular].(map[string]any)["id"].(string)
}

// mplsPair is a port pair's service_function_parameters with the correlation of the chains
// the tests create (mpls, the default): a service graph needs it at its branching points.
var mplsPair = map[string]any{"correlation": "mpls", "weight": 1}

// chain creates classifier, pairs, groups and a chain over the given functions of lab.
func (h *harness) chain(lab string, fns ...string) (fc string, pps, ppgs []string, pc string) {
	fc = h.mustCreate("flow_classifiers", "flow_classifier", map[string]any{"name": "fc-" + lab,
		"protocol": "tcp", "destination_port_range_min": 5201, "destination_port_range_max": 5201,
		"logical_source_port": PortID(lab, "client", "eth0")})
	for _, f := range fns {
		pp := h.mustCreate("port_pairs", "port_pair", map[string]any{"name": "pp-" + f,
			"ingress": PortID(lab, f, "ingress"), "egress": PortID(lab, f, "egress"), "service_function_parameters": mplsPair})
		pps = append(pps, pp)
		ppgs = append(ppgs, h.mustCreate("port_pair_groups", "port_pair_group", map[string]any{"name": "ppg-" + f, "port_pairs": []string{pp}}))
	}
	pc = h.mustCreate("port_chains", "port_chain", map[string]any{"name": "pc-" + lab, "port_pair_groups": ppgs, "flow_classifiers": []string{fc}})
	return
}

func errType(m map[string]any) string {
	ne, _ := m["NeutronError"].(map[string]any)
	if ne == nil {
		return ""
	}
	if d, ok := ne["detail"].(string); !ok || d != "" {
		return "bad detail"
	}
	t, _ := ne["type"].(string)
	return t
}

func TestErrorSentinels(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error
	}{
		{notFound("PortChainNotFound", "x"), ErrNotFound},
		{inUse("PortPairGroupInUse", "x"), ErrInUse},
		{badRequest("FlowClassifierInvalidProtocol", "x"), ErrBadRequest},
		{fmt.Errorf("wrapped: %w", invalidInput("name", "x")), ErrBadRequest},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("errors.Is(%v, %v) = false", tc.err, tc.want)
		}
		if errors.Is(tc.err, ErrNotFound) != (tc.want == ErrNotFound) {
			t.Errorf("%v matches the wrong sentinel", tc.err)
		}
	}
}

func TestPortsAndNetworks(t *testing.T) {
	h := newHarness(t, fixture(t, "api-a"), Config{})
	code, m := h.do("GET", "/v2.0/ports", nil)
	if code != 200 {
		t.Fatalf("list ports: %d %v", code, m)
	}
	ports := m["ports"].([]any)
	if len(ports) != 8 { // client, server: 1 each; f1..f3: 2 each
		t.Fatalf("got %d ports, want 8", len(ports))
	}
	code, m = h.do("GET", "/v2.0/ports?name=f2-ingress", nil)
	got := m["ports"].([]any)
	if code != 200 || len(got) != 1 {
		t.Fatalf("?name=f2-ingress: %d %v", code, m)
	}
	p := got[0].(map[string]any)
	if p["id"] != PortID("api-a", "f2", "ingress") || p["device_id"] != DeviceID("api-a", "f2") ||
		p["network_id"] != NetworkID("api-a", "main.1") || p["binding:host_id"] != "api-a" {
		t.Errorf("port f2-ingress: %v", p)
	}
	ips := p["fixed_ips"].([]any)
	if len(ips) != 1 || ips[0].(map[string]any)["ip_address"] != "198.18.1.2" {
		t.Errorf("f2-ingress fixed_ips = %v, want 198.18.1.2", ips)
	}
	code, m = h.do("GET", "/v2.0/ports/"+PortID("api-a", "client", "eth0")+"?fields=id&fields=name", nil)
	if code != 200 || len(m["port"].(map[string]any)) != 2 || m["port"].(map[string]any)["name"] != "client-eth0" {
		t.Errorf("show port with fields: %d %v", code, m)
	}
	if code, m = h.do("GET", "/v2.0/ports/"+PortID("api-a", "nope", "eth0"), nil); code != 404 || errType(m) != "PortNotFound" {
		t.Errorf("unknown port: %d %v", code, m)
	}
	code, m = h.do("GET", "/v2.0/ports?limit=3", nil)
	page := m["ports"].([]any)
	if code != 200 || len(page) != 3 {
		t.Fatalf("?limit=3: %d %v", code, m)
	}
	last := page[2].(map[string]any)["id"].(string)
	code, m = h.do("GET", "/v2.0/ports?limit=10&marker="+last, nil)
	if code != 200 || len(m["ports"].([]any)) != 5 || m["ports"].([]any)[0].(map[string]any)["id"] == last {
		t.Errorf("page after the marker: %d %v", code, m)
	}
	if code, m = h.do("GET", "/v2.0/ports?limit=2&marker="+PortID("api-a", "nope", "x"), nil); code != 200 || len(m["ports"].([]any)) != 0 {
		t.Errorf("unknown marker (neutron: an empty page): %d %v", code, m)
	}
	code, m = h.do("GET", "/v2.0/networks", nil)
	if code != 200 || len(m["networks"].([]any)) != 4 {
		t.Errorf("networks: %d %v", code, m)
	}
	if code, m = h.do("GET", "/v2.0/extensions", nil); code != 200 || len(m["extensions"].([]any)) != 4 {
		t.Errorf("extensions: %d %v", code, m)
	}
}

func TestChainLifecycle(t *testing.T) {
	h := newHarness(t, fixture(t, "api-a"), Config{})
	fc, pps, ppgs, pc := h.chain("api-a", "f1", "f2")
	calls := h.rec.Calls()
	if len(calls) != 1 || calls[0].Op != "apply" || calls[0].ID != pc {
		t.Fatalf("data plane calls after create = %+v, want one apply of %s", calls, pc)
	}
	c := calls[0].Chain
	if c.Lab != "api-a" || c.ChainID != 1 || len(c.Groups) != 2 || c.Groups[1].Pairs[0].Ingress.Node != "f2" ||
		c.Groups[0].Pairs[0].Egress.Iface != "egress" || c.Groups[0].Pairs[0].Weight != 1 ||
		len(c.Classifiers) != 1 || c.Classifiers[0].LogicalSource.Node != "client" || c.Classifiers[0].DestinationPortRangeMin != 5201 {
		t.Errorf("resolved chain = %+v", c)
	}
	code, m := h.do("GET", "/v2.0/sfc/port_chains?name=pc-api-a", nil)
	if code != 200 || len(m["port_chains"].([]any)) != 1 {
		t.Fatalf("list by name: %d %v", code, m)
	}
	got := m["port_chains"].([]any)[0].(map[string]any)
	if got["chain_parameters"].(map[string]any)["correlation"] != "mpls" || got["chain_parameters"].(map[string]any)["symmetric"] != false {
		t.Errorf("chain_parameters defaults: %v", got["chain_parameters"])
	}
	if code, m = h.do("GET", "/v2.0/sfc/port_chains?name=other", nil); len(m["port_chains"].([]any)) != 0 {
		t.Errorf("filter other name: %v", m)
	}
	code, m = h.do("GET", "/v2.0/sfc/port_pair_groups/"+ppgs[0], nil)
	if code != 200 || m["port_pair_group"].(map[string]any)["group_id"] != 1.0 || m["port_pair_group"].(map[string]any)["tap_enabled"] != false {
		t.Errorf("show group: %d %v", code, m)
	}

	// A new group with f3 replaces f2's group: the path changes live.
	pp3 := h.mustCreate("port_pairs", "port_pair", map[string]any{"ingress": PortID("api-a", "f3", "ingress"), "egress": PortID("api-a", "f3", "egress"), "service_function_parameters": mplsPair})
	g3 := h.mustCreate("port_pair_groups", "port_pair_group", map[string]any{"port_pairs": []string{pp3}})
	code, m = h.do("PUT", "/v2.0/sfc/port_chains/"+pc, map[string]any{"port_chain": map[string]any{"port_pair_groups": []string{ppgs[0], g3}, "name": "renamed"}})
	if code != 200 || m["port_chain"].(map[string]any)["name"] != "renamed" {
		t.Fatalf("update chain: %d %v", code, m)
	}
	calls = h.rec.Calls()
	if last := calls[len(calls)-1]; last.Op != "apply" || last.Chain.Groups[1].Pairs[0].Ingress.Node != "f3" {
		t.Errorf("after update, data plane got %+v, want the chain through f3", last)
	}
	// Adding f2's pair to f3's group re-applies the chain with two instances in hop 2.
	code, m = h.do("PUT", "/v2.0/sfc/port_pair_groups/"+ppgs[1], map[string]any{"port_pair_group": map[string]any{"port_pairs": []string{}}})
	if code != 400 {
		t.Errorf("emptying a group: %d %v, want 400", code, m)
	}
	code, m = h.do("PUT", "/v2.0/sfc/port_pair_groups/"+g3, map[string]any{"port_pair_group": map[string]any{"port_pairs": []string{pp3, pps[1]}}})
	if code != 409 || errType(m) != "PortPairInUse" {
		t.Errorf("pair of another group: %d %v, want 409 PortPairInUse", code, m)
	}
	if code, _ = h.do("DELETE", "/v2.0/sfc/port_pair_groups/"+ppgs[1], nil); code != 204 {
		t.Fatalf("delete unused group: %d", code)
	}
	n := len(h.rec.Calls())
	code, m = h.do("PUT", "/v2.0/sfc/port_pair_groups/"+g3, map[string]any{"port_pair_group": map[string]any{"port_pairs": []string{pp3, pps[1]}}})
	if code != 200 {
		t.Fatalf("grow group: %d %v", code, m)
	}
	calls = h.rec.Calls()
	if len(calls) != n+1 || len(calls[n].Chain.Groups[1].Pairs) != 2 {
		t.Errorf("after growing the group, data plane got %+v", calls[n:])
	}

	if code, _ = h.do("DELETE", "/v2.0/sfc/port_chains/"+pc, nil); code != 204 {
		t.Fatalf("delete chain: %d", code)
	}
	if len(h.rec.Installed()) != 0 {
		t.Errorf("after delete, installed = %v", h.rec.Installed())
	}
	for _, del := range []string{"/v2.0/sfc/flow_classifiers/" + fc, "/v2.0/sfc/port_pair_groups/" + ppgs[0], "/v2.0/sfc/port_pair_groups/" + g3,
		"/v2.0/sfc/port_pairs/" + pps[0], "/v2.0/sfc/port_pairs/" + pps[1], "/v2.0/sfc/port_pairs/" + pp3} {
		if code, m := h.do("DELETE", del, nil); code != 204 {
			t.Errorf("DELETE %s: %d %v", del, code, m)
		}
	}
	if code, m = h.do("GET", "/v2.0/sfc/port_chains/"+pc, nil); code != 404 || errType(m) != "PortChainNotFound" {
		t.Errorf("deleted chain: %d %v", code, m)
	}
	if code, m = h.do("DELETE", "/v2.0/sfc/port_chains/"+pc, nil); code != 404 {
		t.Errorf("delete twice: %d %v", code, m)
	}
}

func TestBadInput(t *testing.T) {
	h := newHarness(t, fixture(t, "api-a", "api-b"), Config{MaxBody: 4096})
	fc, pps, ppgs, _ := h.chain("api-a", "f1")
	lonelyPP := h.mustCreate("port_pairs", "port_pair", map[string]any{"ingress": PortID("api-a", "f2", "ingress"), "egress": PortID("api-a", "f2", "egress")})
	lonelyG := h.mustCreate("port_pair_groups", "port_pair_group", map[string]any{"port_pairs": []string{lonelyPP}})
	otherFC := h.mustCreate("flow_classifiers", "flow_classifier", map[string]any{"protocol": "udp", "logical_source_port": PortID("api-a", "client", "eth0")})
	bFC := h.mustCreate("flow_classifiers", "flow_classifier", map[string]any{"logical_source_port": PortID("api-b", "client", "eth0")})
	before := len(h.rec.Calls())
	unknown := "6e0c5f5e-1f5a-4a43-9d0b-6f64a1c3b0e1"
	for _, tc := range []struct {
		name, method, path string
		body               any
		code               int
		typ                string
	}{
		{"malformed JSON", "POST", "/v2.0/sfc/port_pairs", `{"port_pair": {`, 400, "MalformedRequestBody"},
		{"no resource key", "POST", "/v2.0/sfc/port_pairs", `{"pair": {}}`, 400, "HTTPBadRequest"},
		{"unknown field", "POST", "/v2.0/sfc/port_pairs", map[string]any{"port_pair": map[string]any{"ingress": unknown, "egress": unknown, "colour": "red"}}, 400, "HTTPBadRequest"},
		{"id in POST", "POST", "/v2.0/sfc/port_pairs", map[string]any{"port_pair": map[string]any{"id": unknown}}, 400, "HTTPBadRequest"},
		{"wrong type", "POST", "/v2.0/sfc/port_pairs", map[string]any{"port_pair": map[string]any{"ingress": 7, "egress": unknown}}, 400, "HTTPBadRequest"},
		{"name too long", "POST", "/v2.0/sfc/port_pairs", map[string]any{"port_pair": map[string]any{"name": strings.Repeat("x", 256)}}, 400, "HTTPBadRequest"},
		{"missing ingress", "POST", "/v2.0/sfc/port_pairs", map[string]any{"port_pair": map[string]any{"egress": unknown}}, 400, "HTTPBadRequest"},
		{"unknown port id", "POST", "/v2.0/sfc/port_pairs", map[string]any{"port_pair": map[string]any{"ingress": unknown, "egress": unknown}}, 404, "PortPairPortNotFound"},
		{"pair on two hosts", "POST", "/v2.0/sfc/port_pairs", map[string]any{"port_pair": map[string]any{"ingress": PortID("api-a", "f2", "ingress"), "egress": PortID("api-a", "f3", "egress")}}, 400, "PortPairIngressEgressDifferentHost"},
		{"same pair twice", "POST", "/v2.0/sfc/port_pairs", map[string]any{"port_pair": map[string]any{"ingress": PortID("api-a", "f1", "ingress"), "egress": PortID("api-a", "f1", "egress")}}, 400, "PortPairIngressEgressInUse"},
		{"bad weight", "POST", "/v2.0/sfc/port_pairs", map[string]any{"port_pair": map[string]any{"ingress": PortID("api-a", "f3", "ingress"), "egress": PortID("api-a", "f3", "egress"), "service_function_parameters": map[string]any{"weight": -1}}}, 400, "HTTPBadRequest"},
		{"classifier without source port", "POST", "/v2.0/sfc/flow_classifiers", map[string]any{"flow_classifier": map[string]any{"protocol": "tcp"}}, 400, "FlowClassifierBadRequest"},
		{"classifier bad protocol", "POST", "/v2.0/sfc/flow_classifiers", map[string]any{"flow_classifier": map[string]any{"protocol": "sctp"}}, 400, "FlowClassifierInvalidProtocol"},
		{"classifier ports without protocol", "POST", "/v2.0/sfc/flow_classifiers", map[string]any{"flow_classifier": map[string]any{"destination_port_range_min": 80}}, 400, "FlowClassifierProtocolRequiredWithPorts"},
		{"classifier inverted range", "POST", "/v2.0/sfc/flow_classifiers", map[string]any{"flow_classifier": map[string]any{"protocol": "tcp", "source_port_range_min": 90, "source_port_range_max": 80}}, 400, "FlowClassifierInvalidPortRange"},
		{"classifier port 70000", "POST", "/v2.0/sfc/flow_classifiers", map[string]any{"flow_classifier": map[string]any{"protocol": "tcp", "source_port_range_min": 70000}}, 400, "FlowClassifierInvalidPortValue"},
		{"classifier v6 prefix on IPv4", "POST", "/v2.0/sfc/flow_classifiers", map[string]any{"flow_classifier": map[string]any{"source_ip_prefix": "2001:db8::/32"}}, 400, "FlowClassifierIpPrefixFormatConflictWithEthertype"},
		{"classifier bad prefix", "POST", "/v2.0/sfc/flow_classifiers", map[string]any{"flow_classifier": map[string]any{"source_ip_prefix": "198.18.0.0/33"}}, 400, "HTTPBadRequest"},
		{"classifier unknown port", "POST", "/v2.0/sfc/flow_classifiers", map[string]any{"flow_classifier": map[string]any{"logical_source_port": unknown}}, 404, "FlowClassifierPortNotFound"},
		{"classifier duplicate", "POST", "/v2.0/sfc/flow_classifiers", map[string]any{"flow_classifier": map[string]any{"protocol": "tcp", "destination_port_range_min": 5201, "destination_port_range_max": 5201, "logical_source_port": PortID("api-a", "client", "eth0")}}, 400, "FlowClassifierInConflict"},
		{"group unknown pair", "POST", "/v2.0/sfc/port_pair_groups", map[string]any{"port_pair_group": map[string]any{"port_pairs": []string{unknown}}}, 404, "PortPairNotFound"},
		{"group pair in use", "POST", "/v2.0/sfc/port_pair_groups", map[string]any{"port_pair_group": map[string]any{"port_pairs": []string{pps[0]}}}, 409, "PortPairInUse"},
		{"group bad lb field", "POST", "/v2.0/sfc/port_pair_groups", map[string]any{"port_pair_group": map[string]any{"port_pair_group_parameters": map[string]any{"lb_fields": []string{"ip_tos"}}}}, 400, "HTTPBadRequest"},
		{"chain without groups", "POST", "/v2.0/sfc/port_chains", map[string]any{"port_chain": map[string]any{"flow_classifiers": []string{otherFC}}}, 400, "HTTPBadRequest"},
		{"chain empty groups", "POST", "/v2.0/sfc/port_chains", map[string]any{"port_chain": map[string]any{"port_pair_groups": []string{}}}, 400, "PortPairGroupNotSpecified"},
		{"chain unknown group", "POST", "/v2.0/sfc/port_chains", map[string]any{"port_chain": map[string]any{"port_pair_groups": []string{unknown}}}, 404, "PortPairGroupNotFound"},
		{"chain same classifier twice", "POST", "/v2.0/sfc/port_chains", map[string]any{"port_chain": map[string]any{"port_pair_groups": []string{lonelyG}, "flow_classifiers": []string{fc}}}, 409, "FlowClassifierInUse"},
		{"chain same groups", "POST", "/v2.0/sfc/port_chains", map[string]any{"port_chain": map[string]any{"port_pair_groups": ppgs, "flow_classifiers": []string{otherFC}}}, 409, "InvalidPortPairGroups"},
		{"chain across labs", "POST", "/v2.0/sfc/port_chains", map[string]any{"port_chain": map[string]any{"port_pair_groups": []string{lonelyG}, "flow_classifiers": []string{bFC}}}, 400, "InvalidInput"},
		{"chain bad chain_id", "POST", "/v2.0/sfc/port_chains", map[string]any{"port_chain": map[string]any{"port_pair_groups": []string{lonelyG}, "chain_id": 70000}}, 400, "HTTPBadRequest"},
		{"chain taken chain_id", "POST", "/v2.0/sfc/port_chains", map[string]any{"port_chain": map[string]any{"port_pair_groups": []string{lonelyG}, "chain_id": 1}}, 400, "PortChainChainIdInConflict"},
		{"chain bad correlation", "POST", "/v2.0/sfc/port_chains", map[string]any{"port_chain": map[string]any{"port_pair_groups": []string{lonelyG}, "chain_parameters": map[string]any{"correlation": "vlan"}}}, 400, "HTTPBadRequest"},
		{"delete group in use", "DELETE", "/v2.0/sfc/port_pair_groups/" + ppgs[0], nil, 409, "PortPairGroupInUse"},
		{"delete pair in group", "DELETE", "/v2.0/sfc/port_pairs/" + pps[0], nil, 409, "PortPairInUse"},
		{"delete classifier in chain", "DELETE", "/v2.0/sfc/flow_classifiers/" + fc, nil, 409, "FlowClassifierInUse"},
		{"update read-only", "PUT", "/v2.0/sfc/port_pairs/" + pps[0], map[string]any{"port_pair": map[string]any{"ingress": unknown}}, 400, "HTTPBadRequest"},
		{"update unknown", "PUT", "/v2.0/sfc/port_pairs/" + unknown, map[string]any{"port_pair": map[string]any{"name": "x"}}, 404, "PortPairNotFound"},
		{"body too large", "POST", "/v2.0/sfc/port_pairs", `{"port_pair": {"name": "` + strings.Repeat("x", 5000) + `"}}`, 413, "HTTPRequestEntityTooLarge"},
		{"unknown path", "GET", "/v2.0/sfc/port_paths", nil, 404, "HTTPNotFound"},
		{"graph unknown chain", "POST", "/v2.0/sfc/service_graphs", map[string]any{"service_graph": map[string]any{"port_chains": map[string]any{unknown: []string{}}}}, 404, "PortChainNotFound"},
		{"graph bad uuid", "POST", "/v2.0/sfc/service_graphs", map[string]any{"service_graph": map[string]any{"port_chains": map[string]any{"x": []string{}}}}, 400, "InvalidUUID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, m := h.do(tc.method, tc.path, tc.body)
			if code != tc.code || errType(m) != tc.typ {
				t.Errorf("%s %s: got %d %v, want %d %s", tc.method, tc.path, code, m, tc.code, tc.typ)
			}
			if msg, _ := m["NeutronError"].(map[string]any)["message"].(string); msg == "" {
				t.Errorf("no message in %v", m)
			}
		})
	}
	if calls := h.rec.Calls(); len(calls) != before {
		t.Errorf("bad requests reached the data plane: %+v", calls[before:])
	}
}

func TestServiceGraph(t *testing.T) {
	h := newHarness(t, fixture(t, "api-a"), Config{})
	_, _, _, pc1 := h.chain("api-a", "f1")
	pp := h.mustCreate("port_pairs", "port_pair", map[string]any{"ingress": PortID("api-a", "f2", "ingress"), "egress": PortID("api-a", "f2", "egress"),
		"service_function_parameters": mplsPair})
	g := h.mustCreate("port_pair_groups", "port_pair_group", map[string]any{"port_pairs": []string{pp}})
	fc := h.mustCreate("flow_classifiers", "flow_classifier", map[string]any{"protocol": "udp", "logical_source_port": PortID("api-a", "f1", "egress")})
	pc2 := h.mustCreate("port_chains", "port_chain", map[string]any{"port_pair_groups": []string{g}, "flow_classifiers": []string{fc}})
	if code, m := h.do("POST", "/v2.0/sfc/service_graphs", map[string]any{"service_graph": map[string]any{"port_chains": map[string]any{pc1: []string{pc2}, pc2: []string{pc1}}}}); code != 400 || errType(m) != "ServiceGraphLoopDetected" {
		t.Errorf("loop: %d %v", code, m)
	}
	sg := h.mustCreate("service_graphs", "service_graph", map[string]any{"name": "g", "port_chains": map[string]any{pc1: []string{pc2}}})
	if code, m := h.do("DELETE", "/v2.0/sfc/port_chains/"+pc2, nil); code != 409 || errType(m) != "ServiceGraphPortChainInUse" {
		t.Errorf("delete chain in graph: %d %v", code, m)
	}
	if code, m := h.do("POST", "/v2.0/sfc/service_graphs", map[string]any{"service_graph": map[string]any{"port_chains": map[string]any{pc2: []string{}}}}); code != 409 || errType(m) != "ServiceGraphInvalidPortChains" {
		t.Errorf("chain in two graphs: %d %v", code, m)
	}
	if code, _ := h.do("DELETE", "/v2.0/sfc/service_graphs/"+sg, nil); code != 204 {
		t.Errorf("delete graph: %d", code)
	}
	if code, _ := h.do("DELETE", "/v2.0/sfc/port_chains/"+pc2, nil); code != 204 {
		t.Errorf("delete chain after graph: %d", code)
	}
}

func TestAuth(t *testing.T) {
	h := newHarness(t, fixture(t, "api-a"), Config{Token: "s3cret", Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "sfclab_up 1")
	})})
	for _, tok := range []string{"", "wrong"} {
		req, _ := http.NewRequest("GET", h.url+"/v2.0/ports", nil)
		if tok != "" {
			req.Header.Set("X-Auth-Token", tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("token %q: %d, want 401", tok, resp.StatusCode)
		}
	}
	if code, m := h.do("GET", "/v2.0/ports", nil); code != 200 || len(m["ports"].([]any)) != 8 {
		t.Errorf("with token: %d %v", code, m)
	}
	req, _ := http.NewRequest("GET", h.url+"/metrics", nil)
	req.Header.Set("X-Auth-Token", "s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "sfclab_up 1") {
		t.Errorf("/metrics: %d %s", resp.StatusCode, body)
	}
}

// TestRestart: the resources survive a new server on the same journal, which applies the
// stored chain to its data plane again; a destroyed lab takes its resources with it.
func TestRestart(t *testing.T) {
	root := fixture(t, "api-a")
	h := newHarness(t, root, Config{})
	fc, _, _, pc := h.chain("api-a", "f1", "f2", "f3")
	h2 := newHarness(t, root, Config{})
	if inst := h2.rec.Installed(); len(inst) != 1 || inst[pc] == nil || len(inst[pc].Groups) != 3 {
		t.Fatalf("after restart the data plane has %v, want chain %s with 3 groups", inst, pc)
	}
	code, m := h2.do("GET", "/v2.0/sfc/flow_classifiers/"+fc, nil)
	if code != 200 || m["flow_classifier"].(map[string]any)["name"] != "fc-api-a" {
		t.Errorf("classifier after restart: %d %v", code, m)
	}
	if err := os.RemoveAll(filepath.Join(root, "api-a")); err != nil { // what sfclab destroy does last
		t.Fatal(err)
	}
	code, m = h2.do("GET", "/v2.0/sfc/port_chains", nil)
	if code != 200 || len(m["port_chains"].([]any)) != 0 {
		t.Errorf("chains after destroy: %d %v", code, m)
	}
	if len(h2.rec.Installed()) != 0 {
		t.Errorf("data plane after destroy: %v", h2.rec.Installed())
	}
	if code, m = h2.do("GET", "/v2.0/ports", nil); len(m["ports"].([]any)) != 0 {
		t.Errorf("ports after destroy: %d %v", code, m)
	}
}

// TestKillDuringChainCreate kills a server (kill -9) while its data plane is applying a port
// chain; the restarted server removes that chain from the data plane and does not list it,
// and keeps everything created before.
func TestKillDuringChainCreate(t *testing.T) {
	root := fixture(t, "api-a")
	record := filepath.Join(t.TempDir(), "calls.jsonl")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SFCLAB_API_CHILD="+root, "SFCLAB_API_RECORD="+record)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, url: "http://" + strings.TrimSpace(addr)}
	fc := h.mustCreate("flow_classifiers", "flow_classifier", map[string]any{"logical_source_port": PortID("api-a", "client", "eth0")})
	pp := h.mustCreate("port_pairs", "port_pair", map[string]any{"ingress": PortID("api-a", "f1", "ingress"), "egress": PortID("api-a", "f1", "egress")})
	g := h.mustCreate("port_pair_groups", "port_pair_group", map[string]any{"port_pairs": []string{pp}})
	go func() {
		body := `{"port_chain": {"port_pair_groups": ["` + g + `"], "flow_classifiers": ["` + fc + `"]}}`
		resp, err := http.Post(h.url+"/v2.0/sfc/port_chains", "application/json", strings.NewReader(body))
		if err == nil {
			resp.Body.Close()
		}
	}()
	var applied RecordedCall
	deadline := time.Now().Add(10 * time.Second)
	for applied.ID == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		data, _ := os.ReadFile(record)
		if line, _, ok := strings.Cut(string(data), "\n"); ok {
			_ = json.Unmarshal([]byte(line), &applied)
		}
	}
	if applied.Op != "apply" {
		t.Fatalf("the child server never reached the data plane (calls: %+v)", applied)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	h2 := newHarness(t, root, Config{})
	calls := h2.rec.Calls()
	if len(calls) != 1 || calls[0].Op != "remove" || calls[0].ID != applied.ID {
		t.Errorf("restarted server's data plane calls = %+v, want one remove of %s", calls, applied.ID)
	}
	if code, m := h2.do("GET", "/v2.0/sfc/port_chains", nil); code != 200 || len(m["port_chains"].([]any)) != 0 {
		t.Errorf("chains after the kill: %d %v", code, m)
	}
	if code, m := h2.do("GET", "/v2.0/sfc/port_pair_groups/"+g, nil); code != 200 {
		t.Errorf("group after the kill: %d %v", code, m)
	}
	data, err := os.ReadFile(filepath.Join(root, "api-a", StateFile))
	if err != nil || strings.Contains(string(data), `"pending"`) {
		t.Errorf("state after recovery still pending (%v): %s", err, data)
	}
	// The chain can be created now, whole.
	pc := h2.mustCreate("port_chains", "port_chain", map[string]any{"port_pair_groups": []string{g}, "flow_classifiers": []string{fc}})
	if h2.rec.Installed()[pc] == nil {
		t.Errorf("chain %s not installed after create", pc)
	}
}

// TestConcurrentClients creates, lists and deletes chains from several clients at once (run
// with -race): every create either succeeds whole or is refused, and nothing is left.
func TestConcurrentClients(t *testing.T) {
	labs := []string{"api-c1", "api-c2", "api-c3", "api-c4"}
	h := newHarness(t, fixture(t, labs...), Config{})
	done := make(chan error, len(labs))
	for _, lab := range labs {
		go func() {
			for i := 0; i < 5; i++ {
				body := map[string]any{"logical_source_port": PortID(lab, "client", "eth0")}
				var ids []string
				for _, step := range []struct {
					plural, singular string
					body             func() map[string]any
				}{
					{"flow_classifiers", "flow_classifier", func() map[string]any { return body }},
					{"port_pairs", "port_pair", func() map[string]any {
						return map[string]any{"ingress": PortID(lab, "f1", "ingress"), "egress": PortID(lab, "f1", "egress")}
					}},
					{"port_pair_groups", "port_pair_group", func() map[string]any { return map[string]any{"port_pairs": []string{ids[1]}} }},
					{"port_chains", "port_chain", func() map[string]any {
						return map[string]any{"port_pair_groups": []string{ids[2]}, "flow_classifiers": []string{ids[0]}}
					}},
				} {
					code, m := h.do("POST", "/v2.0/sfc/"+step.plural, map[string]any{step.singular: step.body()})
					if code != 201 {
						done <- fmt.Errorf("%s %s: %d %v", lab, step.singular, code, m)
						return
					}
					ids = append(ids, m[step.singular].(map[string]any)["id"].(string))
					if code, _ := h.do("GET", "/v2.0/sfc/port_chains", nil); code != 200 {
						done <- fmt.Errorf("list: %d", code)
						return
					}
				}
				for j, plural := range []string{"port_chains", "port_pair_groups", "port_pairs", "flow_classifiers"} {
					if code, m := h.do("DELETE", "/v2.0/sfc/"+plural+"/"+ids[3-j], nil); code != 204 {
						done <- fmt.Errorf("%s delete %s: %d %v", lab, plural, code, m)
						return
					}
				}
			}
			done <- nil
		}()
	}
	for range labs {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	if n := len(h.rec.Installed()); n != 0 || len(h.rec.Calls()) != 2*5*len(labs) {
		t.Errorf("data plane: %d installed, %d calls", n, len(h.rec.Calls()))
	}
}

func TestLockJournal(t *testing.T) {
	root := t.TempDir()
	release, err := LockJournal(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockJournal(root); !errors.Is(err, ErrServing) {
		t.Errorf("second lock: %v, want ErrServing", err)
	}
	release()
	release2, err := LockJournal(root)
	if err != nil {
		t.Errorf("lock after release: %v", err)
	} else {
		release2()
	}
	if labs, _ := (journal.Journal{Root: root}).Labs(); len(labs) != 0 {
		t.Errorf("the lock file shows up as labs %v", labs)
	}
}

// TestBrokenLabLeftOut: a lab whose stored state cannot be read is left out; the others work.
func TestBrokenLabLeftOut(t *testing.T) {
	root := fixture(t, "api-ok", "api-bad")
	if err := os.WriteFile(filepath.Join(root, "api-bad", StateFile), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, root, Config{})
	code, m := h.do("GET", "/v2.0/ports", nil)
	if code != 200 || len(m["ports"].([]any)) != 8 {
		t.Fatalf("ports with one broken lab: %d %v", code, m)
	}
	h.chain("api-ok", "f1")
	if code, m := h.do("POST", "/v2.0/sfc/flow_classifiers", map[string]any{"flow_classifier": map[string]any{"logical_source_port": PortID("api-bad", "client", "eth0")}}); code != 404 {
		t.Errorf("classifier on the broken lab: %d %v", code, m)
	}
}
