package sfcclient

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/api"
	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/journal"
)

var update = flag.Bool("update", false, "rewrite golden files")

// chainLab is a lab of n forwarders between a client and a server.
func chainLab(name string, n int) string {
	var fns, hops []string
	for i := 1; i <= n; i++ {
		fns = append(fns, fmt.Sprintf("  f%d: {kind: forwarder}", i))
		hops = append(hops, fmt.Sprintf("f%d", i))
	}
	return fmt.Sprintf("name: %s\nendpoints:\n  client: {kind: client}\n  server: {kind: server}\nfunctions:\n%s\nchains:\n  - name: main\n    from: client\n    to: server\n    hops: [%s]\n",
		name, strings.Join(fns, "\n"), strings.Join(hops, ", "))
}

// serve starts an API server over a journal fixture holding lab (plans only) and returns a
// client for it and the server's recording data plane.
func serve(t *testing.T, lab string, n int) (*Client, *api.Recorder, *api.Server) {
	t.Helper()
	root := t.TempDir()
	j := journal.Journal{Root: root}
	p := labtest.Plan(t, chainLab(lab, n))
	if err := os.MkdirAll(j.NodeDir(lab), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := j.WritePlan(p); err != nil {
		t.Fatal(err)
	}
	if err := j.WriteState(&journal.State{Lab: lab, Status: journal.StatusReady, Started: time.Unix(1700000000, 0)}); err != nil {
		t.Fatal(err)
	}
	rec := &api.Recorder{}
	s, err := api.New(context.Background(), api.Config{Journal: j, DataPlane: rec, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return &Client{Endpoint: hs.URL}, rec, s
}

func TestLoadChainFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body, err string
	}{
		{"ok", `{"source": "client", "destination": "server", "match_fields": {"protocol": "udp"}, "chain": [{"name": "f1", "direction": "out"}, {"name": "f2", "direction": "tap"}]}`, ""},
		{"bad direction", `{"source": "client", "destination": "server", "chain": [{"name": "f1", "direction": "up"}]}`, `direction "up" is not one of`},
		{"empty chain", `{"source": "client", "destination": "server", "chain": []}`, "chain is empty"},
		{"unknown field", `{"source": "client", "destination": "server", "chains": []}`, "unknown field"},
		{"no source", `{"destination": "server", "chain": [{"name": "f1", "direction": "in"}]}`, "source and destination"},
		{"two taps", `{"source": "c", "destination": "s", "chain": [{"name": "f1", "direction": "tap"}, {"name": "f2", "direction": "tap"}]}`, "two taps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".json")
			if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadChainFile(path)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("LoadChainFile: %v, want %q", err, tc.err)
			}
		})
	}
}

