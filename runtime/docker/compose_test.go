package docker_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime/docker"
	"github.com/sfclab/sfclab/spec"
)

// TestComposeExportRuns exports examples/fw.yaml as a compose file, brings it up with the
// compose tool installed here (docker-compose v1), checks that iperf3 and ping cross the
// firewall, brings it down and checks that nothing is left.
func TestComposeExportRuns(t *testing.T) {
	p := loadLab(t, "../../examples/fw.yaml", "t-dk-cmp", nil)
	buf, id, dockerExec := composeUp(t, p)
	client, server, fw := id("client"), id("server"), id("fw")
	// The scripts run at start; wait until the firewall's rules are loaded.
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := dockerExec(fw, "iptables", "-w", "-S", "SFCLAB-FW")
		if err == nil && strings.Contains(out, "rule-1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("firewall rules not loaded: %v %s\n%s", err, out, buf.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	target := p.Chains[0].Target.String()
	if out, err := dockerExec(client, "ping", "-c", "2", "-W", "2", target); err != nil {
		t.Fatalf("ping %s through the exported firewall: %v\n%s", target, err, out)
	}
	if out, err := dockerExec("-d", server, "iperf3", "-s", "-1"); err != nil {
		t.Fatalf("start iperf3 server: %v %s", err, out)
	}
	var out string
	var err error
	for try := 0; try < 20; try++ {
		if out, err = dockerExec(client, "iperf3", "-c", target, "-t", "1", "-J"); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3 through the exported firewall: %v\n%s", err, out)
	}
	var res iperfResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("decode iperf3: %v\n%s", err, out)
	}
	if res.End.SumReceived.BitsPerSecond <= 0 {
		t.Fatal("no throughput through the exported chain")
	}
	rules, _ := dockerExec(fw, "iptables", "-w", "-t", "nat", "-L", "POSTROUTING", "-v", "-n")
	if !strings.Contains(rules, "MASQUERADE") {
		t.Errorf("masquerade rule missing in fw:\n%s", rules)
	}
	routes, _ := dockerExec(client, "ip", "route")
	if strings.Contains(routes, "default") {
		t.Errorf("client keeps a default route:\n%s", routes)
	}
	t.Logf("exported fw via docker-compose: iperf3 %.2f Gbit/s to %s", res.End.SumReceived.BitsPerSecond/1e9, target)
}

// TestComposeScript checks the generated script of a node: interfaces found by address,
// routes on them, rules, and the function's configuration with its interface names replaced.
func TestComposeScript(t *testing.T) {
	p := loadLab(t, "../../examples/fw.yaml", "fw", nil)
	s, err := docker.NodeScript(p, p.Node("fw"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"IF_ETH0=$(wait_if 198.18.0.2/24)",
		"IF_ETH1=$(wait_if 198.18.1.1/24)",
		"while ip route del default",
		"iptables-restore -w --noflush <<SFCLAB_EOF",
		"-A POSTROUTING -o ${IF_ETH1} -j MASQUERADE",
		"exec sleep infinity",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("fw script lacks %q:\n%s", want, s)
		}
	}
	s, _ = docker.NodeScript(p, p.Node("client"))
	for _, want := range []string{`ip route add 198.18.1.0/24 table 100 via 198.18.0.2 dev "$IF_ETH0"`, "ip rule add priority 1000 lookup 100"} {
		if !strings.Contains(s, want) {
			t.Errorf("client script lacks %q:\n%s", want, s)
		}
	}
	if err := exec.Command("sh", "-n", "-c", s).Run(); err != nil {
		t.Errorf("client script does not parse: %v", err)
	}
}

