package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/uuid"
)

var fcKind = &kind{
	plural: "flow_classifiers", singular: "flow_classifier", attrs: fcAttrs,
	notFound: func(id string) *Error {
		return notFound("FlowClassifierNotFound", "Flow Classifier %s not found.", id)
	},
	items:  func(db *labDB) []any { return items(db.FlowClassifiers) },
	find:   func(db *labDB, id string) any { return found(db.fc(id)) },
	create: createFC,
	update: func(s *Server, _ context.Context, ls *labState, id string, f fields) (any, error) {
		fc := ls.db.fc(id)
		old := *fc
		if err := nameAndDescription(f, &fc.Name, &fc.Description); err != nil {
			return nil, err
		}
		if err := ls.db.save(ls.dir); err != nil {
			*fc = old
			return nil, err
		}
		return fc, nil
	},
	del: func(s *Server, _ context.Context, ls *labState, id string) error {
		if ls.db.chainOfClassifier(id) != nil {
			return inUse("FlowClassifierInUse", "Flow Classifier %s in use.", id)
		}
		return s.commitRemove(ls, func(db *labDB) { db.FlowClassifiers = remove(db.FlowClassifiers, db.fc(id)) })
	},
}

// commitRemove removes a resource from the stored state, putting it back if the state cannot
// be written.
func (s *Server) commitRemove(ls *labState, rm func(db *labDB)) error {
	before := *ls.db
	rm(ls.db)
	if err := ls.db.save(ls.dir); err != nil {
		*ls.db = before
		return err
	}
	return nil
}

var (
	fcProtocols  = []string{"tcp", "udp", "icmp"}
	fcEthertypes = []string{"IPv4", "IPv6"}
)

func createFC(s *Server, _ context.Context, f fields) (any, error) {
	fc := &FlowClassifier{Resource: Resource{ID: uuid.NewString()}, Ethertype: "IPv4", L7Parameters: map[string]any{}}
	if err := nameAndDescription(f, &fc.Name, &fc.Description); err != nil {
		return nil, err
	}
	if err := tenant(f, &fc.TenantID, &fc.ProjectID); err != nil {
		return nil, err
	}
	if raw, ok := f["ethertype"]; ok && !isNull(raw) {
		v, err := f.optStr("ethertype")
		i := -1
		if err == nil {
			i = slices.IndexFunc(fcEthertypes, func(e string) bool { return strings.EqualFold(e, *v) })
		}
		if i < 0 {
			return nil, badRequest("FlowClassifierInvalidEthertype",
				"Flow Classifier does not support ethertype %s. Supported ethertype values are ['IPv4', 'IPv6'].", pyStr(raw))
		}
		fc.Ethertype = fcEthertypes[i]
	}
	if raw, ok := f["protocol"]; ok && !isNull(raw) {
		v, err := f.optStr("protocol")
		if err != nil || !slices.Contains(fcProtocols, strings.ToLower(*v)) {
			return nil, badRequest("FlowClassifierInvalidProtocol",
				"Flow Classifier does not support protocol %s. Supported protocol values are ['tcp', 'udp', 'icmp'].", pyStr(raw))
		}
		p := strings.ToLower(*v)
		fc.Protocol = &p
	}
	var err error
	for name, dst := range map[string]**int{
		"source_port_range_min": &fc.SourcePortRangeMin, "source_port_range_max": &fc.SourcePortRangeMax,
		"destination_port_range_min": &fc.DestinationPortRangeMin, "destination_port_range_max": &fc.DestinationPortRangeMax,
	} {
		if *dst, err = f.portValue(name); err != nil {
			return nil, err
		}
	}
	for _, r := range [][2]*int{{fc.SourcePortRangeMin, fc.SourcePortRangeMax}, {fc.DestinationPortRangeMin, fc.DestinationPortRangeMax}} {
		if r[0] != nil && r[1] != nil && *r[0] > *r[1] {
			return nil, badRequest("FlowClassifierInvalidPortRange",
				"Invalid IP protocol port range. min_port_range=%d must be lesser or equal to max_port_range=%d.", *r[0], *r[1])
		}
		if (r[0] != nil || r[1] != nil) && (fc.Protocol == nil || (*fc.Protocol != "tcp" && *fc.Protocol != "udp")) {
			return nil, badRequest("FlowClassifierProtocolRequiredWithPorts", "IP protocol must be TCP or UDP, if port range is given.")
		}
	}
	for name, dst := range map[string]**string{"source_ip_prefix": &fc.SourceIPPrefix, "destination_ip_prefix": &fc.DestinationIPPrefix} {
		if *dst, err = f.prefix(name); err != nil {
			return nil, err
		}
		if *dst != nil {
			p := netip.MustParsePrefix(**dst)
			if p.Addr().Is4() != (fc.Ethertype == "IPv4") {
				return nil, badRequest("FlowClassifierIpPrefixFormatConflictWithEthertype",
					"IP prefix %s format conflicts with ethertype %s.", **dst, fc.Ethertype)
			}
		}
	}
	if fc.LogicalSourcePort, err = f.optUUID("logical_source_port"); err != nil {
		return nil, err
	}
	if fc.LogicalDestinationPort, err = f.optUUID("logical_destination_port"); err != nil {
		return nil, err
	}
	// normalize_l7parameters iterates the value: a list's first element is its "key".
	var l7list []any
	if raw, ok := f["l7_parameters"]; ok && json.Unmarshal(raw, &l7list) == nil && len(l7list) > 0 {
		return nil, badRequest("FlowClassifierInvalidL7Parameter",
			"Invalid Flow Classifier parameters: Unknown key %s.. Supported flow classifier parameters are {}.", pyStr(mustJSON(l7list[0])))
	}
	l7, _, err := f.object("l7_parameters")
	if err != nil {
		return nil, err
	}
	for k := range l7 {
		return nil, badRequest("FlowClassifierInvalidL7Parameter",
			"Invalid Flow Classifier parameters: Unknown key %s.. Supported flow classifier parameters are {}.", k)
	}
	if fc.LogicalSourcePort == nil {
		return nil, badRequest("FlowClassifierBadRequest",
			"Flow Classifier %s does not set logical source port: sfclab, like networking-sfc's OVS driver, needs the port traffic enters the chain by (logical_source_port; list ports with GET /v2.0/ports).", fc.ID)
	}
	src, ls := s.findPort(*fc.LogicalSourcePort)
	if src == nil {
		return nil, notFound("FlowClassifierPortNotFound", "Flow Classifier Neutron Port %s not found.", *fc.LogicalSourcePort)
	}
	if fc.LogicalDestinationPort != nil {
		dst, dls := s.findPort(*fc.LogicalDestinationPort)
		if dst == nil {
			return nil, notFound("FlowClassifierPortNotFound", "Flow Classifier Neutron Port %s not found.", *fc.LogicalDestinationPort)
		}
		if dls != ls {
			return nil, badRequest("InvalidInput", "Invalid input for operation: logical_source_port %s is in lab %s and logical_destination_port %s in lab %s; a classifier stays in one lab.",
				src.ID, src.Lab, dst.ID, dst.Lab)
		}
	}
	for _, other := range ls.db.FlowClassifiers {
		if fcConflict(fc, other, true) {
			return nil, badRequest("FlowClassifierInConflict", "Flow Classifier conflicts with another Flow Classifier %s.", other.ID)
		}
	}
	ls.db.FlowClassifiers = append(ls.db.FlowClassifiers, fc)
	if err := ls.db.save(ls.dir); err != nil {
		ls.db.FlowClassifiers = remove(ls.db.FlowClassifiers, fc)
		return nil, err
	}
	return fc, nil
}

