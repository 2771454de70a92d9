package spec

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// checkShape reports a node whose YAML shape does not fit the Go type it
// decodes into, in the user's words ("endpoints must be a mapping of name to
// endpoint, got a list") rather than the decoder's Go type names. It returns
// false when it reported, so the caller does not descend further.
func checkShape(file string, n *yaml.Node, t reflect.Type, what string, errs *Errors) bool {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return true // an empty value leaves the zero value; validation says if it is needed
	}
	ok := true
	switch t.Kind() {
	case reflect.Struct:
		if t == reflect.TypeOf(Ref{}) || t == reflect.TypeOf(PortRange{}) {
			return true // their own decoders say what they expect
		}
		// driver: NAME, hosts: [NAME]
		ok = n.Kind == yaml.MappingNode || ((t == reflect.TypeOf(Driver{}) || t == reflect.TypeOf(HostSpec{})) && n.Kind == yaml.ScalarNode)
	case reflect.Map:
		ok = n.Kind == yaml.MappingNode
	case reflect.Slice:
		ok = n.Kind == yaml.SequenceNode
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		_, err := strconv.ParseInt(n.Value, 0, t.Bits())
		ok = n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" && err == nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		_, err := strconv.ParseUint(n.Value, 0, t.Bits())
		ok = n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" && err == nil
	case reflect.Bool:
		ok = n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool"
	case reflect.Float32, reflect.Float64:
		ok = n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!int" || n.ShortTag() == "!!float")
	case reflect.String:
		ok = n.Kind == yaml.ScalarNode
	}
	if !ok {
		*errs = append(*errs, &Error{File: file, Pos: pos(n), Msg: fmt.Sprintf("%s must be %s, got %s", strings.TrimPrefix(what, "lab."), describe(t), got(n))})
	}
	return ok
}

// describe says in words what a value of Go type t looks like in YAML.
func describe(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Map:
		return "a mapping of name to " + noun(t.Elem())
	case reflect.Slice:
		return "a list of " + plural(noun(t.Elem()))
	case reflect.Struct:
		return "a mapping (" + article(noun(t)) + ")"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("a whole number from 0 to %d", uint64(1)<<t.Bits()-1)
	case reflect.Bool:
		return "true or false"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a text value"
	}
	return "a " + noun(t)
}

// noun names a Go type as the lab file's documentation does: Endpoint ->
// "endpoint", FirewallRule -> "firewall rule", []string -> "text value".
func noun(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case reflect.TypeOf(Ref{}):
		return "name"
	case reflect.TypeOf(PortRange{}):
		return "port or port range"
	}
	switch t.Kind() {
	case reflect.Struct:
		return words(t.Name())
	case reflect.String:
		return "text value"
	case reflect.Bool:
		return "true/false value"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "whole number"
	case reflect.Map, reflect.Slice:
		return strings.TrimPrefix(strings.TrimPrefix(describe(t), "a "), "an ")
	}
	return "value"
}

// words splits a Go name into lower-case words: "FirewallRule" -> "firewall rule",
// "L4LBParams" -> "l4lb params".
func words(name string) string {
	var b strings.Builder
	rs := []rune(name)
	for i, r := range rs {
		if i > 0 && unicode.IsUpper(r) && (unicode.IsLower(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
			b.WriteByte(' ')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

func plural(s string) string {
	switch {
	case strings.HasSuffix(s, " range"), strings.HasSuffix(s, "value"), strings.HasSuffix(s, "number"):
		return s + "s"
	case strings.HasSuffix(s, "s"), strings.HasSuffix(s, "x"):
		return s + "es"
	}
	return s + "s"
}

func article(s string) string {
	if s != "" && strings.ContainsRune("aeiou", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}

// got describes a YAML node for a message: "a list", "a mapping", "`two`".
func got(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	return "`" + n.Value + "`"
}

var (
	unmarshalRE = regexp.MustCompile("cannot unmarshal !!(\\w+)(?: `(.*)`)? into (\\S+)")
	notFoundRE  = regexp.MustCompile(`field (\S+) not found in type \w+\.(\w+)`)
)

// UserWords rewrites what the YAML decoder says in Go terms ("cannot
// unmarshal !!seq into map[string]*spec.Endpoint", "field pong not found in
// type experiment.Probes") into the user's ("expected a mapping of name to
// endpoint, got a list", "unknown field pong in probes"), for the errors
// checkShape does not catch first and for other YAML files (experiments).
func UserWords(msg string) string {
	msg = notFoundRE.ReplaceAllStringFunc(msg, func(m string) string {
		sub := notFoundRE.FindStringSubmatch(m)
		return "unknown field " + sub[1] + " in " + words(sub[2])
	})
	return unmarshalRE.ReplaceAllStringFunc(msg, func(m string) string {
		sub := unmarshalRE.FindStringSubmatch(m)
		g := map[string]string{"seq": "a list", "map": "a mapping"}[sub[1]]
		if g == "" {
			g = "`" + sub[2] + "`"
		}
		return "expected " + goTypeWords(sub[3]) + ", got " + g
	})
}

// goTypeWords describes a Go type as the decoder prints it.
func goTypeWords(s string) string {
	s = strings.TrimLeft(s, "*")
	switch {
	case strings.HasPrefix(s, "map[string]"):
		return "a mapping of name to " + strings.TrimPrefix(strings.TrimPrefix(goTypeWords(s[len("map[string]"):]), "a "), "an ")
	case strings.HasPrefix(s, "[]"):
		return "a list of " + plural(strings.TrimPrefix(strings.TrimPrefix(goTypeWords(s[2:]), "a "), "an "))
	case strings.Contains(s, "."):
		_, name, _ := strings.Cut(s, ".")
		if name == "plain" {
			return "a mapping"
		}
		return article(words(name))
	case strings.HasPrefix(s, "int"), strings.HasPrefix(s, "uint"):
		return "a whole number"
	case s == "bool":
		return "true or false"
	case s == "float64", s == "float32":
		return "a number"
	case s == "string":
		return "a text value"
	}
	return "a value of another form"
}
