package spec

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Error is one problem in a lab file, at a place.
type Error struct {
	File string
	Pos  Pos
	Msg  string
}

func (e *Error) Error() string { return e.Where() + ": " + e.Msg }

// Where is the error's place: FILE:LINE:COL, FILE:LINE or FILE ("<lab>" when read from bytes).
func (e *Error) Where() string {
	file := e.File
	if file == "" {
		file = "<lab>"
	}
	switch {
	case e.Pos.Line > 0 && e.Pos.Col > 0:
		return fmt.Sprintf("%s:%d:%d", file, e.Pos.Line, e.Pos.Col)
	case e.Pos.Line > 0:
		return fmt.Sprintf("%s:%d", file, e.Pos.Line)
	}
	return file
}

// Errors is every problem found in one file, in file order.
type Errors []*Error

func (es Errors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Load reads, decodes and validates a lab file; kinds are the function kinds it may use
// (vnf/kinds.Spec()).
func Load(path string, kinds Kinds) (*Lab, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("read lab file: %s does not exist", path)
		}
		return nil, fmt.Errorf("read lab file: %w", err)
	}
	lab, err := Decode(data, path, kinds)
	if err != nil {
		return nil, err
	}
	lab.Dir = filepath.Dir(path)
	return lab, nil
}

// Decode decodes and validates a lab from YAML. Unknown fields, type mismatches and invalid
// values are all reported, each with file:line:col. file names the source in messages; kinds
// are the function kinds the lab may use and give each function's params their type
// (vnf/kinds.Spec()).
func Decode(data []byte, file string, kinds Kinds) (*Lab, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(file, err)
	}
	if root.Kind == 0 || len(root.Content) == 0 {
		return nil, &Error{File: file, Msg: "the lab file is empty; see docs/lab-file.md"}
	}
	doc := root.Content[0]
	var errs Errors
	kinds = kindsOr(kinds)
	k := known{file: file, kinds: kinds, errs: &errs}
	k.check(doc, reflect.TypeOf(Lab{}), "lab")
	if len(errs) > 0 {
		return nil, errs
	}
	lab := &Lab{File: file}
	if err := decodeLab(doc, lab, kinds); err != nil {
		return nil, yamlError(file, err)
	}
	lab.File, lab.Kinds = file, kinds
	if errs := Validate(lab); len(errs) > 0 {
		return nil, errs
	}
	return lab, nil
}

var yamlLine = regexp.MustCompile(`line (\d+): `)

// yamlError turns a yaml.v3 error into file:line messages.
func yamlError(file string, err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		var errs Errors
		for _, m := range te.Errors {
			errs = append(errs, lineError(file, UserWords(m)))
		}
		return errs
	}
	var pe *Error
	if errors.As(err, &pe) {
		pe.File = file
		return pe
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	return lineError(file, UserWords(msg))
}

func lineError(file, msg string) *Error {
	e := &Error{File: file, Msg: msg}
	if m := yamlLine.FindStringSubmatchIndex(msg); m != nil {
		e.Pos.Line, _ = strconv.Atoi(msg[m[2]:m[3]])
		e.Msg = msg[:m[0]] + msg[m[1]:]
	}
	e.Msg = strings.TrimSpace(e.Msg)
	return e
}

func pos(n *yaml.Node) Pos { return Pos{Line: n.Line, Col: n.Column} }

// decodeAt decodes n into plain (a pointer to a method-less copy of the caller's type, so
// the caller's UnmarshalYAML is not called again) and sets *at to where n was.
func decodeAt(n *yaml.Node, plain any, at *Pos) error {
	if err := n.Decode(plain); err != nil {
		return err
	}
	*at = pos(n)
	return nil
}

// decodeFieldsAt is decodeAt that also keeps where each of n's fields was.
func decodeFieldsAt(n *yaml.Node, plain any, at *Pos, fields *map[string]Pos) error {
	if err := decodeAt(n, plain, at); err != nil {
		return err
	}
	*fields = fieldPositions(n)
	return nil
}

