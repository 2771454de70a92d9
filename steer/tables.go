package steer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/sfclab/sfclab/sfc"
)

// Port flag bits as the data plane reads them.
const (
	portTap    = 1
	portExpect = 2 // packets come back from a function here: flow state is expected
)

// Apply makes the maps hold exactly t: entries are written leaf first (ports, pairs, groups,
// hops, paths) and classifiers last, stale entries removed classifiers first, so a packet
// never finds a classifier pointing at a path that is not there yet. Flow state (expect,
// picks) is kept (LRU maps, bounded), but the decisions cached per flow are invalidated at
// once by bumping the epoch after the tables are written; then the hop counters of paths that
// are gone are removed, so a removed chain leaves no entry and a later chain with its path id
// starts from zero.
func (d *Dataplane) Apply(t *sfc.Tables) error {
	ports := map[uint32]steerPort{}
	byIf := map[steerPortKey]uint32{}
	macs := map[steerMacKey]uint32{}
	ips := map[steerAddr]uint32{}
	for _, p := range t.Ports {
		v := steerPort{Host: p.Host, Ifindex: p.Ifindex}
		copy(v.Mac[:], p.MAC)
		if p.Tap {
			v.Flags = portTap
		}
		ports[p.ID] = v
		if p.Ifindex != 0 {
			byIf[steerPortKey{Host: p.Host, Ifindex: p.Ifindex}] = p.ID
		}
		if len(p.MAC) == 6 {
			var k steerMacKey
			copy(k.Mac[:], p.MAC)
			macs[k] = p.ID
		}
		for _, a := range []netip.Addr{p.IP, p.IP6} {
			if a.IsValid() {
				ips[addrOf(a)] = p.ID
			}
		}
	}
	for k := range t.HopOf {
		if v, ok := ports[k.Port]; ok {
			v.Flags |= portExpect
			ports[k.Port] = v
		}
	}
	pairs := map[uint32]steerPair{}
	for _, p := range t.Pairs {
		pairs[p.ID] = steerPair{Ingress: p.Ingress, Egress: p.Egress}
	}
	groups := map[uint32]steerGroup{}
	slots := map[steerSlotKey]uint32{}
	for _, g := range t.Groups {
		v := steerGroup{Nslots: uint32(len(g.Slots)), LbFields: g.LBFields}
		if g.Tap {
			v.Tap = 1
		}
		groups[g.ID] = v
		for i, pp := range g.Slots {
			slots[steerSlotKey{Group: g.ID, Slot: uint32(i)}] = pp
		}
	}
	paths := map[uint32]steerPath{}
	hops := map[steerPathIdx]uint32{}
	for _, p := range t.Paths {
		paths[p.ID] = steerPath{Nhops: uint32(len(p.Groups)), Flags: p.Flags}
		for i, g := range p.Groups {
			hops[steerPathIdx{Path: p.ID, Idx: uint32(i)}] = g
		}
	}
	hopOf := map[steerPathPort]uint32{}
	for k, v := range t.HopOf {
		hopOf[steerPathPort{Path: k.Path, Port: k.Port}] = v
	}
	rules := map[uint32]steerRules{}
	for key, rs := range t.Rules {
		var v steerRules
		for i, r := range rs {
			if i >= len(v.R) {
				return fmt.Errorf("apply classifiers: %d rules at key %#x: %w", len(rs), key, sfc.ErrTooMany)
			}
			v.R[i] = ruleOf(r)
		}
		rules[key] = v
	}

	if err := prune(d.maps.Classifiers, rules); err != nil {
		return err
	}
	steps := []func() error{
		func() error { return sync(d.maps.Ports, ports) },
		func() error { return sync(d.maps.PortByIf, byIf) },
		func() error { return sync(d.maps.Macs, macs) },
		func() error { return sync(d.maps.Ips, ips) },
		func() error { return sync(d.maps.Pairs, pairs) },
		func() error { return sync(d.maps.Slots, slots) },
		func() error { return sync(d.maps.Groups, groups) },
		func() error { return sync(d.maps.Hops, hops) },
		func() error { return sync(d.maps.HopOf, hopOf) },
		func() error { return sync(d.maps.Paths, paths) },
		func() error { return sync(d.maps.Classifiers, rules) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	// Every per-flow decision cached under the old tables is stale from here on (before the
	// counters are pruned, so no cached decision counts into a removed path's counter again).
	if err := d.bumpEpoch(); err != nil {
		return err
	}
	return d.pruneCounters(paths)
}

// bumpEpoch advances the tables' epoch (never to 0, which marks "nothing cached"): the data
// plane caches each flow's decision per port stamped with the epoch, and walks the tables
// again once the epoch moved. Apply calls it after writing the tables; the data plane bumps it
// too (atomically) when it finds flow state evicted. A decision is stamped with the epoch read
// before its walk, and Apply reads the epoch after writing the tables and writes one above
// what it read, so no decision made with the older tables survives it. Two processes applying at once are not supported (each Apply rewrites
// every table anyway).
// Equivalent to: bpftool map update pinned /sys/fs/bpf/sfclab/LAB/epoch key 0 value N+1
func (d *Dataplane) bumpEpoch() error {
	var e uint32
	if err := d.maps.Epoch.Lookup(uint32(0), &e); err != nil {
		return fmt.Errorf("read steering epoch: %w", err)
	}
	e++
	if e == 0 {
		e = 1
	}
	if err := d.maps.Epoch.Put(uint32(0), e); err != nil {
		return fmt.Errorf("bump steering epoch: %w", err)
	}
	return nil
}

// pruneCounters deletes the hop counters of paths not in keep.
func (d *Dataplane) pruneCounters(keep map[uint32]steerPath) error {
	var k steerPathIdx
	var per []steerCounter
	var stale []steerPathIdx
	it := d.maps.Stats.Iterate()
	for it.Next(&k, &per) {
		if _, ok := keep[k.Path]; !ok {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("list hop counters: %w", err)
	}
	for _, k := range stale {
		if err := d.maps.Stats.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("delete hop counter: %w", err)
		}
	}
	return nil
}

// Epoch returns the tables' epoch: how many times Apply changed them (0: never applied).
func (d *Dataplane) Epoch() (uint32, error) {
	var e uint32
	if err := d.maps.Epoch.Lookup(uint32(0), &e); err != nil {
		return 0, fmt.Errorf("read steering epoch: %w", err)
	}
	return e, nil
}

// MapEntries counts the entries of every map of the lab's data plane, by map name: tests and
// benchmarks check that chains removed leave nothing behind.
// Equivalent to: bpftool map dump pinned /sys/fs/bpf/sfclab/LAB/MAP | grep -c key
func (d *Dataplane) MapEntries() (map[string]int, error) {
	out := map[string]int{}
	for name, m := range map[string]*ebpf.Map{
		"ports": d.maps.Ports, "port_by_if": d.maps.PortByIf, "macs": d.maps.Macs, "ips": d.maps.Ips,
		"pairs": d.maps.Pairs, "slots": d.maps.Slots, "groups": d.maps.Groups, "hops": d.maps.Hops,
		"hop_of": d.maps.HopOf, "paths": d.maps.Paths, "classifiers": d.maps.Classifiers, "stats": d.maps.Stats,
		"expect": d.maps.Expect, "expect6": d.maps.Expect6, "picks": d.maps.Picks, "tunnels": d.maps.Tunnels, "epoch": d.maps.Epoch,
	} {
		n := 0
		it := m.Iterate()
		var k, v []byte
		if m.Type() == ebpf.PerCPUHash || m.Type() == ebpf.PerCPUArray || m.Type() == ebpf.LRUCPUHash {
			var per [][]byte
			for it.Next(&k, &per) {
				n++
			}
		} else {
			for it.Next(&k, &v) {
				n++
			}
		}
		if err := it.Err(); err != nil {
			return nil, fmt.Errorf("count entries of map %s: %w", name, err)
		}
		out[name] = n
	}
	return out, nil
}

// SetTunnel records a host's underlay address and the ifindex of its steering VXLAN device.
func (d *Dataplane) SetTunnel(host uint32, underlay netip.Addr, vxlanIfindex uint32) error {
	v := steerTunnel{Underlay: binary.BigEndian.Uint32(underlay.AsSlice()), Vxlan: vxlanIfindex}
	if err := d.maps.Tunnels.Put(host, v); err != nil {
		return fmt.Errorf("set tunnel of host %d: %w", host, err)
	}
	return nil
}

func ruleOf(r sfc.Rule) steerRule {
	v := steerRule{Path: r.Path, Proto: r.Proto, SportMin: r.SportMin, SportMax: r.SportMax,
		DportMin: r.DportMin, DportMax: r.DportMax}
	if r.IPv6 {
		v.V6 = 1
	}
	if r.Src.IsValid() {
		v.Src, v.SrcMask = prefixOf(r.Src)
	}
	if r.Dst.IsValid() {
		v.Dst, v.DstMask = prefixOf(r.Dst)
	}
	return v
}

// addrOf returns an address as the data plane keys it: 16 bytes in network order, IPv4
// mapped (::ffff:a.b.c.d), read as native 32-bit words.
func addrOf(a netip.Addr) steerAddr {
	b := a.As16()
	var v steerAddr
	for i := range v.W {
		v.W[i] = binary.NativeEndian.Uint32(b[4*i:])
	}
	return v
}

// prefixOf returns a prefix's address and mask as the data plane matches them. An IPv4
// prefix /n masks n bits of the mapped address's last word; the mapped ::ffff: part is not
// compared (the rule's family is).
func prefixOf(p netip.Prefix) (addr, mask steerAddr) {
	a := p.Masked().Addr()
	bits := p.Bits()
	if a.Is4() {
		bits += 96
	}
	var m [16]byte
	for i := range m {
		m[i] = byte(uint(0xff00) >> min(max(bits-8*i, 0), 8))
	}
	if a.Is4() {
		clear(m[:12])
	}
	addr = addrOf(a)
	for i := range mask.W {
		mask.W[i] = binary.NativeEndian.Uint32(m[4*i:])
		addr.W[i] &= mask.W[i]
	}
	return addr, mask
}

// sync makes m hold exactly want.
func sync[K comparable, V any](m *ebpf.Map, want map[K]V) error {
	if err := prune(m, want); err != nil {
		return err
	}
	for k, v := range want {
		if err := m.Put(k, v); err != nil {
			return fmt.Errorf("update map %s: %w", m.String(), err)
		}
	}
	return nil
}

// prune deletes the keys of m that want lacks.
func prune[K comparable, V any](m *ebpf.Map, want map[K]V) error {
	var k K
	var stale []K
	it := m.Iterate()
	var raw []byte
	for it.Next(&k, &raw) {
		if _, ok := want[k]; !ok {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("list map %s: %w", m.String(), err)
	}
	for _, k := range stale {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("delete from map %s: %w", m.String(), err)
		}
	}
	return nil
}
