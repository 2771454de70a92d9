package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/internal/oracle"
)

// osc runs the real OpenStack client against a server.
type osc struct {
	t    testing.TB
	auth []string
}

func newOSC(t testing.TB, url, token string) *osc {
	t.Helper()
	if _, err := exec.LookPath("openstack"); err != nil {
		t.Skip("SKIPPED LOUDLY: the openstack client is not installed (scripts/install-deps.sh installs python3-openstackclient and python3-networking-sfc)")
	}
	auth := []string{"--os-auth-type", "none", "--os-endpoint", url}
	if token != "" {
		auth = []string{"--os-auth-type", "admin_token", "--os-token", token, "--os-endpoint", url}
	}
	return &osc{t: t, auth: auth}
}

// oscTimeout bounds one command of the client.
const oscTimeout = time.Minute

// run runs `openstack ARGS...` and returns stdout, stderr and whether it exited 0. It runs
// the client's entry point in the package's batch process (oscBatch), where the client's
// start-up is paid once; runScript runs the `openstack` script itself.
func (o *osc) run(args ...string) (string, string, bool) {
	o.t.Helper()
	out, errOut, rc, err := batch.run(append(append([]string{}, o.auth...), args...))
	if err != nil {
		o.t.Fatalf("openstack %s: %v", strings.Join(args, " "), err)
	}
	return out, errOut, rc == 0
}

// runScript runs the `openstack` script in a process of its own, as a user does.
func (o *osc) runScript(args ...string) (string, string, bool) {
	o.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), oscTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "openstack", append(append([]string{}, o.auth...), args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), err == nil
}

// batch is the package's OpenStack client process, started by the first command and ended
// by TestMain.
var batch oscBatch

// oscBatch is one Python process running testdata/oscbatch.py: the `openstack` script's
// main, openstackclient.shell.main, once per command, with the command's stdout, stderr and
// exit status returned apart.
type oscBatch struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr bytes.Buffer
}

// run sends one command's arguments and waits up to oscTimeout for its answer; on a timeout
// or a broken process it ends the process (the next command starts another).
func (b *oscBatch) run(argv []string) (stdout, stderr string, rc int, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		if err := b.start(); err != nil {
			return "", "", 0, err
		}
	}
	req, _ := json.Marshal(argv)
	type answer struct {
		RC  int    `json:"rc"`
		Out string `json:"out"`
		Err string `json:"err"`
	}
	got := make(chan error, 1)
	var a answer
	go func() {
		if _, err := b.in.Write(append(req, '\n')); err != nil {
			got <- err
			return
		}
		line, err := b.out.ReadBytes('\n')
		if err == nil {
			err = json.Unmarshal(line, &a)
		}
		got <- err
	}()
	select {
	case err = <-got:
	case <-time.After(oscTimeout):
		err = fmt.Errorf("no answer within %s", oscTimeout)
	}
	if err != nil {
		b.stop()
		return "", "", 0, fmt.Errorf("run client batch: %w: %s", err, b.stderr.String())
	}
	return a.Out, a.Err, a.RC, nil
}

func (b *oscBatch) start() error {
	b.stderr.Reset()
	b.cmd = exec.Command(oracle.Python, "testdata/oscbatch.py")
	b.cmd.Stderr = &b.stderr
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := b.cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("start client batch: %w", err)
	}
	out, err := b.cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("start client batch: %w", err)
	}
	if err := b.cmd.Start(); err != nil {
		b.cmd = nil
		return fmt.Errorf("start client batch: %w", err)
	}
	b.in, b.out = in, bufio.NewReader(out)
	return nil
}

// stop ends the process, if any.
func (b *oscBatch) stop() {
	if b.cmd == nil {
		return
	}
	b.in.Close()
	_ = b.cmd.Process.Kill()
	_ = b.cmd.Wait()
	b.cmd = nil
}

// close ends the process, for TestMain.
func (b *oscBatch) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stop()
}

