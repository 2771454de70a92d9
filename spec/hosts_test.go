package spec_test

import (
	"strings"
	"testing"

	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// hostsBase is a valid routed lab on two emulated hosts; cases replace a line.
const hostsBase = `name: hbad
hosts:
  - {name: snd, cpus: "0", link: {rate: 10gbit}}
  - rsp
endpoints:
  sender: {kind: client, host: snd}
  responder: {kind: server, host: rsp, driver: macvlan}
chains:
  - {name: echo, from: sender, to: responder}
`

// TestHostsGood: both host forms decode, cores and link are kept, an endpoint without host:
// lands on the first host.
func TestHostsGood(t *testing.T) {
	lab, err := spec.Decode([]byte(strings.Replace(hostsBase, ", host: snd", "", 1)), "h.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	if got := lab.HostNames(); len(got) != 2 || got[0] != "snd" || got[1] != "rsp" {
		t.Errorf("hosts = %v", got)
	}
	if h := lab.Host("snd"); h.CPUs != "0" || h.Link == nil || h.Link.Rate != "10gbit" || h.Pos.Line != 3 {
		t.Errorf("host snd = %+v", h)
	}
	if e := lab.Endpoints["sender"]; e.Host != "snd" {
		t.Errorf("sender without host: is on %q, want the first host snd", e.Host)
	}
}

// TestHostsBad: every bad placement is refused with its file:line and what to do.
func TestHostsBad(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"unknown host", "host: rsp,", "host: nope,", `h.yaml:7:14: endpoint "responder": host "nope" is not in hosts: [snd rsp]`},
		{"bad cores", `cpus: "0"`, `cpus: "0-x"`, `h.yaml:3:5: host "snd": cpus: "0-x" in "0-x" is not a core number`},
		{"reversed range", `cpus: "0"`, `cpus: "3-1"`, `not a range A-B`},
		{"duplicate", "  - rsp\n", "  - snd\n", `host "snd" listed twice`},
		{"long name", "  - rsp\n", "  - responder-a\n", `host "responder-a": use lowercase letters, digits and '-', at most 10 characters`},
		{"link segment", "link: {rate: 10gbit}", "link: {rate: 10gbit, segment: 0}", `link: has no segment:`},
		{"link nothing", "link: {rate: 10gbit}", "link: {}", `host "snd": link: shaping sets nothing`},
		{"docker nat", "name: hbad\n", "name: hbad\nruntime: docker\ndocker: {attach: nat}\n", `h.yaml:5:5: hosts: docker attach nat publishes the target's port on a Docker network`},
		{"host-device", "driver: macvlan", "driver: {type: host-device, device: dummy0}", `driver host-device takes a device of the real host`},
		{"unknown field", `cpus: "0"`, `cores: "0"`, `unknown field "cores"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(hostsBase, tc.old, tc.new, 1)
			if src == hostsBase {
				t.Fatalf("case does not change the lab: %q", tc.old)
			}
			_, err := spec.Decode([]byte(src), "h.yaml", kinds.Spec())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant %q", err, tc.want)
			}
		})
	}
	// On docker the hosts are package hosts' as on netns (containers without a Docker network).
	if _, err := spec.Decode([]byte(strings.Replace(hostsBase, "name: hbad\n", "name: hbad\nruntime: docker\n", 1)), "h.yaml", kinds.Spec()); err != nil {
		t.Errorf("hosts on docker: %v", err)
	}
	// host: without hosts:
	noHosts := "name: hbad\nendpoints:\n  a: {kind: client, host: x}\n  b: {kind: server}\nchains:\n  - {from: a, to: b}\n"
	if _, err := spec.Decode([]byte(noHosts), "h.yaml", kinds.Spec()); err == nil || !strings.Contains(err.Error(), `h.yaml:3:6: endpoint "a": host "x": the lab lists no hosts:`) {
		t.Errorf("host without hosts: err = %v", err)
	}
	// ebpf-redirect sits on an emulated host's bridge.
	noHostsEBPF := "name: hbad\nendpoints:\n  a: {kind: client, driver: ebpf-redirect}\n  b: {kind: server}\nchains:\n  - {from: a, to: b}\n"
	if _, err := spec.Decode([]byte(noHostsEBPF), "h.yaml", kinds.Spec()); err == nil || !strings.Contains(err.Error(), `h.yaml:3:29: endpoint "a": driver ebpf-redirect needs hosts:`) {
		t.Errorf("ebpf-redirect without hosts: err = %v", err)
	}
	// A link on a single host shapes nothing.
	one := strings.Replace(hostsBase, "  - rsp\n", "", 1)
	one = strings.Replace(one, ", host: rsp", "", 1)
	if _, err := spec.Decode([]byte(one), "h.yaml", kinds.Spec()); err == nil || !strings.Contains(err.Error(), "a single host has no link to shape") {
		t.Errorf("link on one host: err = %v", err)
	}
}
