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
	del: func(s *Server, _ context.Context, ls *labState, id string) error {
		return s.commitRemove(ls, func(db *labDB) { db.ServiceGraphs = remove(db.ServiceGraphs, db.sg(id)) })
	},
}

// createSG stores a service graph after networking-sfc's checks: valid ids, existing chains
// of one lab, no chain already in a graph, no loop. The data plane does not link chains yet:
// a graph is stored and listed, each of its chains steers on its own classifiers.
func createSG(s *Server, _ context.Context, f fields) (any, error) {
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
	ls.db.ServiceGraphs = append(ls.db.ServiceGraphs, g)
	if err := ls.db.save(ls.dir); err != nil {
		ls.db.ServiceGraphs = remove(ls.db.ServiceGraphs, g)
		return nil, err
	}
	return g, nil
}
