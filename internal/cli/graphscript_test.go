package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sfclab/sfclab/api/sfcclient"
	"github.com/sfclab/sfclab/internal/oracle"
)

var updateGraphScript = flag.Bool("update-graph-script", false, "rewrite testdata/sfc-graph.golden from this run")

// graphScriptLab has the ports scripts/sfc-graph.sh names: a client and a server, and
// functions f1 and f2 between them, on one network, steered by eBPF.
const graphScriptLab = `name: t-osc-graph
steering: transparent
networks: [lan]
endpoints: {client: {kind: client, ports: {eth0: lan}}, server: {kind: server, ports: {eth0: lan}}}
functions:
  f1: {kind: forwarder, ports: {ingress: lan, egress: lan}}
  f2: {kind: forwarder, ports: {ingress: lan, egress: lan}}
`

// graphScriptAllow lists the lines of the normalized output of scripts/sfc-graph.sh where
// `sfclab serve` deliberately answers differently from networking-sfc, each with its reason
// (docs/api.md says the same). Keys are the lines as networking-sfc's run prints them.
var graphScriptAllow = map[string]string{}

// TestGraphScript runs scripts/sfc-graph.sh (Debian's `openstack sfc ...` client, and
// `sfclab chain graph` for the verbs that client lacks) unchanged against the real
// networking-sfc server (internal/oracle, the lab's ports mirrored into it) and against
// `sfclab serve` on a deployed transparent lab, at the same time, and compares the outputs
// line by line once ids, timestamps and request ids are masked; the masked output is also
// compared with testdata/sfc-graph.golden, so that both servers failing alike fails too.
func TestGraphScript(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("openstack"); err != nil {
		t.Skip("SKIPPED LOUDLY: the openstack client is not installed (scripts/install-deps.sh installs python3-openstackclient and python3-networking-sfc)")
	}
	privateState(t)
	// The oracle starts while the lab deploys: Python takes 2-3 s to find neutron importable
	// (oracle.Available, which Start asks first), then 3-4 s to boot it.
	type started struct {
		o   *oracle.Oracle
		err error
	}
	oc := make(chan started, 1)
	go func() {
		o, err := oracle.Start(context.Background())
		oc <- started{o, err}
	}()
	code, out, errOut := run(t, "deploy", writeLabFile(t, graphScriptLab))
	if code == 0 {
		t.Cleanup(func() { run(t, "destroy", "t-osc-graph") })
	}
	st := <-oc
	if st.err == nil {
		t.Cleanup(st.o.Stop)
	}
	if errors.Is(st.err, oracle.ErrMissing) {
		t.Skipf("SKIPPED LOUDLY: the script runs against the real server too: %v (scripts/install-deps.sh installs it)", st.err)
	}
	if code != 0 {
		t.Fatalf("deploy: exit %d\n%s%s", code, out, errOut)
	}
	if st.err != nil {
		t.Fatal(st.err)
	}
	ours := startServe(t)
	if _, err := st.o.Mirror(context.Background(), ours, ""); err != nil {
		t.Fatal(err)
	}
	bin := sfclabOnPath(t)

	script, err := filepath.Abs("../../scripts/sfc-graph.sh")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var outOurs, outReal string
	var errOurs, errReal error
	start := time.Now()
	wg.Add(2)
	go func() { defer wg.Done(); outOurs, errOurs = runGraphScript(script, bin, ours) }()
	go func() { defer wg.Done(); outReal, errReal = runGraphScript(script, bin, st.o.URL) }()
	wg.Wait()
	t.Logf("scripts/sfc-graph.sh: %d openstack and %d sfclab commands, against both servers at once in %s",
		strings.Count(outReal, "$ openstack "), strings.Count(outReal, "$ sfclab "), time.Since(start).Round(time.Second))
	if errOurs != nil || errReal != nil {
		t.Fatalf("running the script: sfclab serve: %v; networking-sfc: %v", errOurs, errReal)
	}
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "sfclab.out"), []byte(outOurs), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "networking-sfc.out"), []byte(outReal), 0o644)

	a := normalizeScript(outOurs, ours, st.o.URL)
	b := normalizeScript(outReal, ours, st.o.URL)
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	used := map[string]bool{}
	differ := 0
	for i := 0; i < max(len(la), len(lb)); i++ {
		x, y := lineAt(la, i), lineAt(lb, i)
		if x == y {
			continue
		}
		if why, ok := graphScriptAllow[y]; ok {
			used[y] = true
			t.Logf("line %d: allowed difference (%s)", i+1, why)
			continue
		}
		t.Errorf("line %d differs (command %s):\n  sfclab serve    %s\n  networking-sfc  %s", i+1, commandAt(lb, i), x, y)
		if differ++; differ == 30 {
			t.Errorf("more lines differ; stopped after %d", differ)
			break
		}
	}
	for y := range graphScriptAllow {
		if !used[y] {
			t.Errorf("allowlist: line %q no longer differs; remove its entry", y)
		}
	}
	if t.Failed() {
		t.Logf("raw outputs in %s", dir)
		t.Logf("sfclab serve (normalized):\n%s", a)
		return
	}
	golden := filepath.Join("testdata", "sfc-graph.golden")
	if *updateGraphScript {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/cli -run TestGraphScript -update-graph-script)", err)
	}
	if string(want) != b {
		t.Errorf("the script's output (the same on both servers) is not %s; run with -update-graph-script if the change is intended:\n%s", golden, b)
	}
}