// decodeLab decodes the document into lab, then each function's params into its kind's type.
// Errors come out as from one pass over the file: type errors gathered in file order, or else
// the first error that stops decoding.
func decodeLab(doc *yaml.Node, lab *Lab, kinds Kinds) error {
	var typeErrs []string
	var stop error
	if err := doc.Decode(lab); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			stop = err // the functions decoded so far come before it in the file
		} else {
			typeErrs = te.Errors
		}
	}
	fns := make([]*Function, 0, len(lab.Functions))
	for _, f := range lab.Functions {
		if f != nil {
			fns = append(fns, f)
		}
	}
	sort.Slice(fns, func(i, j int) bool {
		a, b := fns[i].Pos, fns[j].Pos
		return a.Line < b.Line || (a.Line == b.Line && a.Col < b.Col)
	})
	decoders := make([]func(Kinds) error, 0, len(fns)+len(lab.Endpoints))
	for _, f := range fns {
		decoders = append(decoders, f.decodeParams)
	}
	for _, n := range slices.Sorted(maps.Keys(lab.Endpoints)) {
		if e := lab.Endpoints[n]; e != nil {
			decoders = append(decoders, e.decodeHTTP)
		}
	}
	for _, decode := range decoders {
		if err := decode(kinds); err != nil {
			var te *yaml.TypeError
			if !errors.As(err, &te) {
				return err
			}
			typeErrs = append(typeErrs, te.Errors...)
		}
	}
	if stop != nil {
		return stop
	}
	if len(typeErrs) == 0 {
		return nil
	}
	sort.SliceStable(typeErrs, func(i, j int) bool { return errLine(typeErrs[i]) < errLine(typeErrs[j]) })
	return &yaml.TypeError{Errors: typeErrs}
}

// errLine is the line a yaml error message names ("line N: ..."), 0 when none.
func errLine(msg string) int {
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// decodeParams decodes the function's params: node into a fresh value of its kind's
// parameter type and fills in its defaults; an unknown kind is left to validation.
func (f *Function) decodeParams(kinds Kinds) error {
	n := f.params
	f.params = nil
	p, ok := kinds.NewParams(f.Kind)
	if !ok {
		return nil // reported by validation, with the list of kinds
	}
	if n != nil && n.Kind != 0 {
		if err := n.Decode(p); err != nil {
			return err
		}
	}
	setDefaults(p)
	f.Params = p
	return nil
}

// decodeHTTP decodes the endpoint's http: node into a fresh value of the http-server kind's
// parameter type (defaults are validation's, which knows the endpoint's kind).
func (e *Endpoint) decodeHTTP(kinds Kinds) error {
	if e.http == nil || e.http.Kind == 0 {
		return nil
	}
	p, ok := kinds.NewParams(EndpointHTTPServer)
	if !ok {
		return nil // reported by validation
	}
	if err := e.http.Decode(p); err != nil {
		return err
	}
	e.HTTP = p
	return nil
}

// known reports keys a YAML node has and its Go type does not; a function's params are
// checked against the parameter type of its kind.
type known struct {
	file  string
	kinds Kinds
	errs  *Errors
}

// check walks a YAML node against a Go type and reports keys the type does not have.
func (kn known) check(n *yaml.Node, t reflect.Type, what string) {
	file, errs := kn.file, kn.errs
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || !checkShape(file, n, t, what, errs) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode || t == reflect.TypeOf(Ref{}) || t == reflect.TypeOf(PortRange{}) {
			return // type errors are the decoder's to report
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if t == reflect.TypeOf(Function{}) && k.Value == "params" {
				kn.params(n, v)
				continue
			}
			if t == reflect.TypeOf(Endpoint{}) && k.Value == "http" {
				if p, ok := kn.kinds.NewParams(EndpointHTTPServer); ok {
					kn.check(v, reflect.TypeOf(p), what+"."+k.Value)
				}
				continue
			}
			f, ok := fields[k.Value]
			if !ok {
				*errs = append(*errs, &Error{File: file, Pos: pos(k), Msg: fmt.Sprintf("unknown field %q in %s (known: %s)", k.Value, what, strings.Join(slices.Sorted(maps.Keys(fields)), ", "))})
				continue
			}
			kn.check(v, f.Type, what+"."+k.Value)
		}
	case reflect.Slice:
		if n.Kind == yaml.SequenceNode {
			for _, c := range n.Content {
				kn.check(c, t.Elem(), what+" item")
			}
		}
	case reflect.Map:
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				kn.check(n.Content[i+1], t.Elem(), noun(t.Elem())+" "+n.Content[i].Value)
			}
		}
	}
}

// params checks a function's params against the parameter type of its kind.
func (k known) params(fn, params *yaml.Node) {
	p, ok := k.kinds.NewParams(mapValue(fn, "kind"))
	if !ok {
		return // the unknown kind is reported by validation
	}
	k.check(params, reflect.TypeOf(p), mapValue(fn, "kind")+" params")
}

