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
	for i, n := range s.nodes {
		u, err := n.CPU()
		if err != nil {
			errs = append(errs, fmt.Errorf("stop cpu sampler: %w", err))
			continue
		}
		add("cpu_user", s.names[i], (u.User-s.usage[i].User).Seconds()/wall)
		add("cpu_system", s.names[i], (u.System-s.usage[i].System).Seconds()/wall)
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
