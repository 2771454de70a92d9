package bench

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnvironmentProvenance: the run records what the studies pin (Docker Engine, storage
// driver, cgroup version, SR-IOV, the servers' and load generators' versions), each read from
// this host, cross-checked here by another way of asking.
func TestEnvironmentProvenance(t *testing.T) {
	env := Environment(context.Background(), "test")
	for _, k := range []string{"docker", "cgroup", "sriov", "squid", "apache", "ab", "stress-ng", "qemu"} {
		if env[k] == "" {
			t.Errorf("environment has no %s", k)
		}
	}

	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	fstype := ""
	for _, line := range strings.Split(string(mi), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if f := strings.Fields(pre); ok && len(f) >= 5 && f[4] == "/sys/fs/cgroup" {
			fstype = strings.Fields(post)[0]
		}
	}
	switch fstype {
	case "cgroup2":
		if env["cgroup"] != "v2" {
			t.Errorf("cgroup %q, but /sys/fs/cgroup is cgroup2", env["cgroup"])
		}
	case "tmpfs":
		if !strings.HasPrefix(env["cgroup"], "v1") {
			t.Errorf("cgroup %q, but /sys/fs/cgroup is a tmpfs of v1 controllers", env["cgroup"])
		}
	default:
		t.Logf("/sys/fs/cgroup is %q here; cgroup recorded as %q", fstype, env["cgroup"])
	}

	out, err := exec.Command("docker", "info", "--format", "{{json .}}").Output()
	if err != nil {
		if env["docker"] != "not available" {
			t.Errorf("docker info fails (%v) but docker is %q", err, env["docker"])
		}
		return
	}
	var info struct{ ServerVersion, Driver string }
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatal(err)
	}
	if env["docker"] != info.ServerVersion || env["docker_storage_driver"] != info.Driver {
		t.Errorf("docker %q, storage driver %q; docker info says %q, %q", env["docker"], env["docker_storage_driver"], info.ServerVersion, info.Driver)
	}
}

func TestSRIOV(t *testing.T) {
	dir := t.TempDir()
	write := func(name, vfs string) {
		d := filepath.Join(dir, name, "device")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if vfs != "" {
			if err := os.WriteFile(filepath.Join(d, "sriov_totalvfs"), []byte(vfs+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("lo", "")
	write("eth1", "0")
	if got := SRIOV(dir); got != "none (no interface with sriov_totalvfs > 0)" {
		t.Errorf("no PF: %q", got)
	}
	write("eth0", "8")
	if got := SRIOV(dir); got != "eth0 (8 VFs)" {
		t.Errorf("one PF: %q", got)
	}
	if got := SRIOV(filepath.Join(dir, "missing")); !strings.HasPrefix(got, "unknown") {
		t.Errorf("missing directory: %q", got)
	}
}

func TestKernelOption(t *testing.T) {
	cfg := []byte("CONFIG_A=y\n# CONFIG_IRQ_TIME_ACCOUNTING is not set\nCONFIG_B=m\n")
	if got := kernelOption(cfg, "CONFIG_IRQ_TIME_ACCOUNTING"); !strings.HasPrefix(got, "off") {
		t.Errorf("not set: %q", got)
	}
	if got := kernelOption([]byte("CONFIG_IRQ_TIME_ACCOUNTING=y\n"), "CONFIG_IRQ_TIME_ACCOUNTING"); !strings.HasPrefix(got, "on") {
		t.Errorf("=y: %q", got)
	}
	if got := kernelOption(cfg, "CONFIG_NOPE"); !strings.HasPrefix(got, "off") {
		t.Errorf("absent: %q", got)
	}
	if got := IRQTimeAccounting("6.1.0 x86_64"); got == "" {
		t.Error("no answer on this host")
	}
}
