package api

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// supportedLBFields are the lb_fields a port pair group may hash flows on.
var supportedLBFields = []string{"eth_src", "eth_dst", "ip_src", "ip_dst", "tcp_src", "tcp_dst", "udp_src", "udp_dst"}

// nTupleRepr is supportedNTuple as networking-sfc's message prints it (a Python dict).
const nTupleRepr = "{'source_ip_prefix': None, 'destination_ip_prefix': None, 'source_port_range_min': None, " +
	"'source_port_range_max': None, 'destination_port_range_min': None, 'destination_port_range_max': None}"

// supportedNTuple are the keys of ingress_n_tuple and egress_n_tuple.
var supportedNTuple = []string{"source_ip_prefix", "destination_ip_prefix", "source_port_range_min",
	"source_port_range_max", "destination_port_range_min", "destination_port_range_max"}

var ppgKind = &kind{
	plural: "port_pair_groups", singular: "port_pair_group", attrs: ppgAttrs,
	notFound: func(id string) *Error {
		return notFound("PortPairGroupNotFound", "Port Pair Group %s not found.", id)
	},
	items:  func(db *labDB) []any { return items(db.PortPairGroups) },
	find:   func(db *labDB, id string) any { return found(db.ppg(id)) },
	create: createPPG,
	update: updatePPG,
	del: func(s *Server, _ context.Context, ls *labState, id string) error {
		if len(ls.db.chainsOfGroup(id)) > 0 {
			return inUse("PortPairGroupInUse", "Port Pair Group %s in use.", id)
		}
		return s.commitRemove(ls, func(db *labDB) { db.PortPairGroups = remove(db.PortPairGroups, db.ppg(id)) })
	},
}

// checkPairs validates the port pairs of group id ("" on create): they exist, are in one lab,
// belong to no other group, and share one correlation; a tap group has one pair at most.
func (s *Server) checkPairs(ids []string, id string, tap bool) (*labState, error) {
	if len(ids) == 0 {
		return nil, badRequest("InvalidInput",
			"Invalid input for operation: sfclab needs at least one port pair in a port pair group (its lab is the lab of its port pairs).")
	}
	var ls *labState
	var corr *string
	for i, ppID := range ids {
		pls := s.labOfPair(ppID)
		if pls == nil {
			return nil, notFound("PortPairNotFound", "Port Pair %s not found.", ppID)
		}
		if ls != nil && pls != ls {
			return nil, badRequest("InvalidInput", "Invalid input for operation: port pair %s is in lab %s, port pair %s in lab %s; a group stays in one lab.",
				ids[0], ls.db.Lab, ppID, pls.db.Lab)
		}
		ls = pls
		pp := ls.db.pp(ppID)
		c := pp.ServiceFunctionParameters.Correlation
		if i == 0 {
			corr = c
		} else if (c == nil) != (corr == nil) || (c != nil && *c != *corr) {
			return nil, badRequest("InconsistentCorrelations", "Port Pair Group attempted creation included Port Pairs with inconsistent correlation types.")
		}
		if g := ls.db.groupOf(ppID); g != nil && g.ID != id {
			return nil, inUse("PortPairInUse", "Port Pair %s in use.", ppID)
		}
	}
	if tap && len(ids) > 1 {
		return nil, badRequest("MultiplePortPairsInTapPPGNotSupported", "Multiple port pairs in Tap port-pair-group is not allowed.")
	}
	return ls, nil
}

func createPPG(s *Server, _ context.Context, f fields) (any, error) {
	g := &PortPairGroup{Resource: Resource{ID: uuid.NewString()}, PortPairs: []string{},
		PortPairGroupParameters: PPGParameters{LBFields: []string{},
			PPGNTupleMapping: NTupleMapping{IngressNTuple: map[string]any{}, EgressNTuple: map[string]any{}}}}
	if err := nameAndDescription(f, &g.Name, &g.Description); err != nil {
		return nil, err
	}
	if err := tenant(f, &g.TenantID, &g.ProjectID); err != nil {
		return nil, err
	}
	if raw, ok := f["tap_enabled"]; ok && !isNull(raw) {
		b, ok := toBool(raw)
		if !ok {
			return nil, badRequest("InvalidInput", "Invalid input for operation: '%s' cannot be converted to boolean.", pyStr(raw))
		}
		g.TapEnabled = b
	}
	if err := ppgParameters(f, &g.PortPairGroupParameters); err != nil {
		return nil, err
	}
	pairs, _, err := f.uuidList("port_pairs")
	if err != nil {
		return nil, err
	}
	ls, err := s.checkPairs(pairs, "", g.TapEnabled)
	if err != nil {
		return nil, err
	}
	g.PortPairs = pairs
	used := map[int]bool{}
	for _, o := range ls.db.PortPairGroups {
		used[o.GroupID] = true
	}
	for g.GroupID = 1; used[g.GroupID]; g.GroupID++ {
	}
	ls.db.PortPairGroups = append(ls.db.PortPairGroups, g)
	if err := ls.db.save(ls.dir); err != nil {
		ls.db.PortPairGroups = remove(ls.db.PortPairGroups, g)
		return nil, err
	}
	return g, nil
}

