package api

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/google/uuid"
)

var ppKind = &kind{
	plural: "port_pairs", singular: "port_pair", attrs: ppAttrs,
	notFound: func(id string) *Error { return notFound("PortPairNotFound", "Port Pair %s not found.", id) },
	items:    func(db *labDB) []any { return items(db.PortPairs) },
	find:     func(db *labDB, id string) any { return found(db.pp(id)) },
	create:   createPP,
	update: func(s *Server, _ context.Context, ls *labState, id string, f fields) (any, error) {
		pp := ls.db.pp(id)
		old := *pp
		if err := nameAndDescription(f, &pp.Name, &pp.Description); err != nil {
			return nil, err
		}
		if err := ls.db.save(ls.dir); err != nil {
			*pp = old
			return nil, err
		}
		return pp, nil
	},
	del: func(s *Server, _ context.Context, ls *labState, id string) error {
		if ls.db.groupOf(id) != nil {
			return inUse("PortPairInUse", "Port Pair %s in use.", id)
		}
		return s.commitRemove(ls, func(db *labDB) { db.PortPairs = remove(db.PortPairs, db.pp(id)) })
	},
}

func createPP(s *Server, _ context.Context, f fields) (any, error) {
	pp := &PortPair{Resource: Resource{ID: uuid.NewString()}, ServiceFunctionParameters: SFParameters{Weight: 1}}
	if err := nameAndDescription(f, &pp.Name, &pp.Description); err != nil {
		return nil, err
	}
	if err := tenant(f, &pp.TenantID, &pp.ProjectID); err != nil {
		return nil, err
	}
	for _, side := range []struct {
		name string
		dst  *string
	}{{"ingress", &pp.Ingress}, {"egress", &pp.Egress}} {
		if err := requireField(f, side.name); err != nil {
			return nil, err
		}
		v, err := f.optUUID(side.name)
		if err != nil {
			return nil, err
		}
		if v == nil {
			return nil, invalidInput(side.name, "'None' is not a valid UUID")
		}
		*side.dst = *v
	}
	params, _, err := f.object("service_function_parameters")
	if err != nil {
		return nil, err
	}
	for k := range params {
		if k != "correlation" && k != "weight" {
			return nil, invalidInput("service_function_parameters", "Unexpected keys supplied: %s", strings.Join(sortedKeys(params), ", "))
		}
	}
	for k, raw := range params {
		switch k {
		case "correlation":
			if isNull(raw) {
				continue
			}
			var c string
			if json.Unmarshal(raw, &c) != nil || (c != "mpls" && c != "nsh") {
				return nil, invalidInput("service_function_parameters", "%s is not in valid_values", pyStr(raw))
			}
			pp.ServiceFunctionParameters.Correlation = &c
		case "weight":
			w, ok := toInt(raw)
			if !ok {
				return nil, badRequest("InvalidInput", "Invalid input for operation: '%s' is not an integer.", pyStr(raw))
			}
			if w < 0 {
				return nil, invalidInput("service_function_parameters", "'%s' should be non-negative", pyStr(raw))
			}
			pp.ServiceFunctionParameters.Weight = w
		}
	}
	for _, ls := range s.labs {
		for _, other := range ls.db.PortPairs {
			if other.Ingress == pp.Ingress && other.Egress == pp.Egress {
				return nil, badRequest("PortPairIngressEgressInUse",
					"Port Pair with ingress port %s and egress port %s is already used by another Port Pair %s.", pp.Ingress, pp.Egress, other.ID)
			}
		}
	}
	in, ls := s.findPort(pp.Ingress)
	if in == nil {
		return nil, notFound("PortPairPortNotFound", "Port Pair port %s not found.", pp.Ingress)
	}
	out, _ := s.findPort(pp.Egress)
	if out == nil {
		return nil, notFound("PortPairPortNotFound", "Port Pair port %s not found.", pp.Egress)
	}
	if in.DeviceID != out.DeviceID {
		return nil, badRequest("PortPairIngressEgressDifferentHost",
			"Port Pair ingress port %s and egress port %s not in the same host.", pp.Ingress, pp.Egress)
	}
	ls.db.PortPairs = append(ls.db.PortPairs, pp)
	if err := ls.db.save(ls.dir); err != nil {
		ls.db.PortPairs = remove(ls.db.PortPairs, pp)
		return nil, err
	}
	return pp, nil
}

// labOfPair is the lab state that holds a port pair, or nil.
func (s *Server) labOfPair(id string) *labState {
	for _, ls := range s.labs {
		if ls.db.pp(id) != nil {
			return ls
		}
	}
	return nil
}
