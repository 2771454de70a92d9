package docker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sfclab/sfclab/internal/plantest"
	"github.com/sfclab/sfclab/lb"
	"github.com/sfclab/sfclab/plan"
	iperf3probe "github.com/sfclab/sfclab/probe/iperf3"
	"github.com/sfclab/sfclab/runtime/docker"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/httpserver"
	"github.com/sfclab/sfclab/vnf/l4lb"
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
	res, err := iperf3probe.Parse([]byte(out))
	if err != nil {
		t.Fatalf("decode iperf3: %v\n%s", err, out)
	}
	if res.ReceivedBPS <= 0 {
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
	t.Logf("exported fw via docker-compose: iperf3 %.2f Gbit/s to %s", res.ReceivedBPS/1e9, target)
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

// composeVersion is the version of the docker-compose installed here, asked once.
var composeVersion struct {
	sync.Once
	v string
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
	e, err := docker.ComposeExport(p, docker.ComposeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	buf := bytes.NewBuffer(e.Compose)
	file := filepath.Join(t.TempDir(), "compose.yaml")
	if err := e.Write(file); err != nil {
		t.Fatal(err)
	}
	project := "sfcx-" + p.Lab
	run := func(args ...string) (string, error) {
		cmd := exec.Command(compose, append([]string{"-p", project, "-f", file}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	composeVersion.Do(func() {
		if v, err := exec.Command(compose, "version", "--short").Output(); err == nil {
			composeVersion.v = strings.TrimSpace(string(v))
		}
	})
	t.Logf("docker-compose %s", composeVersion.v)
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
	// A service's container, by the labels docker-compose ps reads (the docker CLI answers in
	// milliseconds, docker-compose starts Python for a second each time).
	id := func(service string) string {
		out, err := exec.Command("docker", "ps", "-a", "-q", "--no-trunc", "--filter", "label="+docker.LabelExported+"="+p.Lab,
			"--filter", "label=com.docker.compose.service="+service).Output()
		if err != nil || len(strings.Fields(string(out))) != 1 {
			t.Fatalf("container of service %s: %v %q", service, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	dockerExec := func(args ...string) (string, error) {
		out, err := exec.Command("docker", append([]string{"exec"}, args...)...).CombinedOutput()
		return string(out), err
	}
	return buf, id, dockerExec
}

// TestComposeExportHTTP exports study B's chain (client -> Squid with its cache on -> Apache
// origin), brings it up with plain Docker tools and fetches an object through the proxy twice:
// the origin serves it at its size, and the second request is a cache hit.
func TestComposeExportHTTP(t *testing.T) {
	p := loadLab(t, "../../experiments/labs/http-cache.yaml", "t-dk-cmph", func(l *spec.Lab) {
		l.Endpoints["origin"].HTTP.(*httpserver.HTTPServerParams).Objects = []string{"1k", "10k"}
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

const sfclbLab = `name: %s
runtime: docker
endpoints:
  client: {kind: client}
  web: {kind: server, instances: 2}
functions:
  lb: {kind: l4lb, params: {impl: sfclab, port: 7000, balance: roundrobin, check_interval: 100ms, rise: 1, fall: 2}}
chains:
  - {name: web, from: client, to: web, hops: [lb]}
`

// TestComposeExportSfclabFiles checks the export of l4lb impl sfclab without an engine: the
// service mounts the sfclab program read-only at SfclabPath and its configuration from beside
// the compose file, its script runs `"$SFCLAB" lb --config`, the configuration is the
// function's, and the compose file alone (stdout) is refused with the reason.
func TestComposeExportSfclabFiles(t *testing.T) {
	p := plantest.Decode(t, fmt.Sprintf(sfclbLab, "t-cmplb"))
	e, err := docker.ComposeExport(p, docker.ComposeOptions{Executable: "/opt/sfclab/bin/sfclab"})
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Files) != 1 || e.Files[0].Name != "t-cmplb.lb.lb.json" {
		t.Fatalf("export files %+v, want one t-cmplb.lb.lb.json", e.Files)
	}
	var cfg lb.Config
	if err := json.Unmarshal(e.Files[0].Data, &cfg); err != nil {
		t.Fatalf("exported balancer config: %v\n%s", err, e.Files[0].Data)
	}
	f := p.Node("lb").Function
	if cfg.Listen.Addr() != f.IngressAddr || cfg.Listen.Port() != f.Port || len(cfg.Backends) != 2 || cfg.Stats != l4lb.ComposeLBStatsPath {
		t.Errorf("exported balancer config %+v does not match the function (listen %s:%d, 2 backends)", cfg, f.IngressAddr, f.Port)
	}
	var file struct {
		Services map[string]struct {
			Volumes []string `yaml:"volumes"`
			Command []string `yaml:"command"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(e.Compose, &file); err != nil {
		t.Fatal(err)
	}
	svc := file.Services["lb"]
	want := []string{"/opt/sfclab/bin/sfclab:" + docker.SfclabPath + ":ro", "./t-cmplb.lb.lb.json:" + l4lb.ComposeLBConfigPath + ":ro"}
	if !slices.Equal(svc.Volumes, want) {
		t.Errorf("lb volumes %q, want %q", svc.Volumes, want)
	}
	if v := file.Services["client"].Volumes; len(v) != 0 {
		t.Errorf("client mounts %q, want nothing", v)
	}
	script := svc.Command[len(svc.Command)-1]
	for _, want := range []string{"SFCLAB=" + docker.SfclabPath, `exec "$$SFCLAB" lb --config ` + l4lb.ComposeLBConfigPath} {
		if !strings.Contains(script, want) {
			t.Errorf("lb script lacks %q:\n%s", want, script)
		}
	}
	var out bytes.Buffer
	if err := docker.Compose(&out, p); !errors.Is(err, docker.ErrNeedsDir) || !strings.Contains(err.Error(), "-o FILE") {
		t.Errorf("compose file alone of a lab with an sfclab balancer: %v, want %v naming -o FILE", err, docker.ErrNeedsDir)
	}
}

// TestComposeExportSfclabLB exports a lab whose l4lb runs sfclab's own balancer and brings it
// up with docker-compose: the balancer runs in the lb container as the host's program (this
// test binary stands in for sfclab) mounted read-only at SfclabPath, with its configuration
// mounted from beside the compose file; 1 MiB each way through it comes back unchanged from
// both backends, its counters agree, and docker-compose down leaves nothing.
func TestComposeExportSfclabLB(t *testing.T) {
	p := plantest.Decode(t, fmt.Sprintf(sfclbLab, "t-dk-cmplb"))
	buf, id, dockerExec := composeUp(t, p)
	f := p.Node("lb").Function
	for _, be := range f.Backends {
		echoIn(t, composeNode(t, id(be.Name)), fmt.Sprintf("%s:%d", be.Addr, be.Port), be.Name)
	}
	lbID := id("lb")
	// The stats socket inside the lb container, reached through its init's root.
	stats := fmt.Sprintf("/proc/%d/root%s", composeNode(t, lbID).PID, l4lb.ComposeLBStatsPath)
	var before *lb.Stats
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := lb.ReadStats(context.Background(), stats)
		if err == nil && len(st.Backends) == 2 && st.Backends[0].Up && st.Backends[1].Up {
			before = st
			break
		}
		if time.Now().After(deadline) {
			logs, _ := exec.Command("docker", "logs", lbID).CombinedOutput()
			t.Fatalf("exported balancer not ready with both backends up: %+v, %v\nlogs:\n%s\n%s", st, err, logs, buf.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, err := dockerExec(lbID, "sh", "-c", fmt.Sprintf("readlink /proc/%d/exe; test -x %s && ! test -w %s && echo read-only", before.Pid, docker.SfclabPath, docker.SfclabPath))
	if err != nil || out != docker.SfclabPath+"\nread-only\n" {
		t.Errorf("balancer pid %d in the lb container: %q, %v; want it running %s, read-only", before.Pid, out, err, docker.SfclabPath)
	}
	client := composeNode(t, id("client"))
	addr := fmt.Sprintf("%s:%d", f.IngressAddr, f.Port)
	const size = 1 << 20
	seen := map[string]bool{}
	for range 2 * len(f.Backends) {
		seen[echoThrough(t, client, addr, size)] = true
	}
	for _, be := range f.Backends {
		if !seen[be.Name] {
			t.Errorf("backend %s answered no connection of %d (roundrobin): %v", be.Name, 2*len(f.Backends), seen)
		}
	}
	after, err := lb.ReadStats(context.Background(), stats)
	if err != nil {
		t.Fatal(err)
	}
	for i, be := range after.Backends {
		if in := be.BytesIn - before.Backends[i].BytesIn; in != 2*size {
			t.Errorf("backend %s: %d bytes in through the exported balancer, want %d", be.Name, in, 2*size)
		}
	}
}

// composeNode is a container brought up by docker-compose, as a node whose network namespace
// the test can enter (by its init's PID).
func composeNode(t *testing.T, id string) *docker.Node {
	t.Helper()
	out, err := exec.Command("docker", "inspect", "-f", "{{.State.Pid}}", id).Output()
	if err != nil {
		t.Fatalf("docker inspect %s: %v", id, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || pid == 0 {
		t.Fatalf("container %s has no pid: %q", id, out)
	}
	return &docker.Node{Container: id, PID: pid}
}
