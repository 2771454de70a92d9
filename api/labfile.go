package api

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/sfclab/sfclab/plan"
)

// FileID is the id of a resource declared in a lab file: UUIDv5 of "KIND:LAB/NAME" in
// sfclab's namespace (KIND is flow_classifier, port_pair, port_pair_group, port_chain or
// service_graph), so the file's resources keep their ids across restarts of the server and
// redeploys of the lab.
func FileID(kind, lab, name string) string { return stableID(kind, lab+"/"+name) }

// fileResources turns the networking-sfc resources a transparent lab file declares into API
// resources with stable ids (FileID); names map id -> the resource's name in the file. Chain
// ids and group ids are the resources' positions in the file (from 1), as the data plane
// numbers them; the API gives its own resources the smallest free numbers after them.
var mpls = "mpls"

func fileResources(lab string, p *plan.Plan) (*labDB, map[string]string, error) {
	db := &labDB{Lab: lab}
	names := map[string]string{}
	t := p.Transparent
	if t == nil || t.Model == nil {
		return db, names, nil
	}
	m := t.Model
	portOf := map[string]string{}
	for _, n := range t.Nodes {
		for _, pt := range n.Ports {
			portOf[pt.Name] = PortID(lab, n.Name, pt.Ifname)
		}
	}
	port := func(name string) (*string, error) {
		if name == "" {
			return nil, nil
		}
		id, ok := portOf[name]
		if !ok {
			return nil, fmt.Errorf("lab %s: the lab file names port %s, which the plan does not have", lab, name)
		}
		return &id, nil
	}
	id := func(kind, name string) string {
		x := FileID(kind, lab, name)
		names[x] = name
		return x
	}
	desc := func(kind, name string) string {
		return fmt.Sprintf("declared in the lab file of lab %s as %s %s (read-only over the API)", lab, kind, name)
	}
	// res is the header of the file's resource called name, of kind as in its id ("flow_classifier").
	res := func(kind, name string) Resource {
		return Resource{ID: id(kind, name), Name: name, Description: desc(strings.ReplaceAll(kind, "_", " "), name),
			TenantID: projectID, ProjectID: projectID}
	}
	optInt := func(v int) *int {
		if v == 0 {
			return nil
		}
		return &v
	}
	for _, fc := range m.FlowClassifiers {
		x := &FlowClassifier{Resource: res("flow_classifier", fc.Name),
			Ethertype: "IPv4", L7Parameters: map[string]any{},
			SourcePortRangeMin: optInt(fc.SourcePortRangeMin), SourcePortRangeMax: optInt(fc.SourcePortRangeMax),
			DestinationPortRangeMin: optInt(fc.DestinationPortRangeMin), DestinationPortRangeMax: optInt(fc.DestinationPortRangeMax)}
		if fc.Ethertype != "" {
			x.Ethertype = fc.Ethertype
		}
		if fc.Protocol != "" {
			proto := fc.Protocol
			x.Protocol = &proto
		}
		if fc.SourceIPPrefix.IsValid() {
			s := fc.SourceIPPrefix.String()
			x.SourceIPPrefix = &s
		}
		if fc.DestinationIPPrefix.IsValid() {
			s := fc.DestinationIPPrefix.String()
			x.DestinationIPPrefix = &s
		}
		var err error
		if x.LogicalSourcePort, err = port(fc.LogicalSourcePort); err != nil {
			return nil, nil, err
		}
		if x.LogicalDestinationPort, err = port(fc.LogicalDestinationPort); err != nil {
			return nil, nil, err
		}
		db.FlowClassifiers = append(db.FlowClassifiers, x)
	}
	for _, pp := range m.PortPairs {
		in, err := port(pp.Ingress)
		if err != nil {
			return nil, nil, err
		}
		out, err := port(pp.Egress)
		if err != nil {
			return nil, nil, err
		}
		db.PortPairs = append(db.PortPairs, &PortPair{Resource: res("port_pair", pp.Name),
			Ingress: *in, Egress: *out,
			// mpls, the correlation of the file's chains: a service graph over the API may
			// branch from and to them (networking-sfc needs the pairs' correlation to be the
			// chains').
			ServiceFunctionParameters: SFParameters{Weight: pp.Weight, Correlation: &mpls}})
	}
	for i, g := range m.PortPairGroups {
		x := &PortPairGroup{Resource: res("port_pair_group", g.Name),
			GroupID: i + 1, PortPairs: []string{}, TapEnabled: g.TapEnabled,
			PortPairGroupParameters: PPGParameters{LBFields: append([]string{}, g.LBFields...),
				PPGNTupleMapping: NTupleMapping{IngressNTuple: map[string]any{}, EgressNTuple: map[string]any{}}}}
		for _, pp := range g.PortPairs {
			x.PortPairs = append(x.PortPairs, FileID("port_pair", lab, pp))
		}
		db.PortPairGroups = append(db.PortPairGroups, x)
	}
	chainID := map[string]string{}
	for i, c := range m.PortChains {
		x := &PortChain{Resource: res("port_chain", c.Name),
			ChainID: i + 1, PortPairGroups: []string{}, FlowClassifiers: []string{},
			ChainParameters: ChainParameters{Correlation: "mpls", Symmetric: c.ChainParameters.Symmetric}}
		for _, g := range c.PortPairGroups {
			x.PortPairGroups = append(x.PortPairGroups, FileID("port_pair_group", lab, g))
		}
		for _, fc := range c.FlowClassifiers {
			x.FlowClassifiers = append(x.FlowClassifiers, FileID("flow_classifier", lab, fc))
		}
		chainID[c.Name] = x.ID
		db.PortChains = append(db.PortChains, x)
	}
	for _, g := range m.ServiceGraphs {
		x := &ServiceGraph{Resource: res("service_graph", g.Name),
			PortChains: map[string][]string{}}
		srcs := make([]string, 0, len(g.PortChains))
		for src := range g.PortChains {
			srcs = append(srcs, src)
		}
		sort.Strings(srcs)
		for _, src := range srcs {
			for _, dst := range g.PortChains[src] {
				x.PortChains[chainID[src]] = append(x.PortChains[chainID[src]], chainID[dst])
			}
		}
		db.ServiceGraphs = append(db.ServiceGraphs, x)
	}
	return db, names, nil
}

