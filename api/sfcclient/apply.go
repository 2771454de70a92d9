package sfcclient

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Steps are the four REST steps of study C, in order.
var Steps = []string{"FC", "PP", "PPG", "PC"}

// Deployed is a chain created by Apply: the ids of what it created and each step's time
// (the sum of the step's requests, measured at the client).
type Deployed struct {
	FlowClassifier string
	PortPairs      []string
	Groups         []string
	Chain          string
	// Times are the durations of FC, PP, PPG and PC (Steps order).
	Times [4]time.Duration
	// ChainAnswered is when the port chain's 201 arrived at the client.
	ChainAnswered time.Time
}

// Total is the time of the four steps.
func (d *Deployed) Total() time.Duration {
	var t time.Duration
	for _, x := range d.Times {
		t += x
	}
	return t
}

// Apply deploys a chain description in study C's four steps: one flow classifier from the
// source's port with the match fields, one port pair per function, one port pair group per
// function (a tap's group is tap-enabled), and the port chain. Port lookups are done first
// and are not timed (the study leaves client-side work out). name prefixes the resources'
// names. On failure what was created is deleted again.
//
// Port pairs by direction, with sfclab's port names (NODE-IFACE; functions have an ingress
// and an egress interface): in and out use NODE-ingress -> NODE-egress (a function of a lab
// has one egress, on the network towards the destination); same and tap use NODE-ingress for
// both ends.
func (c *Client) Apply(ctx context.Context, f *ChainFile, name string) (*Deployed, error) {
	ports, err := c.ports(ctx, f.Lab)
	if err != nil {
		return nil, err
	}
	byName := map[string][]port{}
	for _, p := range ports {
		byName[p.Name] = append(byName[p.Name], p)
	}
	find := func(n string) (string, error) {
		ps := byName[n]
		switch len(ps) {
		case 0:
			return "", fmt.Errorf("no port %s: sfclab names ports NODE-IFACE; list them with GET /v2.0/ports", n)
		case 1:
			return ps[0].ID, nil
		}
		return "", fmt.Errorf("port %s is in several labs; set \"lab\" in the chain file", n)
	}
	endpoint := func(node string) (string, error) { // an endpoint's first port
		var names []string
		for n := range byName {
			if strings.HasPrefix(n, node+"-") {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			return "", fmt.Errorf("node %s has no port (is its lab deployed? sfclab inspect)", node)
		}
		sort.Strings(names)
		return find(names[0])
	}
	src, err := endpoint(f.Source)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	dst, err := endpoint(f.Destination)
	if err != nil {
		return nil, fmt.Errorf("destination: %w", err)
	}
	type pair struct{ in, out string }
	pairs := make([]pair, len(f.Chain))
	for i, e := range f.Chain {
		in, err := find(e.Name + "-ingress")
		if err != nil {
			return nil, fmt.Errorf("chain[%d] (%s): %w", i, e.Name, err)
		}
		out := in
		if e.Direction == DirIn || e.Direction == DirOut {
			if out, err = find(e.Name + "-egress"); err != nil {
				return nil, fmt.Errorf("chain[%d] (%s): %w", i, e.Name, err)
			}
		}
		pairs[i] = pair{in, out}
	}

	d := &Deployed{}
	fail := func(err error) (*Deployed, error) {
		if derr := c.Remove(context.WithoutCancel(ctx), d); derr != nil {
			err = fmt.Errorf("%w (and undoing: %v)", err, derr)
		}
		return nil, err
	}
	fc := map[string]any{"name": name + "-fc", "logical_source_port": src, "logical_destination_port": dst}
	for k, v := range f.MatchFields {
		fc[k] = v
	}
	id, t, err := c.create(ctx, "flow_classifiers", "flow_classifier", fc)
	d.Times[0] += t
	if err != nil {
		return fail(fmt.Errorf("step FC: %w", err))
	}
	d.FlowClassifier = id
	for i, e := range f.Chain {
		id, t, err := c.create(ctx, "port_pairs", "port_pair", map[string]any{"name": name + "-pp-" + e.Name, "ingress": pairs[i].in, "egress": pairs[i].out})
		d.Times[1] += t
		if err != nil {
			return fail(fmt.Errorf("step PP (%s): %w", e.Name, err))
		}
		d.PortPairs = append(d.PortPairs, id)
	}
	for i, e := range f.Chain {
		id, t, err := c.create(ctx, "port_pair_groups", "port_pair_group", map[string]any{"name": name + "-ppg-" + e.Name,
			"port_pairs": []string{d.PortPairs[i]}, "tap_enabled": e.Direction == DirTap})
		d.Times[2] += t
		if err != nil {
			return fail(fmt.Errorf("step PPG (%s): %w", e.Name, err))
		}
		d.Groups = append(d.Groups, id)
	}
	id, t, err = c.create(ctx, "port_chains", "port_chain", map[string]any{"name": name,
		"port_pair_groups": d.Groups, "flow_classifiers": []string{d.FlowClassifier}})
	d.Times[3] += t
	d.ChainAnswered = time.Now()
	if err != nil {
		return fail(fmt.Errorf("step PC: %w", err))
	}
	d.Chain = id
	return d, nil
}

// Remove deletes what Apply created, chain first.
func (c *Client) Remove(ctx context.Context, d *Deployed) error {
	var errs []string
	del := func(plural, id string) {
		if id == "" {
			return
		}
		if err := c.Delete(ctx, plural, id); err != nil {
			errs = append(errs, err.Error())
		}
	}
	del("port_chains", d.Chain)
	for _, g := range d.Groups {
		del("port_pair_groups", g)
	}
	for _, p := range d.PortPairs {
		del("port_pairs", p)
	}
	del("flow_classifiers", d.FlowClassifier)
	if len(errs) > 0 {
		return fmt.Errorf("remove chain: %s", strings.Join(errs, "; "))
	}
	return nil
}
