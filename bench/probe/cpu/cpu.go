// Package cpu samples CPU use while another probe runs: user and system time of each node
// (from its cgroup, so it counts the node's processes, not the kernel work its packets cause
// elsewhere) and the host's softirq time (where kernel forwarding, NAT and veth traffic are
// accounted), each as an average number of cores over the sampled interval.
package cpu

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/sfclab/sfclab/bench/probe"
	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/results"
)

// Name is the probe's name in samples.
const Name = "cpu"

// UserHZ is the unit of /proc/stat times: clock ticks per second (USER_HZ, 100 on Linux,
// whatever CONFIG_HZ is; `getconf CLK_TCK` prints it).
const UserHZ = 100

// ProcStat is the file the host's softirq time is read from.
const ProcStat = "/proc/stat"

// Sampler measures CPU use between Start and Stop.
type Sampler struct {
	names   []string
	nodes   []probe.Node
	start   time.Time
	usage   []cgroup.Usage
	softirq uint64
	// self, when set, is the node name sfclab's own process is reported as (CountSelf).
	self      string
	selfStart syscall.Rusage
	// hosts are reported per emulated host (AddHosts); cores are their times at the start.
	hosts []Host
	cores map[int]CoreTimes
}

// AddHosts also reports every emulated host from now on, as mpstat would over its cores
// (host_usr, host_sys, host_soft in %, label host and cores) and its nodes' cgroups summed
// (host_nodes_user, host_nodes_system in cores); node samples get the label host too.
func (s *Sampler) AddHosts(hosts []Host) error {
	c, err := readCores()
	if err != nil {
		return fmt.Errorf("sample emulated hosts: %w", err)
	}
	s.hosts, s.cores = hosts, c
	return nil
}

// CountSelf also samples sfclab's own process (getrusage RUSAGE_SELF: every thread of it)
// from now on, reported by Stop as the node named name. sfclab's HTTP load generator runs in
// sfclab's process, outside every node's cgroup, so without this its CPU is in no figure.
// The rest of sfclab's process is idle while a probe runs, so the figure is the generator's.
func (s *Sampler) CountSelf(name string) error {
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &s.selfStart); err != nil {
		return fmt.Errorf("sample sfclab's own CPU: %w", err)
	}
	s.self = name
	return nil
}

// Start resolves the nodes and reads their CPU counters and the host's softirq time.
func Start(env probe.Env, nodes []string) (*Sampler, error) {
	s := &Sampler{names: append([]string(nil), nodes...)}
	for _, name := range nodes {
		n, err := env.Node(name)
		if err != nil {
			return nil, fmt.Errorf("start cpu sampler: %w", err)
		}
		s.nodes = append(s.nodes, n)
	}
	s.usage = make([]cgroup.Usage, len(s.nodes))
	for i, n := range s.nodes {
		u, err := n.CPU()
		if err != nil {
			return nil, fmt.Errorf("start cpu sampler: %w", err)
		}
		s.usage[i] = u
	}
	si, err := Softirq()
	if err != nil {
		return nil, fmt.Errorf("start cpu sampler: %w", err)
	}
	s.softirq = si
	s.start = time.Now()
	return s, nil
}

// Stop reads the counters again and returns, per node, "cpu_user" and "cpu_system" (label
// node=NAME) and the host's "softirq" (label node=host), all in cores: CPU seconds used
// divided by the wall seconds since Start. A node whose counters cannot be read is left out
// and its error returned beside the other samples.
func (s *Sampler) Stop() ([]results.Sample, error) {
	now := time.Now()
	wall := now.Sub(s.start).Seconds()
	if wall <= 0 {
		wall = 1e-9
	}
	var out []results.Sample
	var errs []error
	add := func(metric, node string, v float64) {
		out = append(out, results.Sample{Probe: Name, Metric: metric, Unit: "cores", Value: v, Time: now,
			Labels: map[string]string{"node": node}})
	}
	hostOf := map[string]string{}
	for _, h := range s.hosts {
		for _, n := range h.Nodes {
			hostOf[n] = h.Name
		}
	}
	nodesUser, nodesSys := map[string]float64{}, map[string]float64{}
	for i, n := range s.nodes {
		u, err := n.CPU()
		if err != nil {
			errs = append(errs, fmt.Errorf("stop cpu sampler: %w", err))
			continue
		}
		user, sys := (u.User-s.usage[i].User).Seconds()/wall, (u.System-s.usage[i].System).Seconds()/wall
		add("cpu_user", s.names[i], user)
		add("cpu_system", s.names[i], sys)
		if h := hostOf[s.names[i]]; h != "" {
			out[len(out)-1].Labels["host"], out[len(out)-2].Labels["host"] = h, h
			nodesUser[h] += user
			nodesSys[h] += sys
		}
	}
	if len(s.hosts) > 0 {
		after, err := readCores()
		if err != nil {
			errs = append(errs, fmt.Errorf("stop cpu sampler: %w", err))
		}
		for _, h := range s.hosts {
			lab := func(m, unit string, v float64) {
				cores := cgroup.FormatCPUs(h.Cores)
				if h.Shared {
					cores += " (shared)"
				}
				out = append(out, results.Sample{Probe: Name, Metric: m, Unit: unit, Value: v, Time: now,
					Labels: map[string]string{"host": h.Name, "cores": cores}})
			}
			lab("host_nodes_user", "cores", nodesUser[h.Name])
			lab("host_nodes_system", "cores", nodesSys[h.Name])
			if err == nil {
				usr, sys, soft := HostPercent(s.cores, after, h.Cores)
				lab("host_usr", "%", usr)
				lab("host_sys", "%", sys)
				lab("host_soft", "%", soft)
			}
		}
	}
	if s.self != "" {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			errs = append(errs, fmt.Errorf("stop cpu sampler: sfclab's own CPU: %w", err))
		} else {
			add("cpu_user", s.self, time.Duration(ru.Utime.Nano()-s.selfStart.Utime.Nano()).Seconds()/wall)
			add("cpu_system", s.self, time.Duration(ru.Stime.Nano()-s.selfStart.Stime.Nano()).Seconds()/wall)
		}
	}
	if si, err := Softirq(); err != nil {
		errs = append(errs, fmt.Errorf("stop cpu sampler: %w", err))
	} else {
		add("softirq", "host", float64(si-s.softirq)/UserHZ/wall)
	}
	return out, errors.Join(errs...)
}

// Softirq returns the host's softirq time summed over all CPUs, in USER_HZ ticks: the
// seventh field of the "cpu" line of /proc/stat.
func Softirq() (uint64, error) {
	b, err := os.ReadFile(ProcStat)
	if err != nil {
		return 0, fmt.Errorf("read softirq time: %w", err)
	}
	return ParseSoftirq(b)
}

// ParseSoftirq reads the softirq ticks from /proc/stat content.
func ParseSoftirq(stat []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 0 || string(f[0]) != "cpu" {
			continue
		}
		// cpu user nice system idle iowait irq softirq ...
		if len(f) < 8 {
			return 0, fmt.Errorf("parse /proc/stat: cpu line has %d fields, want at least 8", len(f))
		}
		v, err := strconv.ParseUint(string(f[7]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse /proc/stat softirq: %w", err)
		}
		return v, nil
	}
	return 0, fmt.Errorf("parse /proc/stat: no cpu line")
}