// json runs a command with -f json and decodes its output.
func (o *osc) json(v any, args ...string) {
	o.t.Helper()
	out, errOut, ok := o.run(append(args, "-f", "json")...)
	if !ok {
		o.t.Fatalf("openstack %s: %s%s", strings.Join(args, " "), out, errOut)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		o.t.Fatalf("openstack %s: output is not JSON: %s", strings.Join(args, " "), out)
	}
}

// openstackChain drives the four steps, list/show/set and delete with the OpenStack client
// against a server over the journal of lab, whose chain has functions f1 and f2 at least.
func openstackChain(t *testing.T, o *osc, rec *Recorder, lab string) {
	var fc, pp1, pp2, g1, g2, pc map[string]any
	o.json(&fc, "sfc", "flow", "classifier", "create", "--protocol", "tcp", "--destination-port", "5201:5201",
		"--logical-source-port", "client-eth0", "fc1")
	if fc["Logical Source Port"] != PortID(lab, "client", "eth0") || fc["Protocol"] != "tcp" {
		t.Errorf("flow classifier create: %v", fc)
	}
	o.json(&pp1, "sfc", "port", "pair", "create", "--ingress", "f1-ingress", "--egress", "f1-egress", "pp1")
	o.json(&pp2, "sfc", "port", "pair", "create", "--ingress", "f2-ingress", "--egress", "f2-egress",
		"--service-function-parameters", "weight=2", "pp2")
	if pp1["Ingress Logical Port"] != PortID(lab, "f1", "ingress") || pp1["Egress Logical Port"] != PortID(lab, "f1", "egress") {
		t.Errorf("port pair create: %v", pp1)
	}
	o.json(&g1, "sfc", "port", "pair", "group", "create", "--port-pair", "pp1", "ppg1")
	o.json(&g2, "sfc", "port", "pair", "group", "create", "--port-pair", "pp2", "ppg2")
	o.json(&pc, "sfc", "port", "chain", "create", "--port-pair-group", "ppg1", "--flow-classifier", "fc1", "pc1")
	inst := rec.Installed()[fmt.Sprint(pc["ID"])]
	if inst == nil || len(inst.Groups) != 1 || inst.Groups[0].Pairs[0].Ingress.Node != "f1" {
		t.Fatalf("after `sfc port chain create` the data plane has %+v", inst)
	}
	if out, errOut, ok := o.run("sfc", "port", "chain", "set", "--port-pair-group", "ppg2", "--description", "two hops", "pc1"); !ok {
		t.Fatalf("port chain set: %s%s", out, errOut)
	}
	o.json(&pc, "sfc", "port", "chain", "show", "pc1")
	if groups, _ := pc["Port Pair Groups"].([]any); len(groups) != 2 || groups[1] != g2["ID"] || pc["Description"] != "two hops" {
		t.Errorf("after set, chain groups = %v, want ppg1, ppg2", pc)
	}
	inst = rec.Installed()[fmt.Sprint(pc["ID"])]
	if inst == nil || len(inst.Groups) != 2 || inst.Groups[1].Pairs[0].Weight != 2 {
		t.Errorf("after `sfc port chain set` the data plane has %+v", inst)
	}
	var list []map[string]any
	o.json(&list, "sfc", "port", "chain", "list")
	if len(list) != 1 || list[0]["Name"] != "pc1" {
		t.Errorf("port chain list: %v", list)
	}
	o.json(&list, "sfc", "port", "pair", "list")
	if len(list) != 2 {
		t.Errorf("port pair list: %v", list)
	}
	if out, errOut, ok := o.run("sfc", "port", "pair", "group", "delete", "ppg1"); ok || !strings.Contains(out+errOut, "in use") {
		t.Errorf("deleting a group in use: ok=%v %s%s, want a refusal saying it is in use", ok, out, errOut)
	}
	if out, errOut, ok := o.run("sfc", "port", "chain", "delete", "pc1"); !ok {
		t.Fatalf("port chain delete: %s%s", out, errOut)
	}
	if len(rec.Installed()) != 0 {
		t.Errorf("after `sfc port chain delete` the data plane still has %v", rec.Installed())
	}
	for _, args := range [][]string{
		{"sfc", "port", "pair", "group", "delete", "ppg1"}, {"sfc", "port", "pair", "group", "delete", "ppg2"},
		{"sfc", "port", "pair", "delete", "pp1"}, {"sfc", "port", "pair", "delete", "pp2"},
		{"sfc", "flow", "classifier", "delete", "fc1"},
	} {
		if out, errOut, ok := o.run(args...); !ok {
			t.Errorf("openstack %s: %s%s", strings.Join(args, " "), out, errOut)
		}
	}
	o.json(&list, "sfc", "flow", "classifier", "list")
	if len(list) != 0 {
		t.Errorf("flow classifiers left: %v", list)
	}
}

