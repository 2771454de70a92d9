package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Neutron's field sizes (neutron_lib.db.constants).
const (
	nameMax        = 255
	descriptionMax = 255
)

// attr says whether an attribute may be set on create (POST) and on update (PUT), as
// networking-sfc's RESOURCE_ATTRIBUTE_MAP does.
type attr struct{ post, put bool }

// common attributes of every resource.
var commonAttrs = map[string]attr{
	"id": {}, "name": {true, true}, "description": {true, true},
	"tenant_id": {true, false}, "project_id": {true, false},
}

func attrs(extra map[string]attr) map[string]attr {
	out := map[string]attr{}
	for k, v := range commonAttrs {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

var (
	fcAttrs = attrs(map[string]attr{
		"ethertype": {post: true}, "protocol": {post: true},
		"source_port_range_min": {post: true}, "source_port_range_max": {post: true},
		"destination_port_range_min": {post: true}, "destination_port_range_max": {post: true},
		"source_ip_prefix": {post: true}, "destination_ip_prefix": {post: true},
		"logical_source_port": {post: true}, "logical_destination_port": {post: true},
		"l7_parameters": {post: true},
	})
	ppAttrs = attrs(map[string]attr{
		"ingress": {post: true}, "egress": {post: true}, "service_function_parameters": {post: true},
	})
	ppgAttrs = attrs(map[string]attr{
		"group_id": {}, "port_pairs": {true, true}, "port_pair_group_parameters": {post: true},
		"tap_enabled": {post: true},
	})
	pcAttrs = attrs(map[string]attr{
		"chain_id": {post: true}, "port_pair_groups": {true, true}, "flow_classifiers": {true, true},
		"chain_parameters": {post: true},
	})
	sgAttrs = attrs(map[string]attr{"port_chains": {post: true}})
)

// fields is a decoded resource body: attribute name to raw JSON value.
type fields map[string]json.RawMessage

// decodeBody reads {"SINGULAR": {...}} from a request, refusing what Neutron refuses: a body
// that is not JSON (MalformedRequestBody), a missing resource key, attributes the resource
// does not have ("Unrecognized attribute(s)"), and attributes that cannot be set by this
// method. A body larger than the server's limit is a 413.
func decodeBody(r *http.Request, singular string, allowed map[string]attr, post bool) (fields, error) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &Error{Status: http.StatusRequestEntityTooLarge, Type: "HTTPRequestEntityTooLarge",
				Message: fmt.Sprintf("Request is too large: the limit is %d bytes.", mbe.Limit)}
		}
		return nil, badRequest("HTTPBadRequest", "read request body: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, badRequest("HTTPBadRequest", "Resource body required")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, badRequest("MalformedRequestBody", "Malformed request body: Cannot understand JSON.")
	}
	inner, ok := top[singular]
	if !ok {
		return nil, badRequest("HTTPBadRequest", "Unable to find '%s' in request body", singular)
	}
	if extra := unknownKeys(top, map[string]attr{singular: {}}); len(extra) > 0 {
		return nil, badRequest("HTTPBadRequest", "Unrecognized attribute(s) '%s'", strings.Join(extra, ", "))
	}
	var f fields
	if err := json.Unmarshal(inner, &f); err != nil || f == nil {
		return nil, badRequest("HTTPBadRequest", "Object '%s' contains invalid data", singular)
	}
	if extra := unknownKeys(f, allowed); len(extra) > 0 {
		return nil, badRequest("HTTPBadRequest", "Unrecognized attribute(s) '%s'", strings.Join(extra, ", "))
	}
	for _, k := range sortedKeys(f) {
		a := allowed[k]
		if post && !a.post {
			return nil, badRequest("HTTPBadRequest", "Attribute '%s' not allowed in POST", k)
		}
		if !post && !a.put {
			return nil, badRequest("HTTPBadRequest", "Cannot update read-only attribute %s", k)
		}
	}
	return f, nil
}