// fcConflict reports whether two classifiers can match the same packet (networking-sfc's
// flowclassifier_basic_conflict; with logical ports, flowclassifier_conflict).
func fcConflict(a, b *FlowClassifier, logical bool) bool {
	if a.Ethertype != b.Ethertype || !eqOrNil(a.Protocol, b.Protocol) ||
		!prefixOverlap(a.SourceIPPrefix, b.SourceIPPrefix) || !prefixOverlap(a.DestinationIPPrefix, b.DestinationIPPrefix) ||
		!rangeOverlap(a.SourcePortRangeMin, a.SourcePortRangeMax, b.SourcePortRangeMin, b.SourcePortRangeMax) ||
		!rangeOverlap(a.DestinationPortRangeMin, a.DestinationPortRangeMax, b.DestinationPortRangeMin, b.DestinationPortRangeMax) {
		return false
	}
	if !logical {
		return true
	}
	return eqOrNil(a.LogicalSourcePort, b.LogicalSourcePort) && eqOrNil(a.LogicalDestinationPort, b.LogicalDestinationPort)
}

func eqOrNil(a, b *string) bool { return a == nil || b == nil || *a == *b }

func prefixOverlap(a, b *string) bool {
	if a == nil || b == nil {
		return true
	}
	pa, ea := netip.ParsePrefix(*a)
	pb, eb := netip.ParsePrefix(*b)
	return ea != nil || eb != nil || pa.Overlaps(pb)
}

func rangeOverlap(amin, amax, bmin, bmax *int) bool {
	first, second := true, true
	if amin != nil && bmax != nil {
		first = *amin <= *bmax
	}
	if amax != nil && bmin != nil {
		second = *bmin <= *amax
	}
	return first && second
}

// classifierOf resolves a stored classifier for the data plane.
func (s *Server) classifierOf(fc *FlowClassifier) (Classifier, error) {
	c := Classifier{ID: fc.ID, Ethertype: fc.Ethertype}
	if fc.Protocol != nil {
		c.Protocol = *fc.Protocol
	}
	// A range given by one bound is open at the other (networking-sfc matches from 0 or up
	// to 65535); no bound at all is any port (0, 0).
	bounds := func(lo, hi *int) (int, int) {
		if lo == nil && hi == nil {
			return 0, 0
		}
		l, h := 0, 65535
		if lo != nil {
			l = *lo
		}
		if hi != nil {
			h = *hi
		}
		if h == 0 {
			c.PortZero = true
		}
		return l, h
	}
	c.SourcePortRangeMin, c.SourcePortRangeMax = bounds(fc.SourcePortRangeMin, fc.SourcePortRangeMax)
	c.DestinationPortRangeMin, c.DestinationPortRangeMax = bounds(fc.DestinationPortRangeMin, fc.DestinationPortRangeMax)
	if fc.SourceIPPrefix != nil {
		c.SourceIPPrefix = *fc.SourceIPPrefix
	}
	if fc.DestinationIPPrefix != nil {
		c.DestinationIPPrefix = *fc.DestinationIPPrefix
	}
	for _, lp := range []struct {
		id  *string
		dst **PortRef
	}{{fc.LogicalSourcePort, &c.LogicalSource}, {fc.LogicalDestinationPort, &c.LogicalDestination}} {
		if lp.id == nil {
			continue
		}
		p, _ := s.findPort(*lp.id)
		if p == nil {
			return c, fmt.Errorf("resolve flow classifier %s: port %s is gone", fc.ID, *lp.id)
		}
		r := refOf(p)
		*lp.dst = &r
	}
	return c, nil
}

func mustJSON(v any) json.RawMessage {
	data, _ := json.Marshal(v)
	return data
}