// TestOpenStackClient drives the API with the real OpenStack client, token-protected, over a
// journal fixture.
func TestOpenStackClient(t *testing.T) {
	h := newHarness(t, fixture(t, "api-osc"), Config{Token: "t0ken"})
	o := newOSC(t, h.url, "t0ken")
	var ports []map[string]any
	o.json(&ports, "port", "list")
	if len(ports) != 8 {
		t.Errorf("openstack port list: %d ports, want 8: %v", len(ports), ports)
	}
	// The `openstack` script itself, in a process of its own, once: the batch process runs
	// the same entry point for the other commands.
	bad := newOSC(t, h.url, "wrong")
	if out, errOut, ok := bad.runScript("sfc", "port", "chain", "list"); ok {
		t.Errorf("a wrong token was accepted: %s%s", out, errOut)
	}
	openstackChain(t, o, h.rec, "api-osc")
}

// TestOpenStackClientDeployedLab deploys a real lab (namespaces, veths) and drives it with the
// OpenStack client: ports carry the MACs of the real interfaces.
func TestOpenStackClientDeployedLab(t *testing.T) {
	labtest.RequireRoot(t)
	if _, err := exec.LookPath("openstack"); err != nil {
		t.Skip("SKIPPED LOUDLY: the openstack client is not installed (scripts/install-deps.sh installs it)")
	}
	lab := labtest.Deploy(t, strings.ReplaceAll(chainLab, "LAB", "t-api-osc"))
	j := lab.D.Journal
	rec := &Recorder{}
	s, err := New(context.Background(), Config{Journal: j, DataPlane: rec, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	o := newOSC(t, hs.URL, "")
	var port map[string]any
	o.json(&port, "port", "show", "f1-ingress")
	mac := readMACs("sfc.t-api-osc.f1")["ingress"]
	if mac == "" || port["mac_address"] != mac || port["id"] != PortID("t-api-osc", "f1", "ingress") {
		t.Errorf("port show f1-ingress = %v, want MAC %q of the real interface", port, mac)
	}
	// Every port of the lab carries its real interface's MAC. The chain's lifecycle through
	// the client is TestOpenStackClient's: the API reads a deployed lab's journal as it reads
	// the fixture's, and the data plane here is the same Recorder, so it is not driven twice
	// (each openstack command is ~1.3 s of Python start-up).
	var ports []map[string]any
	o.json(&ports, "port", "list")
	if len(ports) != 8 {
		t.Errorf("openstack port list: %d ports, want 8 (client, server, 3 x 2 function ports): %v", len(ports), ports)
	}
	for _, p := range ports {
		name, _ := p["Name"].(string)
		node, iface, _ := strings.Cut(name, "-")
		want := readMACs("sfc.t-api-osc." + node)[iface]
		if want == "" || p["MAC Address"] != want || p["ID"] != PortID("t-api-osc", node, iface) {
			t.Errorf("openstack port list: port %v, want ID %s and MAC %q of the real interface", p, PortID("t-api-osc", node, iface), want)
		}
	}
	var pp map[string]any
	o.json(&pp, "sfc", "port", "pair", "create", "--ingress", "f2-ingress", "--egress", "f2-egress", "pp-real")
	if pp["Ingress Logical Port"] != PortID("t-api-osc", "f2", "ingress") {
		t.Errorf("port pair create over the deployed lab's ports: %v", pp)
	}
	if out, errOut, ok := o.run("sfc", "port", "pair", "delete", "pp-real"); !ok {
		t.Errorf("port pair delete: %s%s", out, errOut)
	}
}
