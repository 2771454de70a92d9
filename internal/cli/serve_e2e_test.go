package cli

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeChainApplyDestroy deploys a lab, runs `sfclab serve` as a process, applies study C's
// chain file with `sfclab chain apply`, and checks that `sfclab destroy` removes the stored
// resources with the lab.
func TestServeChainApplyDestroy(t *testing.T) {
	requireRoot(t)
	state := privateState(t)
	lab := writeLabFile(t, "name: t-api-cli\nendpoints: {client: {}, server: {}}\nfunctions: {f1: {kind: forwarder}, f2: {kind: forwarder}}\nchains: [{from: client, to: server, hops: [f1, f2]}]\n")
	if code, out, errOut := run(t, "deploy", lab); code != 0 {
		t.Fatalf("deploy: exit %d\n%s%s", code, out, errOut)
	}
	t.Cleanup(func() { run(t, "destroy", "t-api-cli") })

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
			break
		}
		if i > 100 {
			t.Fatalf("sfclab serve did not answer: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	chain := filepath.Join(t.TempDir(), "web.json")
	if err := os.WriteFile(chain, []byte(`{"source": "client", "destination": "server", "match_fields": {"protocol": "tcp"},
  "chain": [{"name": "f1", "direction": "out"}, {"name": "f2", "direction": "same"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "chain", "apply", chain, "--endpoint", url)
	if code != 0 {
		t.Fatalf("chain apply: exit %d\n%s%s", code, out, errOut)
	}
	for _, step := range []string{"FC ", "PP ", "PPG ", "PC ", "port chain web ("} {
		if !strings.Contains(out, step) {
			t.Errorf("chain apply output lacks %q:\n%s", step, out)
		}
	}
	resp, err := http.Get(url + "/v2.0/sfc/port_chains?name=web")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		PortChains []struct {
			PortPairGroups []string `json:"port_pair_groups"`
		} `json:"port_chains"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list.PortChains) != 1 || len(list.PortChains[0].PortPairGroups) != 2 {
		t.Errorf("port chains after apply: %+v %v", list, err)
	}
	stored := filepath.Join(state, "t-api-cli", "sfc.json")
	if _, err := os.Stat(stored); err != nil {
		t.Errorf("no stored state: %v", err)
	}
	if code, out, _ := run(t, "inspect", "t-api-cli"); code != 0 || !strings.Contains(out, "API PORT CHAIN") || !strings.Contains(out, "web-ppg-f1 -> web-ppg-f2") {
		t.Errorf("inspect does not show the API's chain: exit %d\n%s", code, out)
	}
	if code, _, _ := run(t, "chain", "apply", chain, "--endpoint", url); code == 0 {
		t.Errorf("applying the same chain twice succeeded; the classifier conflicts")
	}
	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := serve.Wait(); err != nil {
		t.Errorf("serve after SIGTERM: %v", err)
	}
	if code, _, errOut := run(t, "destroy", "t-api-cli"); code != 0 {
		t.Fatalf("destroy: %s", errOut)
	}
	if _, err := os.Stat(stored); !os.IsNotExist(err) {
		t.Errorf("destroy left %s (%v)", stored, err)
	}
}

// TestReproduceOpenStackSFCQuick runs study C's deploy-time experiment in its quick form: the
// report records the runtime (netns) and the lab's three forwarders (--quick deploys only the
// functions its chains use).
func TestReproduceOpenStackSFCQuick(t *testing.T) {
	requireRoot(t)
	privateState(t)
	out := t.TempDir()
	code, stdout, errOut := run(t, "reproduce", "openstack-sfc", "--part", "deploy-time", "--quick", "--out", out)
	if code != 0 {
		t.Fatalf("reproduce: exit %d\n%s%s", code, stdout, errOut)
	}
	rep, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 3 | 2 |", "study C (published)", "transparent eBPF", "first packet after the PC answer",
		"lab study-c (3 forwarders)", "Lab on runtime netns (every node a network namespace of this host)"} {
		if !strings.Contains(string(rep), want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
	samples, _ := os.ReadFile(filepath.Join(out, "samples.csv"))
	// Per repetition and length: FC, PP, PPG, PC, total, first_packet, first_packet_pc.
	if n := strings.Count(string(samples), "\n"); n != 1+2*3*7 {
		t.Errorf("samples.csv has %d lines, want %d", n, 1+2*3*7)
	}
	if !strings.Contains(string(samples), ",first_packet,") {
		t.Errorf("samples.csv has no first_packet sample:\n%s", samples)
	}
}

// TestServeTransparentInspect: on a transparent lab, `sfclab serve` lists the lab file's chain,
// and `sfclab inspect` shows a chain created over the API, both in its table of API chains and
// among the paths of the BPF maps.
func TestServeTransparentInspect(t *testing.T) {
	requireRoot(t)
	privateState(t)
	lab := writeLabFile(t, `name: t-api-tr
steering: transparent
networks: [lan]
endpoints: {client: {kind: client, ports: {eth0: lan}}, server: {kind: server, ports: {eth0: lan}}}
functions:
  f1: {kind: forwarder, ports: {ingress: lan, egress: lan}}
  f2: {kind: forwarder, ports: {ingress: lan, egress: lan}}
port_pairs: {pp1: {ingress: f1.ingress, egress: f1.egress}}
port_pair_groups: {g1: {port_pairs: [pp1]}}
flow_classifiers: {icmp: {protocol: icmp, logical_source_port: client.eth0}}
port_chains: {file-icmp: {flow_classifiers: [icmp], port_pair_groups: [g1]}}
`)
	if code, out, errOut := run(t, "deploy", lab); code != 0 {
		t.Fatalf("deploy: exit %d\n%s%s", code, out, errOut)
	}
	t.Cleanup(func() { run(t, "destroy", "t-api-tr") })
	url := startServe(t)
	var list struct {
		PortChains []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"port_chains"`
	}
	for i := 0; ; i++ {
		resp, err := http.Get(url + "/v2.0/sfc/port_chains")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&list)
			resp.Body.Close()
			break
		}
		if i > 100 {
			t.Fatalf("sfclab serve did not answer: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(list.PortChains) != 1 || list.PortChains[0].Name != "file-icmp" {
		t.Errorf("the API lists %+v, want the lab file's chain file-icmp", list.PortChains)
	}
	chain := filepath.Join(t.TempDir(), "udp.json")
	if err := os.WriteFile(chain, []byte(`{"source": "client", "destination": "server", "match_fields": {"protocol": "udp"},
  "chain": [{"name": "f2", "direction": "out"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "chain", "apply", chain, "--endpoint", url)
	if code != 0 {
		t.Fatalf("chain apply: exit %d\n%s%s", code, out, errOut)
	}
	resp, err := http.Get(url + "/v2.0/sfc/port_chains?name=udp")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list.PortChains) != 1 {
		t.Fatalf("port chain udp: %+v %v", list, err)
	}
	code, out, _ = run(t, "inspect", "t-api-tr")
	for _, want := range []string{"API PORT CHAIN", "udp-ppg-f2", "file-icmp", "api-" + list.PortChains[0].ID} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("inspect lacks %q: exit %d\n%s", want, code, out)
		}
	}
}

// TestReproduceOpenStackSFCRefusals: the combinations of study C's flags that cannot run are
// refused before anything is deployed, each saying what to do. --runtime kubernetes is no
// longer among them (its deploy-time part runs on the cluster: TestReproduceStudyCOnCluster
// in runtime/kubernetes).
func TestReproduceOpenStackSFCRefusals(t *testing.T) {
	privateState(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--part", "deploy-time", "--scenario", "c1"}, "--part deploy-time runs none; leave out --part or --scenario"},
		{[]string{"--part", "both"}, `--part "both": use data-plane or deploy-time`},
		{[]string{"--standard"}, "it has no --standard scale"},
		{[]string{"--runtime", "docker"}, "only its data plane runs on docker (--part data-plane)"},
		{[]string{"--runtime", "docker", "--part", "deploy-time"}, "only its data plane runs on docker (--part data-plane)"},
		{[]string{"--part", "deploy-time", "--duration", "1s"}, "the deploy-time experiment has no iperf3 duration"},
	} {
		args := append([]string{"reproduce", "openstack-sfc", "--quick", "--out", t.TempDir()}, tc.args...)
		code, _, errOut := run(t, args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("sfclab %s: exit %d, %q; want it refused with %q", strings.Join(args, " "), code, errOut, tc.want)
		}
	}
}
