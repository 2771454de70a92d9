package docker_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sfclab/sfclab/internal/plantest"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime/docker"
)

// oneHostShaped is a routed lab on one emulated host confined to core 0, with its second
// segment shaped (rate, delay and loss), for the compose export.
const oneHostShaped = `
name: t-dk-cmpf
runtime: docker
hosts:
  - {name: h1, cpus: "0"}
endpoints:
  client: {kind: client, host: h1}
  server: {kind: server, host: h1}
functions:
  fw: {kind: firewall, host: h1}
chains:
  - name: web
    from: client
    to: server
    hops: [fw]
    shaping:
      - {segment: 1, rate: 100mbit, delay: 5ms, loss: 1%}
`

// TestComposeExportRefuses checks what a compose file cannot carry is refused with an error
// naming the feature, never dropped: several emulated hosts, another driver than veth.
func TestComposeExportRefuses(t *testing.T) {
	for _, tt := range []struct {
		name, lab string
		want      error
		says      []string
	}{
		{"two hosts", "../../examples/hosts.yaml", docker.ErrComposeHosts, []string{"2 emulated hosts (h1, h2)", "VXLAN"}},
		{"macvlan", strings.Replace(oneHostShaped, "client: {kind: client, host: h1}", "client: {kind: client, host: h1, driver: macvlan}", 1), docker.ErrComposeDriver, []string{"node client", "driver macvlan"}},
		{"vm", "name: t-dk-cmpvm\nruntime: docker\nendpoints: {client: {}, server: {}}\nfunctions: {fwd: {kind: forwarder, vm: {}}}\nchains: [{from: client, to: server, hops: [fwd]}]\n", docker.ErrComposeVM, []string{"node fwd", "remove its vm:"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var p *plan.Plan
			if strings.HasSuffix(tt.lab, ".yaml") {
				p = loadLab(t, tt.lab, "t-dk-cmpr", nil)
			} else {
				p = plantest.Decode(t, tt.lab)
			}
			_, err := docker.ComposeExport(p, docker.ComposeOptions{})
			if !errors.Is(err, tt.want) {
				t.Fatalf("ComposeExport error %v, want %v", err, tt.want)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

// TestComposeExportWrites checks what a compose file can carry is written and said in its
// header: one emulated host's cores as each container's cpuset (with Docker gateways its
// segments lack in the plan), and segment shaping as tc commands in the members' scripts.
func TestComposeExportWrites(t *testing.T) {
	p := plantest.Decode(t, oneHostShaped)
	e, err := docker.ComposeExport(p, docker.ComposeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	text := string(e.Compose)
	for _, want := range []string{
		"# Emulated host h1 is written as this machine",
		"cores 0 (cpuset)",
		"# Segment web.1 is shaped (rate 100mbit burst",
		"netem (module sch_netem)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("compose file lacks %q:\n%s", want, text)
		}
	}
	var f struct {
		Services map[string]struct {
			Cpuset  string
			Command []string
		}
		Networks map[string]struct {
			IPAM struct {
				Config []struct{ Subnet, Gateway string }
			}
		}
	}
	if err := yaml.Unmarshal(e.Compose, &f); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"client", "fw", "server"} {
		if f.Services[n].Cpuset != "0" {
			t.Errorf("service %s cpuset %q, want 0", n, f.Services[n].Cpuset)
		}
	}
	if gw := f.Networks["web.1"].IPAM.Config[0].Gateway; gw != "198.18.1.254" {
		t.Errorf("web.1 gateway %q, want the subnet's last usable address", gw)
	}
	// fw and server are on web.1: both shape their egress there; the client is not on it.
	for n, shaped := range map[string]bool{"fw": true, "server": true, "client": false} {
		script := strings.Join(f.Services[n].Command, " ")
		has := strings.Contains(script, "root handle 1: netem limit 10000 delay 5000us loss 1%") &&
			strings.Contains(script, "parent 1:1 handle 2: tbf rate 100000000bit burst")
		if has != shaped {
			t.Errorf("service %s shaped %v, want %v:\n%s", n, has, shaped, script)
		}
		if err := exec.Command("sh", "-n", "-c", strings.ReplaceAll(script, "$$", "$")).Run(); err != nil {
			t.Errorf("service %s script does not parse: %v", n, err)
		}
	}
}

// TestComposeExportShapedRuns brings the one-host lab up with docker-compose, its segment
// shaped by rate alone (this kernel may lack netem), and reads back, in the containers, the
// cpuset and the queueing discipline the export wrote.
func TestComposeExportShapedRuns(t *testing.T) {
	p := plantest.Decode(t, strings.Replace(oneHostShaped, "rate: 100mbit, delay: 5ms, loss: 1%", "rate: 100mbit", 1))
	buf, id, dockerExec := composeUp(t, p)
	server := id("server")
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := dockerExec(server, "tc", "qdisc", "show")
		if err == nil && strings.Contains(out, "tbf") {
			if !strings.Contains(out, "rate 100Mbit") {
				t.Errorf("server's qdiscs:\n%s", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server's qdiscs never appeared: %v\n%s\n%s", err, out, buf.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The chain works on the machine as it did on the host: the client reaches the server
	// through the firewall.
	target := p.Chains[0].Target.String()
	var pout string
	var perr error
	for try := 0; try < 20; try++ {
		if pout, perr = dockerExec(id("client"), "ping", "-c", "1", "-W", "1", target); perr == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if perr != nil {
		t.Errorf("ping %s through the exported one-host chain: %v\n%s", target, perr, pout)
	}
	out, err := exec.Command("docker", "inspect", "-f", "{{.HostConfig.CpusetCpus}}", server).Output()
	if err != nil || strings.TrimSpace(string(out)) != "0" {
		t.Errorf("server's cpuset %q (%v), want 0", out, err)
	}
}
