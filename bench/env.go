package bench

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Environment describes the machine a run measured: kernel, CPU, cores, memory, tool versions,
// the host's TCP congestion control, and sfclab's own version.
func Environment(ctx context.Context, version string) map[string]string {
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
	}
	for name, argv := range tools {
		env[name] = firstLine(ctx, argv...)
	}
	return env
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