// addFile puts a lab file's resources before the API's own and remembers which they are:
// they are listed and shown like any other, refused for update and delete, never written to
// sfc.json and never handed to the data plane (the lab's deploy steers them).
func (db *labDB) addFile(file *labDB, names map[string]string) {
	db.file = names
	db.FlowClassifiers = append(file.FlowClassifiers, db.FlowClassifiers...)
	db.PortPairs = append(file.PortPairs, db.PortPairs...)
	db.PortPairGroups = append(file.PortPairGroups, db.PortPairGroups...)
	db.PortChains = append(file.PortChains, db.PortChains...)
	db.ServiceGraphs = append(file.ServiceGraphs, db.ServiceGraphs...)
}

// fromFile reports whether id is a resource of the lab file, with its name there.
func (db *labDB) fromFile(id string) (string, bool) {
	name, ok := db.file[id]
	return name, ok
}

// stored is db without the lab file's resources: what sfc.json holds.
func (db *labDB) stored() *labDB {
	out := *db
	out.FlowClassifiers = keep(db.FlowClassifiers, db.file, func(x *FlowClassifier) string { return x.ID })
	out.PortPairs = keep(db.PortPairs, db.file, func(x *PortPair) string { return x.ID })
	out.PortPairGroups = keep(db.PortPairGroups, db.file, func(x *PortPairGroup) string { return x.ID })
	out.PortChains = keep(db.PortChains, db.file, func(x *PortChain) string { return x.ID })
	out.ServiceGraphs = keep(db.ServiceGraphs, db.file, func(x *ServiceGraph) string { return x.ID })
	return &out
}

func keep[T any](s []*T, drop map[string]string, id func(*T) string) []*T {
	out := make([]*T, 0, len(s))
	for _, x := range s {
		if _, ok := drop[id(x)]; !ok {
			out = append(out, x)
		}
	}
	return out
}

// readOnly is the 409 for a change to a lab file's resource.
func readOnly(k *kind, lab, id, name string) *Error {
	return &Error{Status: http.StatusConflict, Type: "LabFileResourceReadOnly",
		Message: fmt.Sprintf("%s %s (%s) is declared in the lab file of lab %s and cannot be changed or deleted over the API: "+
			"edit the lab file and redeploy it (sfclab deploy), or create your own %s over the API.",
			k.title(), id, name, lab, k.plural)}
}

// fileName is the name under which the data plane knows a lab file's resource ("" for the
// API's own).
func (db *labDB) fileName(id string) string { return db.file[id] }

// title is the resource type as networking-sfc's messages name it (Port Chain, ...).
func (k *kind) title() string {
	return map[string]string{"flow_classifiers": "Flow Classifier", "port_pairs": "Port Pair",
		"port_pair_groups": "Port Pair Group", "port_chains": "Port Chain", "service_graphs": "Service Graph"}[k.plural]
}
