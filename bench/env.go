package bench

import (
	"bufio"
	"compress/gzip"
	"context"
	"io"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	sfcruntime "github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/runtimes"
)

// Environment describes the machine a run measured: kernel, CPU, cores, memory, tool versions,
// the host's TCP congestion control, and sfclab's own version.
func Environment(ctx context.Context, version string) map[string]string {
	rts := runtimes.All(runtimes.Options{})
	env := map[string]string{
		"sfclab":   version,
		"go":       runtime.Version(),
		"cores":    itoa(runtime.NumCPU()),
		"cpu":      cpuModel(),
		"memory":   memTotal(),
		"hostname": hostname(),
	}
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		env["kernel"] = utsString(u.Release[:]) + " " + utsString(u.Machine[:])
	}
	env["kvm"] = KVMStatus()
	if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control"); err == nil {
		env["tcp_congestion_control"] = strings.TrimSpace(string(b))
	}
	tools := map[string][]string{
		"iperf3":   {"iperf3", "--version"},
		"haproxy":  {"haproxy", "-v"},
		"nft":      {"nft", "-v"},
		"iptables": {"iptables", "-V"},
		"ping":     {"ping", "-V"},
		// The studies' servers and load (B: Squid, Apache, ab; background load: stress-ng;
		// the VM runtime: qemu), as installed on the host; Docker nodes run an image built
		// from the host's Debian suite.
		"squid":     {"squid", "-v"},
		"apache":    {"apache2", "-v"},
		"ab":        {"ab", "-V"},
		"stress-ng": {"stress-ng", "--version"},
		"qemu":      {"qemu-system-x86_64", "--version"},
	}
	for name, argv := range tools {
		env[name] = firstLine(ctx, argv...)
	}
	for _, name := range slices.Sorted(maps.Keys(rts)) {
		if d, ok := rts[name].(sfcruntime.EnvironmentDescriber); ok {
			maps.Copy(env, d.Environment(ctx))
		}
	}
	env["cgroup"] = CgroupVersion("/sys/fs/cgroup")
	env["sriov"] = SRIOV("/sys/class/net")
	env["irq_time_accounting"] = IRQTimeAccounting(env["kernel"])
	return env
}

// IRQTimeAccounting says whether the running kernel accounts IRQ and softirq time apart from
// the task it interrupts (CONFIG_IRQ_TIME_ACCOUNTING, read from /proc/config.gz or
// /boot/config-RELEASE): without it, softirq work done while a node's task is on the CPU is
// charged to that node's cgroup too. kernel is the environment's kernel line ("RELEASE ARCH").
func IRQTimeAccounting(kernel string) string {
	var cfg []byte
	if f, err := os.Open("/proc/config.gz"); err == nil {
		defer f.Close()
		if z, err := gzip.NewReader(f); err == nil {
			cfg, _ = io.ReadAll(z)
		}
	}
	if cfg == nil {
		release, _, _ := strings.Cut(kernel, " ")
		cfg, _ = os.ReadFile("/boot/config-" + release)
	}
	if cfg == nil {
		return "unknown (no /proc/config.gz nor /boot/config of the running kernel)"
	}
	return kernelOption(cfg, "CONFIG_IRQ_TIME_ACCOUNTING")
}

// kernelOption returns "on" or "off" for a boolean option of a kernel config.
func kernelOption(cfg []byte, name string) string {
	for _, line := range strings.Split(string(cfg), "\n") {
		if line == name+"=y" {
			return "on (" + name + "=y)"
		}
		if line == "# "+name+" is not set" {
			return "off (" + name + " is not set)"
		}
	}
	return "off (" + name + " absent from the kernel config)"
}

// Magic numbers of statfs(2) for the cgroup mounts.
const (
	cgroup2Magic = 0x63677270
	tmpfsMagic   = 0x01021994
)

// CgroupVersion says which cgroup hierarchy is mounted at root (/sys/fs/cgroup): "v2" when
// it is the unified hierarchy, "v1 (hybrid: v2 also at unified)" or "v1" for the legacy
// controllers on a tmpfs, "unknown (...)" otherwise.
func CgroupVersion(root string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(root, &st); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	switch uint32(st.Type) {
	case cgroup2Magic:
		return "v2"
	case tmpfsMagic:
		var u syscall.Statfs_t
		if syscall.Statfs(root+"/unified", &u) == nil && uint32(u.Type) == cgroup2Magic {
			return "v1 (hybrid: v2 also at unified)"
		}
		return "v1"
	}
	return "unknown (file system type 0x" + strconv.FormatInt(int64(st.Type), 16) + ")"
}

// SRIOV lists the interfaces under netDir (/sys/class/net) that are SR-IOV physical
// functions (sriov_totalvfs > 0), "none (no interface with sriov_totalvfs > 0)" when there is
// none.
func SRIOV(netDir string) string {
	ents, err := os.ReadDir(netDir)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	var pfs []string
	for _, e := range ents {
		b, err := os.ReadFile(netDir + "/" + e.Name() + "/device/sriov_totalvfs")
		if err != nil {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
			pfs = append(pfs, e.Name()+" ("+strconv.Itoa(n)+" VFs)")
		}
	}
	if len(pfs) == 0 {
		return "none (no interface with sriov_totalvfs > 0)"
	}
	return strings.Join(pfs, ", ")
}

func firstLine(ctx context.Context, argv ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil && len(out) == 0 {
		return "not available"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "MemTotal:") {
			return strings.Join(strings.Fields(strings.TrimPrefix(l, "MemTotal:")), " ")
		}
	}
	return "unknown"
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

func utsString(b []int8) string {
	var s []byte
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

func itoa(i int) string { return strconv.Itoa(i) }
