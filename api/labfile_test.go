package api

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/plan"
)

// transparentFixture writes a journal with examples/transparent-hosts.yaml ready (plan only).
func transparentFixture(t *testing.T) (string, *plan.Plan) {
	t.Helper()
	root := t.TempDir()
	j := journal.Journal{Root: root}
	data, err := os.ReadFile("../examples/transparent-hosts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := labtest.Plan(t, string(data))
	if err := os.MkdirAll(j.NodeDir(p.Lab), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := j.WritePlan(p); err != nil {
		t.Fatal(err)
	}
	if err := j.WriteState(&journal.State{Lab: p.Lab, Status: journal.StatusReady, Started: time.Unix(1700000000, 0)}); err != nil {
		t.Fatal(err)
	}
	return root, p
}

// names lists the "name" of each item of a list answer.
func names(m map[string]any, key string) []string {
	var out []string
	for _, it := range m[key].([]any) {
		out = append(out, it.(map[string]any)["name"].(string))
	}
	return out
}

// TestLabFileResources: the chains a lab file declares (and their classifiers, pairs, groups)
// are listed by the API with stable ids and resolved ports, are refused for update and delete
// with a 409 that names the lab file, never reach sfc.json or the data plane, and API chains
// may use the file's groups (the data plane is told to reuse them).
func TestLabFileResources(t *testing.T) {
	root, p := transparentFixture(t)
	h := newHarness(t, root, Config{})
	lab := p.Lab

	for _, tc := range []struct {
		plural string
		want   []string
	}{
		{"flow_classifiers", []string{"tcp", "udp"}},
		{"port_pairs", []string{"pp1", "pp2", "pp3a", "pp3b"}},
		{"port_pair_groups", []string{"g1", "g2", "g3"}},
		{"port_chains", []string{"c-tcp", "c-udp"}},
	} {
		code, m := h.do("GET", "/v2.0/sfc/"+tc.plural, nil)
		got := names(m, tc.plural)
		slices.Sort(got)
		if code != 200 || !slices.Equal(got, tc.want) {
			t.Errorf("list %s: %d %v, want %v", tc.plural, code, got, tc.want)
		}
	}

	ctcp := FileID("port_chain", lab, "c-tcp")
	code, m := h.do("GET", "/v2.0/sfc/port_chains/"+ctcp, nil)
	if code != 200 {
		t.Fatalf("show c-tcp by its stable id: %d %v", code, m)
	}
	pc := m["port_chain"].(map[string]any)
	wantGroups := []any{FileID("port_pair_group", lab, "g1"), FileID("port_pair_group", lab, "g2"), FileID("port_pair_group", lab, "g3")}
	if !slices.Equal(pc["port_pair_groups"].([]any), wantGroups) || pc["chain_id"] != float64(1) ||
		pc["chain_parameters"].(map[string]any)["symmetric"] != true {
		t.Errorf("c-tcp = %v", pc)
	}
	code, m = h.do("GET", "/v2.0/sfc/flow_classifiers/"+FileID("flow_classifier", lab, "tcp"), nil)
	fc := m["flow_classifier"].(map[string]any)
	if code != 200 || fc["protocol"] != "tcp" || fc["logical_source_port"] != PortID(lab, "s", "eth0") ||
		fc["logical_destination_port"] != PortID(lab, "d", "eth0") {
		t.Errorf("flow classifier tcp: %d %v", code, fc)
	}
	code, m = h.do("GET", "/v2.0/sfc/port_pairs?name=pp3b", nil)
	pps := m["port_pairs"].([]any)
	if code != 200 || len(pps) != 1 || pps[0].(map[string]any)["ingress"] != PortID(lab, "v3b", "in") ||
		pps[0].(map[string]any)["service_function_parameters"].(map[string]any)["weight"] != float64(2) {
		t.Errorf("port pair pp3b: %d %v", code, m)
	}

	// Read-only: every change of a file resource is a 409 naming the lab file, and nothing
	// changes.
	for _, tc := range []struct{ plural, singular, kind, name string }{
		{"port_chains", "port_chain", "port_chain", "c-udp"},
		{"port_pair_groups", "port_pair_group", "port_pair_group", "g2"},
		{"port_pairs", "port_pair", "port_pair", "pp1"},
		{"flow_classifiers", "flow_classifier", "flow_classifier", "udp"},
	} {
		id := FileID(tc.kind, lab, tc.name)
		for _, req := range []struct {
			method string
			body   any
		}{{"PUT", map[string]any{tc.singular: map[string]any{"name": "renamed"}}}, {"DELETE", nil}} {
			code, m := h.do(req.method, "/v2.0/sfc/"+tc.plural+"/"+id, req.body)
			e, _ := m["NeutronError"].(map[string]any)
			if code != 409 || e["type"] != "LabFileResourceReadOnly" || !strings.Contains(e["message"].(string), "lab file of lab "+lab) {
				t.Errorf("%s %s %s: %d %v, want 409 LabFileResourceReadOnly", req.method, tc.plural, tc.name, code, m)
			}
		}
		if code, _ := h.do("GET", "/v2.0/sfc/"+tc.plural+"/"+id, nil); code != 200 {
			t.Errorf("%s %s is gone after refused changes: %d", tc.plural, tc.name, code)
		}
	}

	// An API chain may use a file group; it gets the next free chain id; a file classifier
	// already in a file chain cannot be used again.
	fcID := h.mustCreate("flow_classifiers", "flow_classifier", map[string]any{"name": "icmp", "protocol": "icmp",
		"logical_source_port": PortID(lab, "s", "eth0")})
	code, m = h.do("POST", "/v2.0/sfc/port_chains", map[string]any{"port_chain": map[string]any{"name": "api-icmp",
		"port_pair_groups": []string{FileID("port_pair_group", lab, "g3")}, "flow_classifiers": []string{FileID("flow_classifier", lab, "udp")}}})
	if e, _ := m["NeutronError"].(map[string]any); code != 409 || e["type"] != "FlowClassifierInUse" {
		t.Errorf("API chain with the file's classifier udp: %d %v, want 409 FlowClassifierInUse", code, m)
	}
	code, m = h.do("POST", "/v2.0/sfc/port_chains", map[string]any{"port_chain": map[string]any{"name": "api-icmp",
		"port_pair_groups": []string{FileID("port_pair_group", lab, "g1"), FileID("port_pair_group", lab, "g2")}, "flow_classifiers": []string{fcID}}})
	if code != 201 {
		t.Fatalf("API chain over the file's groups g1, g2: %d %v", code, m)
	}
	apiChain := m["port_chain"].(map[string]any)
	if apiChain["chain_id"] != float64(3) {
		t.Errorf("chain_id of the API chain = %v, want 3 (the file's chains have 1 and 2)", apiChain["chain_id"])
	}
	inst := h.rec.Installed()
	if len(inst) != 1 {
		t.Fatalf("the data plane holds %d chains, want only the API's (the file's are steered by deploy)", len(inst))
	}
	c := inst[apiChain["id"].(string)]
	if c == nil || len(c.Groups) != 2 || c.Groups[0].LabFile != "g1" || c.Groups[1].LabFile != "g2" ||
		c.Groups[0].Pairs[0].LabFile != "pp1" || c.Classifiers[0].LabFile != "" || c.LabFile != "" {
		t.Errorf("the data plane got %+v, want groups marked as the file's g1, g2", c)
	}

	// sfc.json holds the API's resources only; a restarted server lists both again, with the
	// same ids.
	data, err := os.ReadFile(filepath.Join(journal.Journal{Root: root}.Dir(lab), StateFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), ctcp) || strings.Contains(string(data), `"c-udp"`) {
		t.Errorf("sfc.json holds the lab file's resources:\n%s", data)
	}
	h2 := newHarness(t, root, Config{})
	code, m = h2.do("GET", "/v2.0/sfc/port_chains", nil)
	if got := names(m, "port_chains"); code != 200 || !slices.Equal(got, []string{"c-tcp", "c-udp", "api-icmp"}) {
		t.Errorf("after a restart: %d %v", code, got)
	}
	if len(h2.rec.Installed()) != 1 {
		t.Errorf("a restarted server applied %d chains, want 1 (the API's)", len(h2.rec.Installed()))
	}
	stored, err := StoredChains(journal.Journal{Root: root}, lab)
	if err != nil || len(stored) != 1 || stored[0].Name != "api-icmp" || !slices.Equal(stored[0].Groups, []string{"g1", "g2"}) {
		t.Errorf("StoredChains (what inspect lists) = %+v, %v", stored, err)
	}
}

// TestLabFileGraph: a service graph over chains sfclab serve holds reaches the data plane with
// its edges by chain id, the file's chains marked; deleting it unlinks them first.
func TestLabFileGraph(t *testing.T) {
	root, p := transparentFixture(t)
	h := newHarness(t, root, Config{})
	lab := p.Lab
	fcID := h.mustCreate("flow_classifiers", "flow_classifier", map[string]any{"name": "icmp", "protocol": "icmp",
		"logical_source_port": PortID(lab, "s", "eth0")})
	pcID := h.mustCreate("port_chains", "port_chain", map[string]any{"name": "next",
		"port_pair_groups": []string{FileID("port_pair_group", lab, "g3")}, "flow_classifiers": []string{fcID}})
	cudp := FileID("port_chain", lab, "c-udp")
	code, m := h.do("POST", "/v2.0/sfc/service_graphs", map[string]any{"service_graph": map[string]any{"name": "sg",
		"port_chains": map[string]any{cudp: []string{pcID}}}})
	if code != 201 {
		t.Fatalf("create graph: %d %v", code, m)
	}
	gid := m["service_graph"].(map[string]any)["id"].(string)
	g := h.rec.Graphs()[gid]
	if g == nil || !slices.Equal(g.Edges[cudp], []string{pcID}) || g.LabFile[cudp] != "c-udp" || g.LabFile[pcID] != "" {
		t.Fatalf("the data plane got graph %+v", g)
	}
	if code, m := h.do("DELETE", "/v2.0/sfc/port_chains/"+pcID, nil); code != 409 {
		t.Errorf("delete a chain in a graph: %d %v, want 409", code, m)
	}
	if code, m := h.do("DELETE", "/v2.0/sfc/service_graphs/"+gid, nil); code != 204 {
		t.Fatalf("delete graph: %d %v", code, m)
	}
	if len(h.rec.Graphs()) != 0 {
		t.Errorf("graph left in the data plane after delete")
	}
	calls := h.rec.Calls()
	if last := calls[len(calls)-1]; last.Op != "remove_graph" || last.ID != gid {
		t.Errorf("last data plane call %+v, want remove_graph %s", last, gid)
	}
}

// TestLabFileOpenStackClient: the real OpenStack client lists the lab file's chains, shows one
// by name, is refused deleting it (with the lab file named in the message), and creates a
// chain of its own over a group of the file.
func TestLabFileOpenStackClient(t *testing.T) {
	root, p := transparentFixture(t)
	h := newHarness(t, root, Config{})
	o := newOSC(t, h.url, "")
	var chains []map[string]any
	o.json(&chains, "sfc", "port", "chain", "list")
	var got []string
	for _, c := range chains {
		got = append(got, c["Name"].(string))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"c-tcp", "c-udp"}) {
		t.Errorf("openstack sfc port chain list: %v, want the lab file's c-tcp, c-udp", got)
	}
	var c map[string]any
	o.json(&c, "sfc", "port", "chain", "show", "c-udp")
	if c["ID"] != FileID("port_chain", p.Lab, "c-udp") {
		t.Errorf("openstack sfc port chain show c-udp: %v", c)
	}
	out, errOut, ok := o.run("sfc", "port", "chain", "delete", "c-udp")
	if ok || !strings.Contains(out+errOut, "lab file") {
		t.Errorf("openstack sfc port chain delete c-udp: ok=%v %s%s, want a refusal naming the lab file", ok, out, errOut)
	}
	var fc, pc map[string]any
	o.json(&fc, "sfc", "flow", "classifier", "create", "--protocol", "icmp", "--logical-source-port", "s-eth0", "fc-icmp")
	o.json(&pc, "sfc", "port", "chain", "create", "--port-pair-group", "g3", "--flow-classifier", "fc-icmp", "pc-icmp")
	inst := h.rec.Installed()[fmt.Sprint(pc["ID"])]
	if inst == nil || inst.Groups[0].LabFile != "g3" {
		t.Errorf("the data plane got %+v, want the file's group g3", inst)
	}
}

// TestChainClassifierConflictPerPort: overlapping classifiers conflict between chains only on
// the same logical source port (as in lab files).
func TestChainClassifierConflictPerPort(t *testing.T) {
	root, p := transparentFixture(t)
	h := newHarness(t, root, Config{})
	lab := p.Lab
	fc := func(src, dst string) string {
		return h.mustCreate("flow_classifiers", "flow_classifier", map[string]any{"protocol": "icmp",
			"logical_source_port": PortID(lab, src, "eth0"), "logical_destination_port": PortID(lab, dst, "eth0")})
	}
	chain := func(fc string, groups ...string) (int, map[string]any) {
		var ids []string
		for _, g := range groups {
			ids = append(ids, FileID("port_pair_group", lab, g))
		}
		return h.do("POST", "/v2.0/sfc/port_chains", map[string]any{"port_chain": map[string]any{
			"port_pair_groups": ids, "flow_classifiers": []string{fc}}})
	}
	if code, m := chain(fc("s", "d"), "g3"); code != 201 {
		t.Fatalf("icmp chain from s-eth0: %d %v", code, m)
	}
	if code, m := chain(fc("d", "s"), "g1"); code != 201 {
		t.Errorf("icmp chain from d-eth0 (overlaps s-eth0's, on another port): %d %v, want 201", code, m)
	}
	code, m := chain(fc("s", "s"), "g2", "g1")
	if e, _ := m["NeutronError"].(map[string]any); code != 400 || e["type"] != "PortChainFlowClassifierInConflict" {
		t.Errorf("a second icmp chain from s-eth0: %d %v, want 400 PortChainFlowClassifierInConflict", code, m)
	}
}