func mapValue(n *yaml.Node, key string) string {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1].Value
		}
	}
	return ""
}

func yamlFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f
	}
	if t == reflect.TypeOf(Function{}) {
		out["params"] = reflect.StructField{Name: "Params", Type: reflect.TypeOf(map[string]any{})}
	}
	if t == reflect.TypeOf(Endpoint{}) {
		out["http"] = reflect.StructField{Name: "HTTP", Type: reflect.TypeOf(map[string]any{})}
	}
	return out
}

// UnmarshalYAML decodes an endpoint and remembers where it was.
func (e *Endpoint) UnmarshalYAML(n *yaml.Node) error {
	type plain Endpoint
	if err := decodeAt(n, (*plain)(e), &e.Pos); err != nil {
		return err
	}
	e.http = nil
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "http" {
			e.http = n.Content[i+1]
		}
	}
	return nil
}

// UnmarshalYAML decodes a function and keeps its params: node for Decode, which gives it the
// type of the function's kind.
func (f *Function) UnmarshalYAML(n *yaml.Node) error {
	var raw struct {
		Kind      string            `yaml:"kind"`
		Instances int               `yaml:"instances"`
		Weights   []int             `yaml:"weights"`
		Params    yaml.Node         `yaml:"params"`
		Host      string            `yaml:"host"`
		Ports     map[string]string `yaml:"ports"`
		VM        *VM               `yaml:"vm"`
	}
	if err := n.Decode(&raw); err != nil {
		return err
	}
	f.Kind, f.Instances, f.Weights, f.Pos = raw.Kind, raw.Instances, raw.Weights, pos(n)
	f.Host, f.Ports, f.VM = raw.Host, raw.Ports, raw.VM
	if raw.Params.Kind != 0 {
		f.params = &raw.Params
	}
	return nil
}

// UnmarshalYAML decodes a chain and remembers where it was.
func (c *Chain) UnmarshalYAML(n *yaml.Node) error {
	type plain Chain
	return decodeAt(n, (*plain)(c), &c.Pos)
}

// UnmarshalYAML decodes a classifier and remembers where it was.
func (c *Classifier) UnmarshalYAML(n *yaml.Node) error {
	type plain Classifier
	return decodeAt(n, (*plain)(c), &c.Pos)
}

// UnmarshalYAML decodes the addressing block and remembers where it was.
func (a *Addressing) UnmarshalYAML(n *yaml.Node) error {
	type plain Addressing
	return decodeAt(n, (*plain)(a), &a.Pos)
}

// UnmarshalYAML decodes a name reference.
func (r *Ref) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &Error{Pos: pos(n), Msg: "expected a name here"}
	}
	r.Name, r.Pos = n.Value, pos(n)
	return nil
}

// MarshalText encodes a reference as its name.
func (r Ref) MarshalText() ([]byte, error) { return []byte(r.Name), nil }

// UnmarshalYAML decodes a port (5201) or a range ("5000-5100").
func (r *PortRange) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &Error{Pos: pos(n), Msg: "expected a port like 5201 or a range like 5000-5100"}
	}
	pr, err := ParsePortRange(n.Value)
	if err != nil {
		return &Error{Pos: pos(n), Msg: err.Error()}
	}
	*r = pr
	return nil
}

// MarshalText encodes a range as "A" or "A-B".
func (r PortRange) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

func (r PortRange) String() string {
	switch {
	case r.IsZero():
		return ""
	case r.From == r.To:
		return strconv.Itoa(int(r.From))
	}
	return fmt.Sprintf("%d-%d", r.From, r.To)
}

// ParsePortRange parses "5201" or "5000-5100".
func ParsePortRange(s string) (PortRange, error) {
	a, b, isRange := strings.Cut(strings.TrimSpace(s), "-")
	from, err := parsePort(a)
	if err != nil {
		return PortRange{}, err
	}
	to := from
	if isRange {
		if to, err = parsePort(b); err != nil {
			return PortRange{}, err
		}
		if to < from {
			return PortRange{}, fmt.Errorf("port range %q runs backwards", s)
		}
	}
	return PortRange{From: from, To: to}, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	return uint16(n), nil
}

// UnmarshalText decodes "A" or "A-B" ("" is any port), as stored plans write them.
func (r *PortRange) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*r = PortRange{}
		return nil
	}
	pr, err := ParsePortRange(string(b))
	if err != nil {
		return err
	}
	*r = pr
	return nil
}
