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
	g := &ServiceGraph{ID: uuid.NewString()}
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
	if err := json.Unmarshal(f["port_chains"], &m); err != nil || len(m) == 0 {
		return nil, invalidInput("port_chains", "'%s' is not a dictionary of port chain ids to lists of port chain ids", string(f["port_chains"]))
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
	var taken []string
	for _, id := range all {
		if ls.db.graphOfChain(id) != nil && !slices.Contains(taken, id) {
			taken = append(taken, id)
		}
	}
	if len(taken) > 0 {
		return nil, inUse("ServiceGraphInvalidPortChains", "Some of the Port Chain(s): %s, are already in use by a Service Graph.", pyList(taken))
	}
	if _, loop := sfc.LoopThrough(m); loop {
		return nil, badRequest("ServiceGraphLoopDetected", "Service Graph defined contains at least one port chain loop.")
	}
	g.PortChains = m
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
