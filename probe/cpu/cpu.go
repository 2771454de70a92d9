// Package cpu samples CPU use while another probe runs: user and system time of each node
// (from its cgroup, so it counts the node's processes, not the kernel work its packets cause
// elsewhere) and the host's softirq time (where kernel forwarding, NAT and veth traffic are
// accounted), each as an average number of cores over the sampled interval.
package cpu

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/results"
)

// Name is the probe's name in samples.
const Name = "cpu"

// UserHZ is the unit of /proc/stat times: clock ticks per second (USER_HZ, whatever CONFIG_HZ
// is), as the system says it (cgroup.ClockTicks; `getconf CLK_TCK` prints it).
func UserHZ() float64 { return float64(cgroup.ClockTicks()) }

// ProcStat is the file the host's softirq time is read from.
const ProcStat = "/proc/stat"

// Sampler measures CPU use between Start and Stop, or, when it tracks (Track), over any
// window inside that span (StopWithin).
type Sampler struct {
	names []string
	nodes []probe.Node
	// first is the snapshot Start took; snaps are the later ones, in time order (Track's
	// and Stop's).
	first snapshot
	snaps []snapshot
	// self, when set, is the node name sfclab's own process is reported as (CountSelf).
	self string
	// hosts are reported per emulated host (AddHosts); every snapshot then reads the cores.
	hosts []Host

	mu       sync.Mutex
	stopTick chan struct{}
	ticking  sync.WaitGroup
}

// snapshot is every counter the sampler reads, read at one time.
type snapshot struct {
	t       time.Time
	usage   []cgroup.Usage
	errs    []error // per node: why usage could not be read
	softirq uint64
	sirqErr error
	self    syscall.Rusage
	selfErr error
	// cores are every CPU's times, read when the sampler reports emulated hosts.
	cores    map[int]CoreTimes
	coresErr error
	// mem is every node's memory (memory.go).
	mem []memReading
}

// AddHosts also reports every emulated host from now on, as mpstat would over its cores
// (host_usr, host_sys, host_soft in %, label host and cores) and its nodes' cgroups summed
// (host_nodes_user, host_nodes_system in cores); node samples get the label host too. Call it
// before Track.
func (s *Sampler) AddHosts(hosts []Host) error {
	c, err := readCores()
	if err != nil {
		return fmt.Errorf("sample emulated hosts: %w", err)
	}
	s.hosts, s.first.cores = hosts, c
	return nil
}

// TrackInterval is how often a tracking sampler reads its counters: a window is bounded to
// within this much at each end.
const TrackInterval = 100 * time.Millisecond

// CountSelf also samples sfclab's own process (getrusage RUSAGE_SELF: every thread of it)
// from now on, reported by Stop as the node named name. sfclab's HTTP load generator runs in
// sfclab's process, outside every node's cgroup, so without this its CPU is in no figure.
// The rest of sfclab's process is idle while a probe runs, so the figure is the generator's.
func (s *Sampler) CountSelf(name string) error {
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &s.first.self); err != nil {
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
	s.first = s.read(false)
	for _, err := range s.first.errs {
		if err != nil {
			return nil, fmt.Errorf("start cpu sampler: %w", err)
		}
	}
	if s.first.sirqErr != nil {
		return nil, fmt.Errorf("start cpu sampler: %w", s.first.sirqErr)
	}
	return s, nil
}

// read takes a snapshot of every counter; the time is taken after the reads.
func (s *Sampler) read(self bool) snapshot {
	sn := snapshot{usage: make([]cgroup.Usage, len(s.nodes)), errs: make([]error, len(s.nodes))}
	for i, n := range s.nodes {
		sn.usage[i], sn.errs[i] = n.CPU()
	}
	sn.softirq, sn.sirqErr = Softirq()
	sn.mem = s.readMemory()
	if self {
		sn.selfErr = syscall.Getrusage(syscall.RUSAGE_SELF, &sn.self)
	}
	if len(s.hosts) > 0 {
		sn.cores, sn.coresErr = readCores()
	}
	sn.t = time.Now()
	return sn
}

// Track reads every counter every interval (TrackInterval when 0) in the background, until
// Stop or StopWithin, so that StopWithin can bound the figures to a window known only
// afterwards (an iperf3 test's transfer, which its -J report dates once it has ended).
func (s *Sampler) Track(interval time.Duration) {
	if interval <= 0 {
		interval = TrackInterval
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopTick != nil {
		return
	}
	s.stopTick = make(chan struct{})
	stop := s.stopTick
	s.ticking.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			sn := s.read(s.self != "")
			s.mu.Lock()
			s.snaps = append(s.snaps, sn)
			s.mu.Unlock()
		}
	})
}

// finish stops tracking and takes the last snapshot.
func (s *Sampler) finish() {
	s.mu.Lock()
	stop := s.stopTick
	s.mu.Unlock()
	if stop != nil {
		close(stop)
		s.ticking.Wait()
	}
	s.snaps = append(s.snaps, s.read(s.self != ""))
}

