package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// maxChainID is the largest chain_id networking-sfc assigns.
const maxChainID = 65535

var pcKind = &kind{
	plural: "port_chains", singular: "port_chain", attrs: pcAttrs,
	notFound: func(id string) *Error { return notFound("PortChainNotFound", "Port Chain %s not found.", id) },
	items:    func(db *labDB) []any { return items(db.PortChains) },
	find:     func(db *labDB, id string) any { return found(db.pc(id)) },
	create:   createPC,
	update:   updatePC,
	del:      deletePC,
}

// pyList formats ids as Python prints a list, as networking-sfc's messages do.
func pyList(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = "'" + id + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// chainLab finds the lab of a chain's groups and classifiers and checks them as
// networking-sfc does (_validate_port_pair_groups, _validate_flow_classifiers,
// _validate_correlation_consistency); pcID is the chain being updated ("" on create).
func (s *Server) chainLab(ppgs, fcs []string, pcID, correlation string) (*labState, error) {
	var ls *labState
	for _, id := range ppgs {
		_, gls := s.lookup(ppgKind, id)
		if gls == nil {
			return nil, notFound("PortPairGroupNotFound", "Port Pair Group %s not found.", id)
		}
		if ls != nil && gls != ls {
			return nil, badRequest("InvalidInput", "Invalid input for operation: port pair group %s is in lab %s, port pair group %s in lab %s; a chain stays in one lab.", ppgs[0], ls.db.Lab, id, gls.db.Lab)
		}
		ls = gls
	}
	for _, id := range fcs {
		_, fls := s.lookup(fcKind, id)
		if fls == nil {
			return nil, notFound("FlowClassifierNotFound", "Flow Classifier %s not found.", id)
		}
		if fls != ls {
			return nil, badRequest("InvalidInput", "Invalid input for operation: flow classifier %s is in lab %s, the port pair groups in lab %s; a chain stays in one lab.", id, fls.db.Lab, ls.db.Lab)
		}
	}
	db := ls.db
	prevTap := false
	for _, id := range ppgs {
		tap := db.ppg(id).TapEnabled
		if prevTap && tap {
			return nil, badRequest("ConsecutiveTapPPGNotSupported", "Consecutive Tap PPG in port-chain is not supported now.")
		}
		prevTap = tap
	}
	for _, other := range db.PortChains {
		if other.ID != pcID && slices.Equal(other.PortPairGroups, ppgs) {
			return nil, inUse("InvalidPortPairGroups", "Port Pair Group(s) %s in use by Port Chain %s.", pyList(ppgs), other.ID)
		}
	}
	for _, id := range fcs {
		if c := db.chainOfClassifier(id); c != nil && c.ID != pcID {
			return nil, inUse("FlowClassifierInUse", "Flow Classifier %s in use.", id)
		}
	}
	for _, other := range db.PortChains {
		if other.ID == pcID {
			continue
		}
		for _, ofc := range other.FlowClassifiers {
			for _, id := range fcs {
				// networking-sfc compares header fields only; sfclab also needs the same
				// logical source port, as lab files do (sfc.Validate): classification
				// happens there, and a service graph's destination chain classifies the
				// very traffic of its source chain (on another port).
				if a, b := db.fc(ofc), db.fc(id); fcConflict(a, b, false) && eqOrNil(a.LogicalSourcePort, b.LogicalSourcePort) {
					return nil, badRequest("PortChainFlowClassifierInConflict",
						"Flow Classifier %s conflicts with Flow Classifier %s in port chain %s.", id, ofc, other.ID)
				}
			}
		}
	}
	for _, id := range ppgs {
		for _, ppID := range db.ppg(id).PortPairs {
			if c := db.pp(ppID).ServiceFunctionParameters.Correlation; c != nil && *c != correlation {
				return nil, badRequest("PortChainInconsistentCorrelations",
					"Port Chain attempted creation included a Port Pair Group (%s) with a different protocol used as correlation type.", id)
			}
		}
	}
	return ls, nil
}

func createPC(s *Server, ctx context.Context, f fields) (any, error) {
	pc := &PortChain{Resource: Resource{ID: uuid.NewString()}, FlowClassifiers: []string{}, ChainParameters: ChainParameters{Correlation: "mpls"}}
	if err := nameAndDescription(f, &pc.Name, &pc.Description); err != nil {
		return nil, err
	}
	if err := tenant(f, &pc.TenantID, &pc.ProjectID); err != nil {
		return nil, err
	}
	if err := requireField(f, "port_pair_groups"); err != nil {
		return nil, err
	}
	ppgs, _, err := f.uuidList("port_pair_groups")
	if err != nil {
		return nil, err
	}
	if len(ppgs) == 0 {
		return nil, badRequest("PortPairGroupNotSpecified", "Port Pair Group is not specified in Port Chain.")
	}
	pc.PortPairGroups = ppgs
	if fcs, ok, err := f.uuidList("flow_classifiers"); err != nil {
		return nil, err
	} else if ok {
		pc.FlowClassifiers = fcs
	}
	if raw, ok := f["chain_id"]; ok && !isNull(raw) {
		n, ok := toInt(raw)
		if !ok {
			return nil, badRequest("InvalidInput", "Invalid input for operation: '%s' is not an integer.", pyStr(raw))
		}
		if n < 0 {
			return nil, invalidInput("chain_id", "'%d' is too small - must be at least '0'", n)
		}
		if n > maxChainID {
			return nil, invalidInput("chain_id", "'%d' is too large - must be no larger than '%d'", n, maxChainID)
		}
		pc.ChainID = n
	}
	params, _, err := f.object("chain_parameters")
	if err != nil {
		return nil, err
	}
	for k := range params {
		if k != "correlation" && k != "symmetric" {
			return nil, invalidInput("chain_parameters", "Unexpected keys supplied: %s", strings.Join(sortedKeys(params), ", "))
		}
	}
	for k, raw := range params {
		switch k {
		case "correlation":
			v, err := (fields{"c": raw}).optStr("c")
			if err != nil || v == nil || (*v != "mpls" && *v != "nsh") {
				return nil, invalidInput("chain_parameters", "%s is not in valid_values", pyStr(raw))
			}
			pc.ChainParameters.Correlation = *v
		case "symmetric":
			b, ok := toBool(raw)
			if !ok {
				return nil, badRequest("InvalidInput", "Invalid input for operation: '%s' cannot be converted to boolean.", pyStr(raw))
			}
			pc.ChainParameters.Symmetric = b
		}
	}
	ls, err := s.chainLab(pc.PortPairGroups, pc.FlowClassifiers, "", pc.ChainParameters.Correlation)
	if err != nil {
		return nil, err
	}
	if err := checkSymmetric(ls.db, pc); err != nil {
		return nil, err
	}
	db := ls.db
	used := map[int]string{}
	for _, o := range db.PortChains {
		used[o.ChainID] = o.ID
	}
	if pc.ChainID == 0 {
		for pc.ChainID = 1; used[pc.ChainID] != ""; pc.ChainID++ {
		}
		if pc.ChainID > maxChainID {
			return nil, badRequest("PortChainUnavailableChainId", "Port Chain %s no available chain id.", pc.ID)
		}
	} else if other := used[pc.ChainID]; other != "" {
		return nil, badRequest("PortChainChainIdInConflict", "Chain id %d conflicts with Chain id in port chain %s.", pc.ChainID, other)
	}
	c, err := s.resolve(ls, pc)
	if err != nil {
		return nil, err
	}
	if err := s.checkChain(ctx, c); err != nil {
		return nil, err
	}
	// Write ahead: a server killed from here on finds the mark at start and removes the
	// chain from the data plane.
	db.Pending = &pending{Op: "create_port_chain", Chains: []string{pc.ID}, Since: time.Now().UTC()}
	if err := db.save(ls.dir); err != nil {
		db.Pending = nil
		return nil, err
	}
	abort := func(cause error) error {
		db.PortChains = remove(db.PortChains, pc)
		if err := s.cfg.DataPlane.RemoveChain(ctx, db.Lab, pc.ID); err != nil {
			s.cfg.Log("remove chain %s after a failed create: %v", pc.ID, err)
		}
		db.Pending = nil
		if err := db.save(ls.dir); err != nil {
			s.cfg.Log("clear pending chain %s: %v", pc.ID, err)
		}
		return cause
	}
	if err := s.cfg.DataPlane.ApplyChain(ctx, c); err != nil {
		return nil, abort(driverError("create_port_chain", err))
	}
	db.PortChains = append(db.PortChains, pc)
	db.Pending = nil
	if err := db.save(ls.dir); err != nil {
		return nil, abort(err)
	}
	return pc, nil
}

func updatePC(s *Server, ctx context.Context, ls *labState, id string, f fields) (any, error) {
	db := ls.db
	pc := db.pc(id)
	next := *pc
	if err := nameAndDescription(f, &next.Name, &next.Description); err != nil {
		return nil, err
	}
	ppgs, ppgChanged, err := f.uuidList("port_pair_groups")
	if err != nil {
		return nil, err
	}
	fcs, fcChanged, err := f.uuidList("flow_classifiers")
	if err != nil {
		return nil, err
	}
	if (ppgChanged || fcChanged) && db.graphOfChain(id) != nil {
		return nil, inUse("ServiceGraphPortChainInUse", "Port Chain %s in use.", id)
	}
	if ppgChanged {
		if len(ppgs) == 0 {
			return nil, badRequest("PortPairGroupNotSpecified", "Port Pair Group is not specified in Port Chain.")
		}
		next.PortPairGroups = ppgs
	}
	if fcChanged {
		next.FlowClassifiers = fcs
	}
	if ppgChanged || fcChanged {
		nls, err := s.chainLab(next.PortPairGroups, next.FlowClassifiers, id, next.ChainParameters.Correlation)
		if err != nil {
			return nil, err
		}
		if nls != ls {
			return nil, badRequest("InvalidInput", "Invalid input for operation: port chain %s is in lab %s; its groups and classifiers must stay there.", id, db.Lab)
		}
		if err := checkSymmetric(db, &next); err != nil {
			return nil, err
		}
		c, err := s.resolve(ls, &next)
		if err != nil {
			return nil, err
		}
		if err := s.checkChain(ctx, c); err != nil {
			return nil, err
		}
		if err := s.cfg.DataPlane.ApplyChain(ctx, c); err != nil {
			s.reapply(ctx, ls, pc)
			return nil, driverError("update_port_chain", err)
		}
	}
	old := *pc
	*pc = next
	if err := db.save(ls.dir); err != nil {
		*pc = old
		s.reapply(ctx, ls, pc)
		return nil, err
	}
	return pc, nil
}

// reapply puts a stored chain back into the data plane after a failed change.
func (s *Server) reapply(ctx context.Context, ls *labState, pc *PortChain) {
	c, err := s.resolve(ls, pc)
	if err == nil {
		err = s.cfg.DataPlane.ApplyChain(ctx, c)
	}
	if err != nil {
		s.cfg.Log("restore chain %s: %v", pc.ID, err)
	}
}

func deletePC(s *Server, ctx context.Context, ls *labState, id string) error {
	if ls.db.graphOfChain(id) != nil {
		return inUse("ServiceGraphPortChainInUse", "Port Chain %s in use.", id)
	}
	if err := s.cfg.DataPlane.RemoveChain(ctx, ls.db.Lab, id); err != nil {
		return driverError("delete_port_chain", err)
	}
	pc := ls.db.pc(id)
	if err := s.commitRemove(ls, func(db *labDB) { db.PortChains = remove(db.PortChains, pc) }); err != nil {
		s.reapply(ctx, ls, pc)
		return err
	}
	return nil
}

// resolve is a chain (stored, or about to be) as the data plane receives it.
func (s *Server) resolve(ls *labState, pc *PortChain) (*Chain, error) {
	db := ls.db
	c := &Chain{Lab: db.Lab, ID: pc.ID, Name: pc.Name, ChainID: pc.ChainID,
		Symmetric: pc.ChainParameters.Symmetric, Correlation: pc.ChainParameters.Correlation, LabFile: db.fileName(pc.ID)}
	for _, id := range pc.FlowClassifiers {
		fc := db.fc(id)
		if fc == nil {
			return nil, fmt.Errorf("resolve chain %s: flow classifier %s is gone", pc.ID, id)
		}
		cl, err := s.classifierOf(fc)
		if err != nil {
			return nil, err
		}
		cl.LabFile = db.fileName(fc.ID)
		c.Classifiers = append(c.Classifiers, cl)
	}
	for _, id := range pc.PortPairGroups {
		g := db.ppg(id)
		if g == nil {
			return nil, fmt.Errorf("resolve chain %s: port pair group %s is gone", pc.ID, id)
		}
		hop := Group{ID: g.ID, GroupID: g.GroupID, Tap: g.TapEnabled, LBFields: append([]string{}, g.PortPairGroupParameters.LBFields...),
			LabFile: db.fileName(g.ID)}
		for _, ppID := range g.PortPairs {
			pp := db.pp(ppID)
			if pp == nil {
				return nil, fmt.Errorf("resolve chain %s: port pair %s is gone", pc.ID, ppID)
			}
			in, _ := s.findPort(pp.Ingress)
			out, _ := s.findPort(pp.Egress)
			if in == nil || out == nil {
				return nil, fmt.Errorf("resolve chain %s: a port of port pair %s is gone", pc.ID, ppID)
			}
			hop.Pairs = append(hop.Pairs, Pair{ID: pp.ID, Weight: pp.ServiceFunctionParameters.Weight, Ingress: refOf(in), Egress: refOf(out),
				LabFile: db.fileName(pp.ID)})
		}
		c.Groups = append(c.Groups, hop)
	}
	return c, nil
}

// checkSymmetric refuses a symmetric chain with a classifier that has no
// logical_destination_port, as networking-sfc's OVS driver does (create_port_chain_precommit,
// its message word for word): the reverse path is classified at that port. The dummy driver
// accepts such a chain and programs nothing; sfclab refuses it on every kind of lab.
func checkSymmetric(db *labDB, pc *PortChain) error {
	if !pc.ChainParameters.Symmetric {
		return nil
	}
	for _, id := range pc.FlowClassifiers {
		if db.fc(id).LogicalDestinationPort == nil {
			return badRequest("SfcBadRequest", "FlowClassifier %s does not setlogical_destination_port. logical_destination_port needed when symmetric has been set. "+
				"Please recreate FlowClassifier with logical_destination_port and destination_ip_prefix.", id)
		}
	}
	return nil
}

// checkChain asks a Checker data plane whether it can steer c: nil, its 400, or a 500.
func (s *Server) checkChain(ctx context.Context, c *Chain) error {
	ck, ok := s.cfg.DataPlane.(Checker)
	if !ok {
		return nil
	}
	return checked("check_port_chain", ck.CheckChain(ctx, c))
}

// checked is a Checker's answer as the API gives it: an *Error as it is, another error as
// SfcDriverError.
func checked(method string, err error) error {
	var e *Error
	if err == nil || errors.As(err, &e) {
		return err
	}
	return driverError(method, err)
}
