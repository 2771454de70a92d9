package steer

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	gosync "sync"

	"github.com/cilium/ebpf"
	"github.com/sfclab/sfclab/netdev"
)

// FwOffloadFilterName names the offload's tc filter where the kernel has no tcx.
const FwOffloadFilterName = "sfclab-fwoffload"

// CTTimeouts are the established timeouts (seconds) an offloaded packet keeps a conntrack
// entry at: what conntrack itself would set per packet.
type CTTimeouts struct {
	TCP, UDP uint32
}

// Conntrack's defaults (nf_conntrack_tcp_timeout_established, nf_conntrack_udp_timeout_stream).
var defaultCTTimeouts = CTTimeouts{TCP: 432000, UDP: 120}

// AttachFwOffload puts the firewall flow offload (bpf/fwoffload.c) at tc ingress of b.In in
// ns, a transparent firewall's namespace: packets of flows conntrack holds as established both
// ways (ASSURED, no NAT) leave by b.Out as the bump hands them on, skipping the IP stack,
// conntrack and the ruleset; everything else (new flows, SYN, FIN, RST, ICMP, IPv6, ARP,
// packets for the firewall) goes up the stack. The entry's timeout is put back to the
// namespace's established timeout once less than half of it is left. The program lives as
// long as its attachment.
// Equivalent to: ip netns exec NS bpftool net attach tcx_ingress pinned FWOFFLOAD dev IN
func AttachFwOffload(ns *netdev.NS, b Bump) error {
	t := defaultCTTimeouts
	for _, x := range []struct {
		key string
		v   *uint32
	}{{"net.netfilter.nf_conntrack_tcp_timeout_established", &t.TCP}, {"net.netfilter.nf_conntrack_udp_timeout_stream", &t.UDP}} {
		if s, err := ns.GetSysctl(x.key); err == nil {
			if n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32); err == nil && n > 0 {
				*x.v = uint32(n)
			}
		}
	}
	return attachWay(ns, b, "fwoffload", FwOffloadFilterName, func(b Bump, out int, outMAC net.HardwareAddr) (*ebpf.Program, error) {
		return loadFwOffloadProgram(b, out, outMAC, t, kernelHZ())
	})
}

// loadFwOffloadProgram loads an offload program for way b whose egress port has ifindex out
// and MAC outMAC, keeping entries at timeouts t on a kernel ticking hz jiffies a second.
func loadFwOffloadProgram(b Bump, out int, outMAC net.HardwareAddr, t CTTimeouts, hz uint32) (*ebpf.Program, error) {
	spec, err := loadFwoffload()
	if err != nil {
		return nil, fmt.Errorf("load spec: %w", err)
	}
	if err := setWire(spec, b, out, outMAC); err != nil {
		return nil, err
	}
	ms := func(s uint32) uint32 { return uint32(min(uint64(s)*1000, 1<<31)) }
	// Half the timeout in jiffies, capped below 2^31 (the program compares signed 32 bits).
	half := func(s uint32) uint32 { return uint32(min(uint64(s)*uint64(hz)/2, 1<<30)) }
	for name, v := range map[string]uint32{"tcp_timeout_ms": ms(t.TCP), "udp_timeout_ms": ms(t.UDP),
		"tcp_refresh_below": half(t.TCP), "udp_refresh_below": half(t.UDP)} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("set %s: %w", name, err)
		}
	}
	var objs fwoffloadObjects
	if err := loadAndAssign(spec, &objs); err != nil {
		return nil, err
	}
	objs.OffloadStats.Close() // the program holds its map
	return objs.Fwoffload, nil
}

var hzOnce struct {
	gosync.Once
	hz uint32
}

// kernelHZ is the kernel's CONFIG_HZ from /proc/config.gz, or 100 where it cannot be read: the
// smallest HZ, so that a refresh threshold in jiffies is never more than half the timeout
// (a kernel ticking faster refreshes later, still before expiry).
func kernelHZ() uint32 {
	hzOnce.Do(func() {
		hzOnce.hz = 100
		f, err := os.Open("/proc/config.gz")
		if err != nil {
			return
		}
		defer f.Close()
		z, err := gzip.NewReader(f)
		if err != nil {
			return
		}
		sc := bufio.NewScanner(z)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "CONFIG_HZ="); ok {
				if n, err := strconv.ParseUint(v, 10, 32); err == nil && n > 0 {
					hzOnce.hz = uint32(n)
				}
				return
			}
		}
	})
	return hzOnce.hz
}

// FwOffloadStats are an offload program's counters, summed over CPUs and over the programs
// on the ports asked about.
type FwOffloadStats struct {
	Offloaded, Refreshed uint64
}

// FwOffloadCounters reads the counters of the offload programs at tc ingress of ifnames in ns,
// and how many ports carry one.
// Equivalent to: ip netns exec NS bpftool map dump name offload_stats
func FwOffloadCounters(ns *netdev.NS, ifnames ...string) (FwOffloadStats, int, error) {
	var st FwOffloadStats
	n := 0
	for _, ifname := range ifnames {
		ids, err := attachedIDs(ns, ifname, "fwoffload", FwOffloadFilterName)
		if err != nil {
			return st, n, err
		}
		for _, id := range ids {
			n++
			if err := addOffloadStats(id, &st); err != nil {
				return st, n, fmt.Errorf("read offload counters of %s in %s: %w", ifname, ns.Name(), err)
			}
		}
	}
	return st, n, nil
}

// addOffloadStats adds the counters of offload program id to st.
func addOffloadStats(id ebpf.ProgramID, st *FwOffloadStats) error {
	p, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return err
	}
	defer p.Close()
	info, err := p.Info()
	if err != nil {
		return err
	}
	mids, _ := info.MapIDs()
	for _, mid := range mids {
		m, err := ebpf.NewMapFromID(mid)
		if err != nil {
			return err
		}
		mi, err := m.Info()
		if err != nil || mi.Name != "offload_stats" {
			m.Close()
			continue
		}
		for k, dst := range []*uint64{&st.Offloaded, &st.Refreshed} {
			var vs []uint64
			if err := m.Lookup(uint32(k), &vs); err != nil {
				m.Close()
				return err
			}
			for _, v := range vs {
				*dst += v
			}
		}
		m.Close()
	}
	return nil
}