// composeUp exports a plan as a compose file, brings it up with the compose tool installed here
// (docker-compose v1) and brings it down at the end of the test, checking that nothing is left.
// It returns the file, the container id of a service and a `docker exec` runner.
func composeUp(t *testing.T, p *plan.Plan) (*bytes.Buffer, func(string) string, func(...string) (string, error)) {
	t.Helper()
	requireEngine(t)
	compose, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Skip("SKIPPED LOUDLY: docker-compose is not installed (apt-get install docker-compose)")
	}
	var buf bytes.Buffer
	if err := docker.Compose(&buf, p); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "compose.yaml")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	project := "sfcx-" + p.Lab
	run := func(args ...string) (string, error) {
		cmd := exec.Command(compose, append([]string{"-p", project, "-f", file}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if v, err := exec.Command(compose, "version", "--short").Output(); err == nil {
		t.Logf("docker-compose %s", strings.TrimSpace(string(v)))
	}
	t.Cleanup(func() {
		if out, err := run("down", "--timeout", "1"); err != nil {
			t.Errorf("docker-compose down: %v\n%s", err, out)
		}
		out, _ := exec.Command("docker", "ps", "-a", "-q", "--filter", "label="+docker.LabelExported+"="+p.Lab).Output()
		if s := strings.TrimSpace(string(out)); s != "" {
			t.Errorf("containers left after docker-compose down: %s", s)
		}
		out, _ = exec.Command("docker", "network", "ls", "-q", "--filter", "label="+docker.LabelExported+"="+p.Lab).Output()
		if s := strings.TrimSpace(string(out)); s != "" {
			t.Errorf("networks left after docker-compose down: %s", s)
		}
	})
	if out, err := run("up", "-d"); err != nil {
		t.Fatalf("docker-compose up: %v\n%s\n%s", err, out, buf.String())
	}
	id := func(service string) string {
		out, err := run("ps", "-q", service)
		if err != nil || strings.TrimSpace(out) == "" {
			t.Fatalf("docker-compose ps %s: %v %s", service, err, out)
		}
		return strings.TrimSpace(out)
	}
	dockerExec := func(args ...string) (string, error) {
		out, err := exec.Command("docker", append([]string{"exec"}, args...)...).CombinedOutput()
		return string(out), err
	}
	return &buf, id, dockerExec
}

// TestComposeExportHTTP exports study B's chain (client -> Squid with its cache on -> Apache
// origin), brings it up with plain Docker tools and fetches an object through the proxy twice:
// the origin serves it at its size, and the second request is a cache hit.
func TestComposeExportHTTP(t *testing.T) {
	p := loadLab(t, "../../experiments/labs/http-cache.yaml", "t-dk-cmph", func(l *spec.Lab) {
		l.Endpoints["origin"].HTTP.Objects = []string{"1k", "10k"}
	})
	buf, id, dockerExec := composeUp(t, p)
	client := id("client")
	origin := p.Node("origin").Interfaces[0].Address.Addr()
	via := fmt.Sprintf("%s:%d", p.Chains[0].Target, p.Chains[0].Port)
	url := fmt.Sprintf("http://%s/obj-10k", origin)
	var out string
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err = dockerExec(client, "ab", "-q", "-n", "2", "-X", via, url)
		if err == nil && strings.Contains(out, "Complete requests:      2") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ab through the exported proxy %s: %v\n%s\n%s", via, err, out, buf.String())
		}
		time.Sleep(300 * time.Millisecond)
	}
	if !strings.Contains(out, "Document Length:        10240 bytes") || !strings.Contains(out, "Failed requests:        0") {
		t.Fatalf("ab through the exported proxy did not get the 10k object:\n%s", out)
	}
	// ab fetched the object twice; a third request shows Squid's verdict in its X-Cache header.
	req := fmt.Sprintf(`exec 3<>/dev/tcp/%s/%d; printf 'GET %s HTTP/1.0\r\n\r\n' >&3; head -c 2000 <&3`,
		p.Chains[0].Target, p.Chains[0].Port, url)
	head, err := dockerExec(client, "bash", "-c", req)
	if err != nil {
		t.Fatalf("request through the exported proxy: %v %s", err, head)
	}
	if !strings.Contains(head, "200 OK") || !strings.Contains(head, "X-Cache: HIT") {
		t.Errorf("third request through the exported proxy with its cache on is no cache hit:\n%s", head)
	}
}