// WindowMetric is the sample Stop and StopWithin add to say which span their figures cover:
// its value is the span's length (s), its label bound is "whole" (Start to Stop), "inside"
// (the snapshots inside StopWithin's window) or "around" (the nearest snapshots around it).
const WindowMetric = "window"

// Stop reads the counters again and returns, per node, "cpu_user" and "cpu_system" (label
// node=NAME) and the host's "softirq" (label node=host), all in cores: CPU seconds used
// divided by the wall seconds since Start, and the span's WindowMetric. A node whose
// counters cannot be read is left out and its error returned beside the other samples.
func (s *Sampler) Stop() ([]results.Sample, error) {
	s.finish()
	return s.between(s.first, s.snaps[len(s.snaps)-1], "whole")
}

// StopWithin stops the sampler and returns Stop's samples over the part of w its snapshots
// cover: from the first snapshot at or after w.From to the last one at or before w.To, so
// that every CPU second counted was used inside w (a rate over a steady transfer loses
// nothing by leaving out up to one tracking interval at each end). When fewer than two
// snapshots lie inside w (w shorter than two tracking intervals, or a sampler that did not
// Track), the nearest snapshots around w are used instead. The samples are dated the end of
// the span used.
func (s *Sampler) StopWithin(w probe.Window) ([]results.Sample, error) {
	s.finish()
	a, b, inside := s.within(w)
	return s.between(a, b, map[bool]string{true: "inside", false: "around"}[inside])
}

// within picks the snapshots that bound w as described at StopWithin.
func (s *Sampler) within(w probe.Window) (a, b snapshot, inside bool) {
	all := append([]snapshot{s.first}, s.snaps...)
	// Inside: first at or after From, last at or before To.
	i := sort.Search(len(all), func(k int) bool { return !all[k].t.Before(w.From) })
	j := sort.Search(len(all), func(k int) bool { return all[k].t.After(w.To) }) - 1
	if i < len(all) && j >= 0 && i < j {
		return all[i], all[j], true
	}
	// Around: last at or before From, first at or after To (clamped to what there is).
	i = max(0, sort.Search(len(all), func(k int) bool { return all[k].t.After(w.From) })-1)
	j = min(len(all)-1, sort.Search(len(all), func(k int) bool { return !all[k].t.Before(w.To) }))
	if i >= j {
		i, j = 0, len(all)-1
	}
	return all[i], all[j], false
}

// between returns the samples over the span from snapshot a to snapshot b, dated b's time,
// the span's WindowMetric labelled bound.
func (s *Sampler) between(a, b snapshot, bound string) ([]results.Sample, error) {
	now := b.t
	wall := b.t.Sub(a.t).Seconds()
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
	for i := range s.nodes {
		if err := cmp.Or(a.errs[i], b.errs[i]); err != nil {
			errs = append(errs, fmt.Errorf("stop cpu sampler: %w", err))
			continue
		}
		user := (b.usage[i].User - a.usage[i].User).Seconds() / wall
		sys := (b.usage[i].System - a.usage[i].System).Seconds() / wall
		add("cpu_user", s.names[i], user)
		add("cpu_system", s.names[i], sys)
		if h := hostOf[s.names[i]]; h != "" {
			out[len(out)-1].Labels["host"], out[len(out)-2].Labels["host"] = h, h
			nodesUser[h] += user
			nodesSys[h] += sys
		}
	}
	if len(s.hosts) > 0 {
		err := cmp.Or(a.coresErr, b.coresErr)
		if err == nil && (a.cores == nil || b.cores == nil) {
			err = errors.New("per-core times were not read at both ends of the span")
		}
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
				usr, sys, soft := HostPercent(a.cores, b.cores, h.Cores)
				lab("host_usr", "%", usr)
				lab("host_sys", "%", sys)
				lab("host_soft", "%", soft)
			}
		}
	}
	if s.self != "" {
		if err := cmp.Or(a.selfErr, b.selfErr); err != nil {
			errs = append(errs, fmt.Errorf("stop cpu sampler: sfclab's own CPU: %w", err))
		} else {
			add("cpu_user", s.self, time.Duration(b.self.Utime.Nano()-a.self.Utime.Nano()).Seconds()/wall)
			add("cpu_system", s.self, time.Duration(b.self.Stime.Nano()-a.self.Stime.Nano()).Seconds()/wall)
		}
	}
	if err := cmp.Or(a.sirqErr, b.sirqErr); err != nil {
		errs = append(errs, fmt.Errorf("stop cpu sampler: %w", err))
	} else {
		add("softirq", "host", float64(b.softirq-a.softirq)/UserHZ()/wall)
	}
	out = append(out, results.Sample{Probe: Name, Metric: WindowMetric, Unit: "s", Value: b.t.Sub(a.t).Seconds(), Time: now,
		Labels: map[string]string{"bound": bound}})
	out = append(out, s.memorySamples(a, b, hostOf)...)
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
