package cpu

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Host is an emulated host to report as mpstat would: its cores, and the nodes on it.
type Host struct {
	Name string
	// Cores are the host's cores (its cpuset; every online core when it has none).
	Cores []int
	// Shared says the host has no cores of its own (it shares every core with the others).
	Shared bool
	// Nodes are the names of the nodes placed on it.
	Nodes []string
}

// CoreTimes are one core's /proc/stat times in USER_HZ ticks.
type CoreTimes struct {
	User, System, Softirq, Total uint64
}

// ParseCores reads every "cpuN" line of /proc/stat content: user (with nice), system,
// softirq, and the total of user, nice, system, idle, iowait, irq, softirq and steal
// (guest time is already in user).
func ParseCores(stat []byte) (map[int]CoreTimes, error) {
	out := map[int]CoreTimes{}
	sc := bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		n, err := strconv.Atoi(f[0][3:])
		if err != nil {
			continue
		}
		if len(f) < 9 {
			return nil, fmt.Errorf("parse /proc/stat: %s has %d fields, want at least 9", f[0], len(f))
		}
		var v [8]uint64
		for i := range v {
			if v[i], err = strconv.ParseUint(f[i+1], 10, 64); err != nil {
				return nil, fmt.Errorf("parse /proc/stat %s: %w", f[0], err)
			}
		}
		ct := CoreTimes{User: v[0] + v[1], System: v[2], Softirq: v[6]}
		for _, x := range v {
			ct.Total += x
		}
		out[n] = ct
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("parse /proc/stat: no cpuN line")
	}
	return out, nil
}

func readCores() (map[int]CoreTimes, error) {
	b, err := os.ReadFile(ProcStat)
	if err != nil {
		return nil, fmt.Errorf("read per-core times: %w", err)
	}
	return ParseCores(b)
}

// HostPercent is what mpstat prints for a set of cores ("all" over them): the shares of
// their time spent in user, system and softirq, in %.
func HostPercent(before, after map[int]CoreTimes, cores []int) (usr, sys, soft float64) {
	var d CoreTimes
	for _, c := range cores {
		a, b := after[c], before[c]
		d.User += a.User - b.User
		d.System += a.System - b.System
		d.Softirq += a.Softirq - b.Softirq
		d.Total += a.Total - b.Total
	}
	if d.Total == 0 {
		return 0, 0, 0
	}
	t := float64(d.Total)
	return 100 * float64(d.User) / t, 100 * float64(d.System) / t, 100 * float64(d.Softirq) / t
}