// startServe runs `sfclab serve` on a free loopback port as a child process (stopped when the
// test ends) and returns its URL once it answers.
func startServe(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	serve := exec.Command(os.Args[0], "serve", "--listen", addr)
	serve.Env = append(os.Environ(), "SFCLAB_CLI_CHILD=1")
	serve.Stderr = os.Stderr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serve.Process.Kill(); _ = serve.Wait() })
	url := "http://" + addr
	for i := 0; ; i++ {
		resp, err := http.Get(url + "/v2.0/ports")
		if err == nil {
			resp.Body.Close()
			return url
		}
		if i > 200 {
			t.Fatalf("sfclab serve did not answer: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sfclabOnPath writes an executable `sfclab` that runs this test binary as sfclab, in a
// directory it returns, for scripts that call sfclab.
func sfclabOnPath(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\nSFCLAB_CLI_CHILD=1 exec %q \"$@\"\n", self)
	if err := os.WriteFile(filepath.Join(dir, "sfclab"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runGraphScript runs the script against endpoint with bin first on PATH, bounded in time.
func runGraphScript(script, bin, endpoint string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/bash", script)
	cmd.Env = append(os.Environ(), "OS_AUTH_TYPE=none", "OS_ENDPOINT="+endpoint, "PATH="+bin+":"+os.Getenv("PATH"))
	cmd.Dir = filepath.Dir(script)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s against %s: %w: %s", script, endpoint, err, errOut.String())
	}
	return out.String(), nil
}

var (
	scriptUUIDRe = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	scriptTimeRe = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z?`)
	requestIDsRe = regexp.MustCompile(`Neutron server returns request_ids: \[.*\]`)
	projectRe    = regexp.MustCompile(`"(Project|tenant_id)": "[^"]*"`)
)

// normalizeScript masks what differs between two runs of the script whatever the server:
// ids become <id N> in order of first appearance (the script creates the same resources in
// the same order, and sorts its lists by name), timestamps <time>, the endpoints <endpoint>,
// Neutron's request ids <request ids> and the project <project> (networking-sfc without
// Keystone answers "fake_project_id", sfclab its own project's id).
func normalizeScript(out string, endpoints ...string) string {
	for _, e := range endpoints {
		out = strings.ReplaceAll(out, e, "<endpoint>")
	}
	out = requestIDsRe.ReplaceAllString(out, "Neutron server returns request_ids: <request ids>")
	out = projectRe.ReplaceAllString(out, `"$1": "<project>"`)
	out = scriptTimeRe.ReplaceAllString(out, "<time>")
	ids := map[string]string{}
	return scriptUUIDRe.ReplaceAllStringFunc(out, func(id string) string {
		if n, ok := ids[id]; ok {
			return n
		}
		ids[id] = fmt.Sprintf("<id %d>", len(ids)+1)
		return ids[id]
	})
}

func lineAt(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "<no line>"
}

// commandAt is the command (the "$ " line) whose output holds line i.
func commandAt(lines []string, i int) string {
	for ; i >= 0; i-- {
		if i < len(lines) && strings.HasPrefix(lines[i], "$ ") {
			return lines[i]
		}
	}
	return "?"
}

func TestNormalizeScript(t *testing.T) {
	a := "$ x\n{\"ID\": \"6f1c0c52-6d4f-4b7e-9d43-5a3c2b1f0e9d\", \"Project\": \"fake_project_id\", \"Port\": \"0b5c8a5e-1f3d-4e2a-8c7b-9a6d5e4f3c2b\"}\n" +
		"Port Chain 6f1c0c52-6d4f-4b7e-9d43-5a3c2b1f0e9d in use at 2026-11-27T08:01:02.123456Z.\nNeutron server returns request_ids: ['req-0b5c8a5e-1f3d-4e2a-8c7b-9a6d5e4f3c2c']\nhttp://127.0.0.1:1/v2.0\n"
	b := "$ x\n{\"ID\": \"11111111-2222-4333-8444-555555555555\", \"Project\": \"0a0a0a0a-2222-4333-8444-555555555555\", \"Port\": \"21111111-2222-4333-8444-555555555555\"}\n" +
		"Port Chain 11111111-2222-4333-8444-555555555555 in use at 2026-11-27T09:00:00Z.\nNeutron server returns request_ids: ['req-31111111-2222-4333-8444-555555555555']\nhttp://127.0.0.1:2/v2.0\n"
	na, nb := normalizeScript(a, "http://127.0.0.1:1"), normalizeScript(b, "http://127.0.0.1:2")
	if na != nb {
		t.Errorf("the same output of two servers normalizes differently:\n%s\n%s", na, nb)
	}
	if !strings.Contains(na, `"ID": "<id 1>", "Project": "<project>", "Port": "<id 2>"`) || !strings.Contains(na, "Port Chain <id 1> in use at <time>.") {
		t.Errorf("normalized: %s", na)
	}
	// Swapping two ids is a difference.
	c := strings.Replace(strings.Replace(b, "\"ID\": \"1", "\"ID\": \"X", 1), "\"Port\": \"2", "\"Port\": \"1", 1)
	c = strings.Replace(c, "\"ID\": \"X", "\"ID\": \"2", 1)
	if normalizeScript(c, "http://127.0.0.1:2") == nb {
		t.Errorf("swapped ids normalize the same:\n%s", c)
	}
}

func TestPrintGraph(t *testing.T) {
	g := &sfcclient.ServiceGraph{ID: "g1", Name: "sg", Description: "d", ProjectID: "p",
		PortChains: map[string][]string{"pc1": {"pc2", "pc3"}, "pc0": {"pc1"}}}
	var table, js bytes.Buffer
	if err := printGraph(&table, g, "table"); err != nil {
		t.Fatal(err)
	}
	want := "Branching Points  pc0:pc1\n                  pc1:pc2,pc3\nDescription       d\nID                g1\nName              sg\nProject           p\n"
	if table.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", table.String(), want)
	}
	if err := printGraph(&js, g, "json"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"Branching Points": {`) || !strings.Contains(js.String(), `"ID": "g1"`) {
		t.Errorf("json: %s", js.String())
	}
	if err := printGraph(&js, g, "yaml"); err == nil {
		t.Errorf("format yaml accepted")
	}
}