func unknownKeys[V any](m map[string]V, allowed map[string]attr) []string {
	var out []string
	for k := range m {
		if _, ok := allowed[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// str decodes a string attribute of at most max characters; null is "".
func (f fields) str(name string, max int) (string, bool, error) {
	raw, ok := f[name]
	if !ok {
		return "", false, nil
	}
	if isNull(raw) {
		return "", true, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", true, invalidInput(name, "'%s' is not a valid string", string(raw))
	}
	if len(s) > max {
		return "", true, invalidInput(name, "'%s' exceeds maximum length of %d", s, max)
	}
	return s, true, nil
}

// optStr decodes a string attribute that may be null.
func (f fields) optStr(name string) (*string, error) {
	raw, ok := f[name]
	if !ok || isNull(raw) {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, invalidInput(name, "'%s' is not a valid string", string(raw))
	}
	return &s, nil
}

// optUUID decodes a UUID attribute that may be null.
func (f fields) optUUID(name string) (*string, error) {
	s, err := f.optStr(name)
	if err != nil || s == nil {
		return s, err
	}
	if !isUUID(*s) {
		return nil, invalidInput(name, "'%s' is not a valid UUID", *s)
	}
	return s, nil
}

func isUUID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}

// uuidList decodes a list of UUIDs; null is an empty list. A single string is taken as a
// list of one, as neutron_lib's convert_to_list does.
func (f fields) uuidList(name string) ([]string, bool, error) {
	raw, ok := f[name]
	if !ok {
		return nil, false, nil
	}
	if isNull(raw) {
		return []string{}, true, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		var one string
		if json.Unmarshal(raw, &one) != nil {
			return nil, true, invalidInput(name, "'%s' is not a list", string(raw))
		}
		list = []string{one}
	}
	for _, id := range list {
		if !isUUID(id) {
			return nil, true, invalidInput(name, "'%s' is not a valid UUID", id)
		}
	}
	seen := map[string]bool{}
	for _, id := range list {
		if seen[id] {
			return nil, true, invalidInput(name, "Duplicate items in the list: '%s'", id)
		}
		seen[id] = true
	}
	return list, true, nil
}

// portValue decodes a port number (0-65535) given as a number or a numeric string.
func (f fields) portValue(name string) (*int, error) {
	raw, ok := f[name]
	if !ok || isNull(raw) {
		return nil, nil
	}
	n, ok := toInt(raw)
	if !ok || n < 0 || n > 65535 {
		return nil, badRequest("FlowClassifierInvalidPortValue", "Flow Classifier has invalid port value %s.", pyStr(raw))
	}
	return &n, nil
}

// toInt converts a value to an int as Python's int() does in convert_to_int and
// networking-sfc's normalize_port_value: a JSON number (a fraction is truncated), a boolean
// (1 or 0) or a decimal string.
func toInt(raw json.RawMessage) (int, bool) {
	var n json.Number
	if err := json.Unmarshal(raw, &n); err == nil {
		if i, err := strconv.Atoi(n.String()); err == nil {
			return i, true
		}
		f, err := n.Float64()
		if err != nil || f != f || f > 1<<53 || f < -(1<<53) {
			return 0, false
		}
		return int(f), true
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err == nil {
		if b {
			return 1, true
		}
		return 0, true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		i, err := strconv.Atoi(strings.TrimSpace(s))
		return i, err == nil
	}
	return 0, false
}

// toBool converts a JSON boolean or "true"/"false" string, as convert_to_boolean does.
func toBool(raw json.RawMessage) (bool, bool) {
	var b bool
	if err := json.Unmarshal(raw, &b); err == nil {
		return b, true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		switch strings.ToLower(s) {
		case "true", "1", "yes":
			return true, true
		case "false", "0", "no":
			return false, true
		}
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err == nil && (n == "0" || n == "1") {
		return n == "1", true
	}
	return false, false
}

// object decodes a dict attribute into its keys; null is an empty dict.
func (f fields) object(name string) (map[string]json.RawMessage, bool, error) {
	raw, ok := f[name]
	if !ok {
		return nil, false, nil
	}
	if isNull(raw) {
		return map[string]json.RawMessage{}, true, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, true, invalidInput(name, "%s is not a dictionary", pyRepr(decoded(raw)))
	}
	return m, true, nil
}

// prefix validates a subnet attribute (type:subnet_or_none) and returns it as given.
func (f fields) prefix(name string) (*string, error) {
	s, err := f.optStr(name)
	if err != nil || s == nil {
		return s, err
	}
	// neutron_lib's validate_subnet: a prefix with host bits is accepted as given (neutron
	// stores "10.0.0.5/24"); an address without a length is refused with its /32 or /128.
	if _, err := netip.ParsePrefix(*s); err == nil {
		return s, nil
	}
	if a, err := netip.ParseAddr(*s); err == nil {
		return nil, invalidInput(name, "'%s' isn't a recognized IP subnet cidr, '%s' is recommended", *s, netip.PrefixFrom(a, a.BitLen()))
	}
	return nil, invalidInput(name, "'%s' is not a valid IP subnet", *s)
}

func requireField(f fields, name string) error {
	if _, ok := f[name]; !ok {
		return badRequest("HTTPBadRequest", "Failed to parse request. Required attribute '%s' not specified", name)
	}
	return nil
}

func checkAllowed(name string, list []string, allowed []string) error {
	var bad []string
	for _, v := range list {
		if !slices.Contains(allowed, v) {
			bad = append(bad, v)
		}
	}
	if len(bad) > 0 {
		return invalidInput(name, "Illegal values in a list: %s", strings.Join(bad, ", "))
	}
	return nil
}

// pyStr is a JSON value as Python's %s prints the decoded value, as networking-sfc's
// messages show it: strings bare, True/False/None, lists and dicts in Python's repr.
func pyStr(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	if s, ok := v.(string); ok {
		return s
	}
	return pyRepr(v)
}

func pyRepr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case string:
		return "'" + x + "'"
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyRepr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		parts := make([]string, 0, len(x))
		for _, k := range sortedKeys(x) {
			parts = append(parts, "'"+k+"': "+pyRepr(x[k]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}

// decoded is a JSON value decoded into Go's generic types (nil if it is not JSON).
func decoded(raw json.RawMessage) any {
	var v any
	_ = json.Unmarshal(raw, &v)
	return v
}
