// Package apiplane is the api.DataPlane of transparent labs: port chains created over the
// networking-sfc REST API are added to the lab file's own resources, the whole model is
// validated with networking-sfc's rules (package sfc), compiled with the ports' bindings and
// written to the lab's pinned BPF maps. A chain change is a map update; nothing is
// redeployed. A chain's correlation (mpls, nsh) is not needed and ignored: the eBPF data
// plane carries the path id and index itself.
package apiplane

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/sfclab/sfclab/api"
	"github.com/sfclab/sfclab/hosts"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/sfc"
	"github.com/sfclab/sfclab/steer"
)

// ErrNotTransparent says a lab does not use transparent steering.
var ErrNotTransparent = errors.New("lab does not use steering: transparent")

// Plane implements api.DataPlane for transparent labs deployed under Journal.
type Plane struct {
	Journal journal.Journal

	mu     sync.Mutex
	chains map[string]map[string]*api.Chain // lab -> chain id -> chain
}

var _ api.DataPlane = (*Plane)(nil)

// ApplyChain installs or replaces a chain and rewrites the lab's tables.
func (p *Plane) ApplyChain(ctx context.Context, c *api.Chain) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.chains == nil {
		p.chains = map[string]map[string]*api.Chain{}
	}
	old := p.chains[c.Lab][c.ID]
	if p.chains[c.Lab] == nil {
		p.chains[c.Lab] = map[string]*api.Chain{}
	}
	cp := *c
	p.chains[c.Lab][c.ID] = &cp
	if err := p.sync(c.Lab); err != nil {
		if old != nil {
			p.chains[c.Lab][c.ID] = old
		} else {
			delete(p.chains[c.Lab], c.ID)
		}
		return fmt.Errorf("apply port chain %s to lab %s: %w", c.Name, c.Lab, err)
	}
	return nil
}

// RemoveChain stops steering a chain; an unknown chain is no error.
func (p *Plane) RemoveChain(ctx context.Context, lab, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.chains[lab][id]; !ok {
		return nil
	}
	old := p.chains[lab][id]
	delete(p.chains[lab], id)
	if err := p.sync(lab); err != nil {
		p.chains[lab][id] = old
		return fmt.Errorf("remove port chain %s from lab %s: %w", id, lab, err)
	}
	return nil
}

// sync rebuilds the lab's model (its file's resources plus the API's chains), compiles it
// with the live bindings and writes the maps.
func (p *Plane) sync(lab string) error {
	pl, err := p.Journal.ReadPlan(lab)
	if err != nil {
		return err
	}
	t := pl.Transparent
	if t == nil {
		return ErrNotTransparent
	}
	m := Model(t.Model, p.chains[lab])
	bind, err := Bindings(t)
	if err != nil {
		return err
	}
	tab, err := sfc.Compile(m, bind)
	if err != nil {
		return err
	}
	dp, err := steer.Open(lab)
	if err != nil {
		return err
	}
	defer dp.Close()
	return dp.Apply(tab)
}