func TestApplyAndRemove(t *testing.T) {
	c, rec, _ := serve(t, "api-cl", 3)
	f := &ChainFile{Source: "client", Destination: "server", MatchFields: map[string]any{"protocol": "udp", "destination_port_range_min": 5000, "destination_port_range_max": 5002},
		Chain: []Element{{"f1", DirOut}, {"f2", DirTap}, {"f3", DirSame}}}
	d, err := c.Apply(context.Background(), f, "study-c")
	if err != nil {
		t.Fatal(err)
	}
	chain := rec.Installed()[d.Chain]
	if chain == nil || len(chain.Groups) != 3 {
		t.Fatalf("data plane has %+v", rec.Installed())
	}
	g := chain.Groups
	if g[0].Pairs[0].Egress.Iface != "egress" || !g[1].Tap || g[1].Pairs[0].Egress.Iface != "ingress" || g[2].Pairs[0].Egress.Iface != "ingress" ||
		chain.Classifiers[0].Protocol != "udp" || chain.Classifiers[0].LogicalDestination.Node != "server" {
		t.Errorf("chain as installed: %+v", chain)
	}
	for i, d := range d.Times {
		if d <= 0 {
			t.Errorf("step %s took %v", Steps[i], d)
		}
	}
	// The same classifier again is refused, and Apply undoes its own steps.
	if _, err := c.Apply(context.Background(), f, "again"); err == nil || !strings.Contains(err.Error(), "FlowClassifierInConflict") {
		t.Errorf("second apply: %v, want a FlowClassifierInConflict", err)
	}
	if err := c.Remove(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if len(rec.Installed()) != 0 {
		t.Errorf("left in the data plane: %v", rec.Installed())
	}
	var left map[string][]any
	for _, plural := range []string{"flow_classifiers", "port_pairs", "port_pair_groups", "port_chains"} {
		if err := c.do(context.Background(), "GET", "/v2.0/sfc/"+plural, nil, &left); err != nil || len(left[plural]) != 0 {
			t.Errorf("%s left: %v %v", plural, left, err)
		}
	}
}

func TestDeployTimeRun(t *testing.T) {
	c, rec, _ := serve(t, "api-dt", 4)
	e := &DeployTime{Source: "client", Destination: "server", Functions: []string{"f1", "f2", "f3", "f4"}, Repetitions: 2}
	samples, err := e.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 2*4*5 {
		t.Errorf("%d samples, want 40", len(samples))
	}
	if len(rec.Installed()) != 0 || len(rec.Calls()) != 2*4*2 {
		t.Errorf("data plane: %d installed, %d calls; want 0 and 16", len(rec.Installed()), len(rec.Calls()))
	}
	// A first-packet probe is called after each chain is in place and lands in the table.
	e.Repetitions, e.Functions = 1, e.Functions[:2]
	var probed []string
	e.FirstPacket = func(_ context.Context, d *Deployed) (time.Duration, error) {
		if rec.Installed()[d.Chain] == nil {
			return 0, fmt.Errorf("chain %s is not in the data plane", d.Chain)
		}
		probed = append(probed, d.Chain)
		return time.Millisecond, nil
	}
	more, err := e.Run(context.Background(), c)
	if err != nil || len(probed) != 2 || len(more) != 2*7 {
		t.Errorf("first-packet probe: %v, %d probes, %d samples", err, len(probed), len(more))
	}
	var buf bytes.Buffer
	if err := Table(&buf, more); err != nil || !strings.Contains(buf.String(), "first packet after the PC answer | first packet after the PC request |") {
		t.Errorf("table with first packet: %v\n%s", err, buf.String())
	}
	buf.Reset()
	// A run whose functions were TCG guests marks the first-packet columns, not the REST steps.
	if err := TableMarked(&buf, more, "emulated CPU (TCG): not comparable"); err != nil ||
		!strings.Contains(buf.String(), "| PC | total | first packet after the PC answer (emulated CPU (TCG): not comparable) | first packet after the PC request (emulated CPU (TCG): not comparable) |") {
		t.Errorf("marked table with first packet: %v\n%s", err, buf.String())
	}
	buf.Reset()
	if err := Table(&buf, samples); err != nil || !strings.Contains(buf.String(), "| 4 | 2 |") {
		t.Errorf("table: %v\n%s", err, buf.String())
	}
}

// TestTableGolden pins the report table's layout with fixed samples.
func TestTableGolden(t *testing.T) {
	var samples []Sample
	for rep := 1; rep <= 3; rep++ {
		for n := 1; n <= 3; n++ {
			var total float64
			for i, s := range Steps {
				v := float64(i+1)*0.001 + float64(n)*0.0005*float64(i) + float64(rep)*0.0001
				total += v
				samples = append(samples, Sample{rep, n, s, v})
			}
			samples = append(samples, Sample{rep, n, "total", total})
		}
	}
	var buf bytes.Buffer
	if err := Table(&buf, samples); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "table.md")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if buf.String() != string(want) {
		t.Errorf("table differs from %s (go test -update):\n%s", golden, buf.String())
	}
}
