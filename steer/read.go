package steer

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sort"
)

// HopCounter is the traffic steered into one hop of a path; Hop == the path's length counts
// what left the path to its destination (or the next chain of a service graph).
type HopCounter struct {
	Path    uint32 `json:"path"`
	Hop     uint32 `json:"hop"`
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// Counters reads the per-hop counters, summed over CPUs, sorted by path and hop.
// Equivalent to: bpftool map dump pinned /sys/fs/bpf/sfclab/LAB/stats
func (d *Dataplane) Counters() ([]HopCounter, error) {
	var out []HopCounter
	var k steerPathIdx
	var per []steerCounter
	it := d.maps.Stats.Iterate()
	for it.Next(&k, &per) {
		c := HopCounter{Path: k.Path, Hop: k.Idx}
		for _, v := range per {
			c.Packets += v.Packets
			c.Bytes += v.Bytes
		}
		out = append(out, c)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read hop counters: %w", err)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Hop < out[j].Hop
	})
	return out, nil
}

// Flow is a 5-tuple as the data plane sees it (ICMP and ICMPv6 have ports 0).
type Flow struct {
	Src   netip.Addr `json:"src"`
	Dst   netip.Addr `json:"dst"`
	Sport uint16     `json:"sport"`
	Dport uint16     `json:"dport"`
	Proto uint8      `json:"proto"`
}

func (f Flow) String() string {
	return fmt.Sprintf("%s:%d -> %s:%d proto %d", f.Src, f.Sport, f.Dst, f.Dport, f.Proto)
}

// Pick is the instance (port pair id) a group chose for a flow.
type Pick struct {
	Group uint32 `json:"group"`
	Flow  Flow   `json:"flow"`
	Pair  uint32 `json:"pair"`
}

// Picks reads the instance each group picked for the flows it saw last (an LRU map: the
// most recent few thousand flows), sorted by group and flow.
func (d *Dataplane) Picks() ([]Pick, error) {
	var out []Pick
	var k steerPickKey
	var pp uint32
	it := d.maps.Picks.Iterate()
	for it.Next(&k, &pp) {
		out = append(out, Pick{Group: k.Group, Flow: flowOf(k.T), Pair: pp})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read group picks: %w", err)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Group != out[j].Group {
			return out[i].Group < out[j].Group
		}
		return out[i].Flow.String() < out[j].Flow.String()
	})
	return out, nil
}

func flowOf(t steerFlowkey) Flow {
	return Flow{Src: addrFrom(t.Src), Dst: addrFrom(t.Dst), Sport: t.Sport, Dport: t.Dport, Proto: t.Proto}
}

// addrFrom is addrOf's inverse: an IPv4-mapped address comes back as IPv4.
func addrFrom(a steerAddr) netip.Addr {
	var b [16]byte
	for i, w := range a.W {
		binary.NativeEndian.PutUint32(b[4*i:], w)
	}
	return netip.AddrFrom16(b).Unmap()
}
