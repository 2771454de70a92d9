package api

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/google/uuid"
	"github.com/sfclab/sfclab/sfc"
)

var sgKind = &kind{
	plural: "service_graphs", singular: "service_graph", attrs: sgAttrs,
	notFound: func(id string) *Error { return notFound("ServiceGraphNotFound", "Service Graph %s not found.", id) },
	items:    func(db *labDB) []any { return items(db.ServiceGraphs) },
	find:     func(db *labDB, id string) any { return found(db.sg(id)) },
	create:   createSG,
	update: func(s *Server, _ context.Context, ls *labState, id string, f fields) (any, error) {
		g := ls.db.sg(id)
		old := *g
		if err := nameAndDescription(f, &g.Name, &g.Description); err != nil {
			return nil, err
		}
		if err := ls.db.save(ls.dir); err != nil {
			*g = old
			return nil, err
		}
		return g, nil
	},
	del: deleteSG,
}

// graphPlane is the data plane's GraphPlane, nil when it links no chains.
func (s *Server) graphPlane() GraphPlane {
	gp, _ := s.cfg.DataPlane.(GraphPlane)
	return gp
}

// resolveGraph is a graph as the data plane receives it.
func resolveGraph(db *labDB, g *ServiceGraph) *Graph {
	out := &Graph{Lab: db.Lab, ID: g.ID, Name: g.Name, Edges: map[string][]string{}}
	note := func(id string) {
		if name, ok := db.fromFile(id); ok {
			if out.LabFile == nil {
				out.LabFile = map[string]string{}
			}
			out.LabFile[id] = name
		}
	}
	for src, dsts := range g.PortChains {
		out.Edges[src] = append([]string(nil), dsts...)
		note(src)
		for _, d := range dsts {
			note(d)
		}
	}
	return out
}

// deleteSG unlinks a graph's chains in the data plane, then forgets the graph.
func deleteSG(s *Server, ctx context.Context, ls *labState, id string) error {
	g := ls.db.sg(id)
	gp := s.graphPlane()
	if gp != nil {
		if err := gp.RemoveGraph(ctx, ls.db.Lab, id); err != nil {
			return driverError("delete_service_graph", err)
		}
	}
	if err := s.commitRemove(ls, func(db *labDB) { db.ServiceGraphs = remove(db.ServiceGraphs, g) }); err != nil {
		if gp != nil {
			if aerr := gp.ApplyGraph(ctx, resolveGraph(ls.db, g)); aerr != nil {
				s.cfg.Log("restore service graph %s: %v", id, aerr)
			}
		}
		return err
	}
	return nil
}

// createSG checks a service graph as networking-sfc does (valid ids, existing chains of one
// lab, no chain already in a graph, no loop), links its chains in the data plane (traffic
// leaving a source chain is classified again by its destination chains' classifiers) and
// stores it.
func createSG(s *Server, ctx context.Context, f fields) (any, error) {
	g := &ServiceGraph{Resource: Resource{ID: uuid.NewString()}}
	if err := nameAndDescription(f, &g.Name, &g.Description); err != nil {
		return nil, err
	}
	if err := tenant(f, &g.TenantID, &g.ProjectID); err != nil {
		return nil, err
	}
	if err := requireField(f, "port_chains"); err != nil {
		return nil, err
	}
	var m map[string][]string
	if err := json.Unmarshal(f["port_chains"], &m); err != nil || m == nil {
		return nil, invalidInput("port_chains", "'%s' is not a dictionary of port chain ids to lists of port chain ids", string(f["port_chains"]))
	}
	if len(m) == 0 { // networking-sfc stores an empty graph; it links nothing
		g.PortChains = m
		return g, s.storeEmptyGraph(g)
	}
	var ls *labState
	var all []string
	for _, src := range sortedKeys(m) {
		if !isUUID(src) {
			return nil, badRequest("InvalidUUID", "An invalid UUID was specified: UUID of source Port-Chainis invalid: %s.. Make sure only valid UUIDs are provided.", src)
		}
		for _, dst := range m[src] {
			if !isUUID(dst) {
				return nil, badRequest("InvalidUUID", "An invalid UUID was specified: UUID of destination Port-Chain is invalid: %s.. Make sure only valid UUIDs are provided.", dst)
			}
		}
		all = append(all, src)
		all = append(all, m[src]...)
	}
	for _, id := range all {
		_, cls := s.lookup(pcKind, id)
		if cls == nil {
			return nil, notFound("PortChainNotFound", "Port Chain %s not found.", id)
		}
		if ls != nil && cls != ls {
			return nil, badRequest("InvalidInput", "Invalid input for operation: port chains of labs %s and %s; a graph stays in one lab.", ls.db.Lab, cls.db.Lab)
		}
		ls = cls
	}
	taken := false
	for _, id := range all {
		taken = taken || ls.db.graphOfChain(id) != nil
	}
	if taken {
		return nil, inUse("ServiceGraphInvalidPortChains", "Some of the Port Chain(s): %s, are already in use by a Service Graph.", pyRepr(decoded(f["port_chains"])))
	}
	if err := checkGraph(ls.db, m); err != nil {
		return nil, err
	}
	// networking-sfc stores a graph as its edges: a source without destinations is dropped.
	for src, dsts := range m {
		if len(dsts) == 0 {
			delete(m, src)
		}
	}
	if len(m) == 0 {
		g.PortChains = m
		return g, s.storeEmptyGraph(g)
	}
	g.PortChains = m
	if ck, ok := s.cfg.DataPlane.(Checker); ok {
		if err := checked("check_service_graph", ck.CheckGraph(ctx, resolveGraph(ls.db, g))); err != nil {
			return nil, err
		}
	}
	gp := s.graphPlane()
	if gp != nil {
		if err := gp.ApplyGraph(ctx, resolveGraph(ls.db, g)); err != nil {
			if rerr := gp.RemoveGraph(ctx, ls.db.Lab, g.ID); rerr != nil {
				s.cfg.Log("remove service graph %s after a failed create: %v", g.ID, rerr)
			}
			return nil, driverError("create_service_graph", err)
		}
	}
	ls.db.ServiceGraphs = append(ls.db.ServiceGraphs, g)
	if err := ls.db.save(ls.dir); err != nil {
		ls.db.ServiceGraphs = remove(ls.db.ServiceGraphs, g)
		if gp != nil {
			if rerr := gp.RemoveGraph(ctx, ls.db.Lab, g.ID); rerr != nil {
				s.cfg.Log("remove service graph %s after a failed save: %v", g.ID, rerr)
			}
		}
		return nil, err
	}
	return g, nil
}

