package load

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// What one background node costs the machine, for the count limit (see NodeLimit): a
// namespace with a cgroup, a veth pair with its bridge port, and its load process.
const (
	// NodeMemory is a generous bound on one node's memory: the kernel's namespace, veth and
	// bridge-port state and socket buffers (about 1 MiB) plus its load process (stress-ng or
	// iperf3 with its timeout wrapper, 4-6 MiB resident); a bound, not a measurement.
	NodeMemory = 16 << 20
	// NodeProcs is the most processes one node runs: timeout, stress-ng and its worker (cpu),
	// or timeout and iperf3 (network, either end).
	NodeProcs = 3
	// MemoryShare is the part of the available memory background nodes may take: the rest is
	// left to the lab, the probes and everything else on the machine.
	MemoryShare = 2
	// HardMaxNodes bounds the count whatever the machine holds: past it deploying a cell takes
	// long enough to dominate a trial.
	HardMaxNodes = 1024
)

// Limit is the most background nodes this machine can hold, and why.
type Limit struct {
	Max int
	// Why states the figures the limit comes from.
	Why string
}

// Files the limit reads; tests point them at fake files.
var (
	MeminfoFile = "/proc/meminfo"
	PidMaxFile  = "/proc/sys/kernel/pid_max"
	ThreadsFile = "/proc/sys/kernel/threads-max"
	ProcDir     = "/proc"
)

// NodeLimit derives the background-node limit from the machine: half its available memory at
// NodeMemory per node, the pids left under pid_max and threads-max at NodeProcs per node, and
// HardMaxNodes; rounded down to an even number (nodes come in pairs).
func NodeLimit() Limit {
	type bound struct {
		n   int
		why string
	}
	bounds := []bound{{HardMaxNodes, fmt.Sprintf("at most %d by design", HardMaxNodes)}}
	if kb, err := meminfo("MemAvailable"); err == nil {
		n := int(kb * 1024 / MemoryShare / NodeMemory)
		bounds = append(bounds, bound{n, fmt.Sprintf("MemAvailable %.1f GiB / %d at %d MiB per node = %d",
			float64(kb)/(1<<20), MemoryShare, NodeMemory>>20, n)})
	}
	running := countProcs()
	for _, f := range []struct{ file, name string }{{PidMaxFile, "pid_max"}, {ThreadsFile, "threads-max"}} {
		if v, err := readInt(f.file); err == nil {
			n := (v - running) / NodeProcs
			bounds = append(bounds, bound{n, fmt.Sprintf("%s %d - %d running = %d pids at %d per node = %d", f.name, v, running, v-running, NodeProcs, n)})
		}
	}
	best := bounds[0]
	for _, b := range bounds[1:] {
		if b.n < best.n {
			best = b
		}
	}
	var whys []string
	for _, b := range bounds {
		whys = append(whys, b.why)
	}
	max := best.n - best.n%2
	if max < 0 {
		max = 0
	}
	return Limit{Max: max, Why: fmt.Sprintf("this machine holds %d: the least of %s", max, strings.Join(whys, "; "))}
}

func meminfo(key string) (int64, error) {
	f, err := os.Open(MeminfoFile)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && k == key {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("read %s: no %s", MeminfoFile, key)
}

func readInt(file string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

func countProcs() int {
	ents, err := os.ReadDir(ProcDir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			n++
		}
	}
	return n
}