// Model returns base with the API's chains added (resources named "api-ID"; ports named
// NODE.IFACE as in lab files), chains in a stable order.
func Model(base *sfc.Model, chains map[string]*api.Chain) *sfc.Model {
	m := *base
	m.FlowClassifiers = append([]sfc.FlowClassifier(nil), base.FlowClassifiers...)
	m.PortPairs = append([]sfc.PortPair(nil), base.PortPairs...)
	m.PortPairGroups = append([]sfc.PortPairGroup(nil), base.PortPairGroups...)
	m.PortChains = append([]sfc.PortChain(nil), base.PortChains...)
	port := func(r api.PortRef) string { return r.Node + "." + r.Iface }
	pairs, groups := map[string]bool{}, map[string]bool{}
	ids := make([]string, 0, len(chains))
	for id := range chains {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		c := chains[id]
		pc := sfc.PortChain{Name: "api-" + c.ID, ChainParameters: sfc.ChainParameters{Symmetric: c.Symmetric}}
		for _, cl := range c.Classifiers {
			fc := sfc.FlowClassifier{Name: "api-" + c.ID + "-" + cl.ID, Ethertype: cl.Ethertype, Protocol: cl.Protocol,
				SourcePortRangeMin: cl.SourcePortRangeMin, SourcePortRangeMax: cl.SourcePortRangeMax,
				DestinationPortRangeMin: cl.DestinationPortRangeMin, DestinationPortRangeMax: cl.DestinationPortRangeMax}
			fc.SourceIPPrefix, _ = parsePrefix(cl.SourceIPPrefix)
			fc.DestinationIPPrefix, _ = parsePrefix(cl.DestinationIPPrefix)
			if cl.LogicalSource != nil {
				fc.LogicalSourcePort = port(*cl.LogicalSource)
			}
			if cl.LogicalDestination != nil {
				fc.LogicalDestinationPort = port(*cl.LogicalDestination)
			}
			m.FlowClassifiers = append(m.FlowClassifiers, fc)
			pc.FlowClassifiers = append(pc.FlowClassifiers, fc.Name)
		}
		for _, g := range c.Groups {
			name := "api-" + g.ID
			pc.PortPairGroups = append(pc.PortPairGroups, name)
			if groups[name] {
				continue
			}
			groups[name] = true
			ppg := sfc.PortPairGroup{Name: name, LBFields: g.LBFields, TapEnabled: g.Tap}
			for _, pp := range g.Pairs {
				pn := "api-" + pp.ID
				ppg.PortPairs = append(ppg.PortPairs, pn)
				if !pairs[pn] {
					pairs[pn] = true
					m.PortPairs = append(m.PortPairs, sfc.PortPair{Name: pn, Ingress: port(pp.Ingress), Egress: port(pp.Egress), Weight: pp.Weight})
				}
			}
			m.PortPairGroups = append(m.PortPairGroups, ppg)
		}
		m.PortChains = append(m.PortChains, pc)
	}
	return &m
}

// Bindings reads where every port of a deployed transparent lab is: host, host-side
// ifindex, MAC, address.
func Bindings(t *plan.Transparent) (map[string]sfc.Binding, error) {
	bind := map[string]sfc.Binding{}
	for _, n := range t.Nodes {
		h := t.Host(n.Host)
		for _, pt := range n.Ports {
			idx, _, err := hosts.LinkOf(h.Netns, pt.HostIf)
			if err != nil {
				return nil, err
			}
			_, mac, err := hosts.LinkOf(n.Netns, pt.Ifname)
			if err != nil {
				return nil, err
			}
			bind[pt.Name] = sfc.Binding{Host: h.ID, Ifindex: uint32(idx), MAC: mac, IP: pt.Address.Addr()}
		}
	}
	return bind, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, nil
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Switch is the data plane `sfclab serve` uses: chains of transparent labs go to Plane (and
// are steered), every call is then passed to Other (the api.Recorder, which records it);
// chains of routed labs only reach Other, since routed steering cannot take chains at run
// time.
type Switch struct {
	Plane *Plane
	Other api.DataPlane
}

var _ api.DataPlane = (*Switch)(nil)

// ApplyChain steers the chain if its lab is transparent, then passes the call on.
func (s *Switch) ApplyChain(ctx context.Context, c *api.Chain) error {
	if err := s.Plane.ApplyChain(ctx, c); err != nil && !errors.Is(err, ErrNotTransparent) {
		return err
	}
	return s.Other.ApplyChain(ctx, c)
}

// RemoveChain stops steering the chain (if it was) and passes the call on.
func (s *Switch) RemoveChain(ctx context.Context, lab, id string) error {
	if err := s.Plane.RemoveChain(ctx, lab, id); err != nil && !errors.Is(err, ErrNotTransparent) {
		return err
	}
	return s.Other.RemoveChain(ctx, lab, id)
}
