package spec_test

import (
	"strings"
	"testing"

	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

const vmBase = `name: vmlab
endpoints:
  client: {kind: client}
  server: {kind: server}
functions:
  fwd:
    kind: forwarder
    vm: {cpus: 2}
chains:
  - {from: client, to: server, hops: [fwd]}
`

// TestVMGood: vm: settings get their defaults; runtime: vm makes every function a VM.
func TestVMGood(t *testing.T) {
	lab, err := spec.Decode([]byte(vmBase), "v.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	if m := lab.Functions["fwd"].VM; m == nil || m.CPUs != 2 || m.Memory != spec.DefaultVMMemory || m.NIC != spec.NICVirtio || m.Image != spec.VMImageBusybox || m.Pos.Line != 8 {
		t.Errorf("vm = %+v", m)
	}
	lab, err = spec.Decode([]byte(strings.Replace(vmBase, "vm: {cpus: 2}", "vm: {image: debian}", 1)), "v.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	if m := lab.Functions["fwd"].VM; m == nil || m.Image != spec.VMImageDebian {
		t.Errorf("vm: {image: debian}: vm = %+v", m)
	}
	// Pin lists of each form decode (whether the host has the cores is deploy's check).
	for _, pin := range []string{"1", "0-1", "0,2", "0-1, 3", "4096"} {
		lab, err = spec.Decode([]byte(strings.Replace(vmBase, "vm: {cpus: 2}", `vm: {pin: "`+pin+`"}`, 1)), "v.yaml", kinds.Spec())
		if err != nil {
			t.Errorf("vm pin %q: %v", pin, err)
		} else if m := lab.Functions["fwd"].VM; m.Pin != pin {
			t.Errorf("vm pin %q decoded as %q", pin, m.Pin)
		}
	}
	lab, err = spec.Decode([]byte(strings.Replace(strings.Replace(vmBase, "    vm: {cpus: 2}\n", "", 1), "name: vmlab\n", "name: vmlab\nruntime: vm\n", 1)), "v.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	if m := lab.Functions["fwd"].VM; m == nil || m.CPUs != spec.DefaultVMCPUs {
		t.Errorf("runtime vm: function vm = %+v, want the defaults", m)
	}
	if lab.Endpoints["client"].VM != nil {
		t.Error("runtime vm made an endpoint without vm: a VM")
	}
	// A VM on an emulated host of a routed lab (its ports made by package hosts).
	lab, err = spec.Decode([]byte(strings.Replace(vmBase, "name: vmlab\n", "name: vmlab\nhosts: [{name: h1}, {name: h2}]\n", 1)), "v.yaml", kinds.Spec())
	if err != nil {
		t.Fatalf("a VM on an emulated host of a routed lab: %v", err)
	}
	if lab.Functions["fwd"].VM == nil {
		t.Error("a VM on an emulated host lost its vm: settings")
	}
	// A VM function in a routed docker lab (its host side the node's container), and a VM
	// endpoint there.
	docker := strings.Replace(vmBase, "name: vmlab\n", "name: vmlab\nruntime: docker\n", 1)
	for _, src := range []string{docker, strings.Replace(docker, "server: {kind: server}", "server: {kind: server, vm: {}}", 1)} {
		if lab, err = spec.Decode([]byte(src), "v.yaml", kinds.Spec()); err != nil {
			t.Fatalf("a VM in a routed docker lab: %v", err)
		}
		if lab.Functions["fwd"].VM == nil || lab.Runtime != spec.RuntimeDocker {
			t.Errorf("a VM in a docker lab: vm %+v, runtime %q", lab.Functions["fwd"].VM, lab.Runtime)
		}
	}
}

// TestVMDockerDecodes: docker labs take VM nodes, routed or transparent, on the machine itself
// or on emulated hosts, and with attach nat (attach nat was refused at the vm: settings until
// a published port's DNAT into a guest was tested).
func TestVMDockerDecodes(t *testing.T) {
	docker := strings.Replace(vmBase, "name: vmlab\n", "name: vmlab\nruntime: docker\n", 1)
	transparent := strings.NewReplacer("hosts: [h1, h2]", "runtime: docker\nhosts: [h1]\nnetworks: [net, net2]",
		"a: {kind: forwarder, ports: {in: net, out: net}}", "a: {kind: forwarder, vm: {}, ports: {in: net, out: net2}}").Replace(transparentBase)
	for name, src := range map[string]string{
		"transparent on one host":    transparent,
		"transparent on two hosts":   strings.Replace(transparent, "hosts: [h1]", "hosts: [h1, h2]", 1),
		"routed on an emulated host": strings.Replace(docker, "runtime: docker\n", "runtime: docker\nhosts: [h1]\n", 1),
		// A published port's DNAT reaches a guest (runtime/vm's TestDockerNATVMServer).
		"attach nat": strings.Replace(docker, "runtime: docker\n", "runtime: docker\ndocker: {attach: nat}\n", 1),
	} {
		if _, err := spec.Decode([]byte(src), "t.yaml", kinds.Spec()); err != nil {
			t.Errorf("a VM in a docker lab, %s: %v", name, err)
		}
	}
}

// TestVMBackend: vm: backend defaults to tap; macvtap decodes in a routed namespace lab, and
// the plan makes its segments bridges with the VM's interfaces on them (no port of their own).
func TestVMBackend(t *testing.T) {
	lab, err := spec.Decode([]byte(vmBase), "v.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	if b := lab.Functions["fwd"].VM.Backend; b != spec.VMBackendTap {
		t.Errorf("default backend %q, want tap", b)
	}
	lab, err = spec.Decode([]byte(strings.Replace(vmBase, "vm: {cpus: 2}", "vm: {backend: macvtap}", 1)), "v.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	if b := lab.Functions["fwd"].VM.Backend; b != spec.VMBackendMacvtap {
		t.Errorf("backend %q, want macvtap", b)
	}
}

// TestVMMacvtapLabs: a macvtap VM decodes in every kind of lab a VM node does: routed on
// emulated hosts, docker on the machine and on emulated hosts, transparent (its refusals there
// are gone: docs/vm.md, "NIC backends").
func TestVMMacvtapLabs(t *testing.T) {
	mv := strings.Replace(vmBase, "vm: {cpus: 2}", "vm: {backend: macvtap}", 1)
	for _, tc := range []struct{ name, src string }{
		{"routed on emulated hosts", strings.Replace(mv, "name: vmlab\n", "name: vmlab\nhosts: [h1, h2]\n", 1)},
		{"docker", strings.Replace(mv, "name: vmlab\n", "name: vmlab\nruntime: docker\n", 1)},
		{"docker on emulated hosts", strings.Replace(mv, "name: vmlab\n", "name: vmlab\nruntime: docker\nhosts: [h1]\n", 1)},
		{"transparent", strings.Replace(transparentBase, "a: {kind: forwarder, ports: {in: net, out: net}}", "a: {kind: forwarder, vm: {backend: macvtap}, ports: {in: net, out: net}}", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(tc.src, "backend: macvtap") {
				t.Fatalf("the test lab has no macvtap VM:\n%s", tc.src)
			}
			lab, err := spec.Decode([]byte(tc.src), "v.yaml", kinds.Spec())
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, f := range lab.Functions {
				if f.VM != nil && f.VM.Backend == spec.VMBackendMacvtap {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d functions with a macvtap VM, want 1", n)
			}
		})
	}
}

// TestVMBad: what a lab file cannot ask of a VM is refused at its place.
func TestVMBad(t *testing.T) {
	for _, tc := range []struct{ name, old, new, want string }{
		{"memory too small", "vm: {cpus: 2}", "vm: {memory: 64}", `v.yaml:8:9: function "fwd": vm memory 64 MiB: a guest needs at least 128 MiB`},
		{"negative cpus", "vm: {cpus: 2}", "vm: {cpus: -1}", `v.yaml:8:9: function "fwd": vm cpus -1`},
		{"nic", "vm: {cpus: 2}", "vm: {nic: e1000}", `vm nic "e1000" is not one of virtio`},
		{"unknown field", "vm: {cpus: 2}", "vm: {vcpus: 2}", `unknown field "vcpus"`},
		{"image", "vm: {cpus: 2}", "vm: {image: ubuntu}", `v.yaml:8:9: function "fwd": vm image "ubuntu" is not one of busybox, debian`},
		{"image not a string", "vm: {cpus: 2}", "vm: {image: [debian]}", `v.yaml:8`},
		{"backend", "vm: {cpus: 2}", "vm: {backend: vhost}", `v.yaml:8:9: function "fwd": vm backend "vhost" is not one of tap, macvtap`},
		{"pin not a list", "vm: {cpus: 2}", `vm: {pin: "x"}`, `v.yaml:8:9: function "fwd": vm pin "x" is not a list of cores such as 1, 0-1 or 0,2`},
		{"pin range backwards", "vm: {cpus: 2}", `vm: {pin: "1-0"}`, `vm pin "1-0" is not a list of cores`},
		{"pin negative", "vm: {cpus: 2}", `vm: {pin: "0,-1"}`, `vm pin "0,-1" is not a list of cores`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(vmBase, tc.old, tc.new, 1)
			_, err := spec.Decode([]byte(src), "v.yaml", kinds.Spec())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant %q", err, tc.want)
			}
		})
	}
}
