package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Memory returns the memory the group's processes use now, in bytes: with a memory
// controller in the group (cgroup v2 with memory enabled), as docker stats counts it
// (DirMemory); otherwise (sfclab's groups on cgroup v1 live in the cpuacct hierarchy only) the
// resident memory of its processes and its subgroups' summed (ProcsMemory).
func (g *Group) Memory() (uint64, error) {
	if g.v2 {
		v, err := DirMemory(g.dir, true)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return v, err
		}
	}
	pids, err := g.allProcs()
	if err != nil {
		return 0, fmt.Errorf("read memory of cgroup %s: %w", g.name(), err)
	}
	return ProcsMemory(pids)
}

// DirMemory returns the memory a cgroup's processes use as docker stats counts it: on
// cgroup v2 (v2 true) memory.current less the inactive file cache (memory.stat
// inactive_file), on v1 memory.usage_in_bytes less total_inactive_file, both in dir.
func DirMemory(dir string, v2 bool) (uint64, error) {
	usageFile, statKey := "memory.usage_in_bytes", "total_inactive_file"
	if v2 {
		usageFile, statKey = "memory.current", "inactive_file"
	}
	b, err := os.ReadFile(filepath.Join(dir, usageFile))
	if err != nil {
		return 0, fmt.Errorf("read memory of cgroup %s: %w", dir, err)
	}
	usage, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read memory of cgroup %s: %w", dir, err)
	}
	stat, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return 0, fmt.Errorf("read memory of cgroup %s: %w", dir, err)
	}
	inactive := statValue(stat, statKey)
	if inactive > usage {
		return 0, nil
	}
	return usage - inactive, nil
}

func statValue(stat []byte, key string) uint64 {
	sc := bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == key {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// ProcsMemory returns the resident memory (VmRSS of /proc/PID/status) of pids summed: the
// memory of a node whose cgroup has no memory controller (sfclab's groups on cgroup v1 are
// made in the cpuacct hierarchy only). A process that has exited is left out.
func ProcsMemory(pids []int) (uint64, error) {
	var sum uint64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return 0, fmt.Errorf("read memory of pid %d: %w", pid, err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				f := strings.Fields(v)
				if len(f) == 2 && f[1] == "kB" {
					kb, _ := strconv.ParseUint(f[0], 10, 64)
					sum += kb * 1024
				}
			}
		}
	}
	return sum, nil
}