func ppgParameters(f fields, p *PPGParameters) error {
	params, _, err := f.object("port_pair_group_parameters")
	if err != nil {
		return err
	}
	const attr = "port_pair_group_parameters"
	for k := range params {
		if k != "lb_fields" && k != "ppg_n_tuple_mapping" {
			return invalidInput(attr, "Unexpected keys supplied: %s", strings.Join(sortedKeys(params), ", "))
		}
	}
	for k, raw := range params {
		switch k {
		case "lb_fields":
			var list []string
			if err := json.Unmarshal(raw, &list); err != nil {
				return invalidInput(attr, "'%s' is not a list", string(raw))
			}
			if err := checkAllowed(attr, list, supportedLBFields); err != nil {
				return err
			}
			p.LBFields = append([]string{}, list...)
		case "ppg_n_tuple_mapping":
			var m map[string]map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				return invalidInput(attr, "%s is not a dictionary", pyRepr(decoded(raw)))
			}
			for _, side := range sortedKeys(m) {
				for _, key := range sortedKeys(m[side]) {
					if !slices.Contains(supportedNTuple, key) {
						return badRequest("PPGParametersInvalidNTupleMappingParameter",
							"Invalid Port Pair Group N-Tuple Mapping parameters: Unknow key %s.. Supported PPG classifier N-Tuple Mapping parameters are %s.", key, nTupleRepr)
					}
				}
			}
			// networking-sfc's OVS driver rewrites a flow's header fields per group with these;
			// sfclab's data plane steers by path id and does not rewrite headers, so a mapping
			// it would silently ignore is refused.
			for _, side := range sortedKeys(m) {
				if (side != "ingress_n_tuple" && side != "egress_n_tuple") || len(m[side]) > 0 {
					return badRequest("PPGParametersNTupleMappingNotSupported",
						"Port Pair Group N-Tuple Mapping %s=%s is not supported: sfclab's data plane steers flows by path and does not rewrite their header fields per port pair group; leave ppg_n_tuple_mapping empty ({\"ingress_n_tuple\": {}, \"egress_n_tuple\": {}}).",
						side, pyRepr(m[side]))
				}
			}
		}
	}
	return nil
}

// updatePPG changes a group's name, description or port pairs; the chains that use the group
// are applied again with the new pairs before the API answers (the path changes live).
func updatePPG(s *Server, ctx context.Context, ls *labState, id string, f fields) (any, error) {
	g := ls.db.ppg(id)
	old := *g
	if err := nameAndDescription(f, &g.Name, &g.Description); err != nil {
		return nil, err
	}
	pairs, changed, err := f.uuidList("port_pairs")
	if err != nil {
		*g = old
		return nil, err
	}
	if changed {
		pls, err := s.checkPairs(pairs, id, g.TapEnabled)
		if err != nil {
			*g = old
			return nil, err
		}
		if pls != ls {
			*g = old
			return nil, badRequest("InvalidInput", "Invalid input for operation: the port pairs are in lab %s, the group in lab %s.", pls.db.Lab, ls.db.Lab)
		}
		g.PortPairs = pairs
	}
	chains := ls.db.chainsOfGroup(id)
	restore := func() {
		*g = old
		for _, pc := range chains {
			if c, err := s.resolve(ls, pc); err == nil {
				if err := s.cfg.DataPlane.ApplyChain(ctx, c); err != nil {
					s.cfg.Log("restore chain %s after a failed group update: %v", pc.ID, err)
				}
			}
		}
	}
	if changed {
		for _, pc := range chains {
			c, err := s.resolve(ls, pc)
			if err == nil {
				err = s.checkChain(ctx, c)
			}
			if err != nil {
				restore()
				return nil, err
			}
			if err := s.cfg.DataPlane.ApplyChain(ctx, c); err != nil {
				restore()
				return nil, driverError("update_port_pair_group", err)
			}
		}
	}
	if err := ls.db.save(ls.dir); err != nil {
		restore()
		return nil, err
	}
	return g, nil
}

// driverError is networking-sfc's answer when the driver (here: the data plane) fails.
func driverError(method string, err error) *Error {
	return &Error{Status: 500, Type: "SfcDriverError", Message: fmt.Sprintf("%s failed: %v", method, err)}
}