// storeEmptyGraph keeps a graph without chains. It belongs to no lab, so it is held by the
// first lab (in name order) and survives as long as that lab does; with no lab there is
// nowhere to keep it.
func (s *Server) storeEmptyGraph(g *ServiceGraph) error {
	names := s.labNames()
	if len(names) == 0 {
		return badRequest("InvalidInput", "Invalid input for operation: no lab is deployed to hold service graph %s.", g.ID)
	}
	ls := s.labs[names[0]]
	ls.db.ServiceGraphs = append(ls.db.ServiceGraphs, g)
	if err := ls.db.save(ls.dir); err != nil {
		ls.db.ServiceGraphs = remove(ls.db.ServiceGraphs, g)
		return err
	}
	return nil
}

// checkGraph applies networking-sfc's service graph rules (_validate_port_chains_for_graph)
// in its order: at every branching point the source chain's last group and each
// destination chain's first group have port pairs whose correlation is the chain's
// (ServiceGraphImpossibleBranching: a pair without correlation never matches), all chains
// share one correlation (ServiceGraphInconsistentEncapsulation), no destination is given
// twice (ServiceGraphPortChainInConflict), the destinations' classifiers do not overlap
// (ServiceGraphFlowClassifierInConflict), and the graph has no loop.
func checkGraph(db *labDB, m map[string][]string) error {
	corrOK := func(pc *PortChain, groupID string) bool {
		for _, ppID := range db.ppg(groupID).PortPairs {
			c := db.pp(ppID).ServiceFunctionParameters.Correlation
			if c == nil || *c != pc.ChainParameters.Correlation {
				return false
			}
		}
		return true
	}
	impossible := badRequest("ServiceGraphImpossibleBranching",
		"Service Graphs require source (branching) and destination port pair groups (their PPs) to have correlation enabled.")
	inconsistent := badRequest("ServiceGraphInconsistentEncapsulation",
		"Service Graph may only connect port-chains sharing the same correlation.")
	encapsulation := ""
	for _, src := range sortedKeys(m) {
		spc := db.pc(src)
		if !corrOK(spc, spc.PortPairGroups[len(spc.PortPairGroups)-1]) {
			return impossible
		}
		if encapsulation == "" {
			encapsulation = spc.ChainParameters.Correlation
		} else if encapsulation != spc.ChainParameters.Correlation {
			return inconsistent
		}
		var seen []string
		var fcs []*FlowClassifier
		for _, dst := range m[src] {
			if slices.Contains(seen, dst) {
				return badRequest("ServiceGraphPortChainInConflict", "Port Chain %s is duplicated on one of the branching points being created.", dst)
			}
			seen = append(seen, dst)
			dpc := db.pc(dst)
			if !corrOK(dpc, dpc.PortPairGroups[0]) {
				return impossible
			}
			if encapsulation != dpc.ChainParameters.Correlation {
				return inconsistent
			}
			for _, id := range dpc.FlowClassifiers {
				fcs = append(fcs, db.fc(id))
			}
			for i, a := range fcs {
				for _, b := range fcs[i+1:] {
					if fcConflict(a, b, false) {
						return badRequest("ServiceGraphFlowClassifierInConflict",
							"Flow Classifier %s conflicts with Flow Classifier %s on one of the branching points being created.", a.ID, b.ID)
					}
				}
			}
		}
	}
	if _, loop := sfc.LoopThrough(m); loop {
		return badRequest("ServiceGraphLoopDetected", "Service Graph defined contains at least one port chain loop.")
	}
	return nil
}
