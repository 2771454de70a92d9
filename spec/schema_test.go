package spec_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// The JSON schema shipped for editors must accept every example and reject what the decoder
// rejects as an unknown field; otherwise editors and sfclab disagree.
func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("../docs/lab-file.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("lab-file.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("lab-file.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func yamlToJSON(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

func TestSchemaAcceptsExamples(t *testing.T) {
	s := compileSchema(t)
	files, _ := filepath.Glob("../examples/*.yaml")
	labs, _ := filepath.Glob("../experiments/labs/*.yaml")
	files = append(append(files, labs...), "testdata/all-kinds.yaml")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(yamlToJSON(t, data)); err != nil {
			t.Errorf("%s: schema rejects it: %v", f, err)
		}
		if _, err := spec.Decode(data, f, kinds.Spec()); err != nil {
			t.Errorf("%s: decoder rejects it: %v", f, err)
		}
	}
}

func TestSchemaRejectsUnknownFields(t *testing.T) {
	s := compileSchema(t)
	for _, bad := range []string{
		"name: x\nendpoints: {client: {}}\nchains: [{from: client, to: client}]\nextra: 1\n",
		"name: x\nendpoints: {client: {}}\nfunctions: {fw: {kind: firewall, params: {polcy: drop}}}\nchains: [{from: client, to: client}]\n",
		"name: x\nendpoints: {client: {}}\nfunctions: {fw: {kind: firewal}}\nchains: [{from: client, to: client}]\n",
		"name: x\nendpoints: {client: {driver: macvtab}}\nchains: [{from: client, to: client}]\n",
		"name: x\nendpoints: {client: {driver: {type: sriov, pff: x}}}\nchains: [{from: client, to: client}]\n",
	} {
		if err := s.Validate(yamlToJSON(t, []byte(bad))); err == nil {
			t.Errorf("schema accepts:\n%s", bad)
		}
	}
}

// TestSchemaKnowsEveryKind checks the schema against the register of kinds: its kind enum
// lists exactly the registered kinds, and each kind's params lists exactly the fields of the
// kind's parameter type. A new kind is documented in the schema, or this fails.
func TestSchemaKnowsEveryKind(t *testing.T) {
	data, err := os.ReadFile("../docs/lab-file.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	type node struct {
		Ref        string           `json:"$ref"`
		Enum       []string         `json:"enum"`
		Const      string           `json:"const"`
		Properties map[string]*node `json:"properties"`
		AllOf      []struct {
			If   node `json:"if"`
			Then node `json:"then"`
		} `json:"allOf"`
	}
	var schema struct {
		Defs map[string]*node `json:"$defs"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	fn := schema.Defs["function"]
	if fn == nil || fn.Properties["kind"] == nil {
		t.Fatal("schema has no $defs.function.properties.kind")
	}
	names := kinds.Names()
	if got := slices.Sorted(slices.Values(fn.Properties["kind"].Enum)); !slices.Equal(got, names) {
		t.Errorf("schema kinds %v, registered kinds %v", got, names)
	}
	params := map[string]*node{}
	for _, a := range fn.AllOf {
		if k := a.If.Properties["kind"]; k != nil {
			p := a.Then.Properties["params"]
			if p != nil && p.Ref != "" {
				p = schema.Defs[strings.TrimPrefix(p.Ref, "#/$defs/")]
			}
			params[k.Const] = p
		}
	}
	for _, name := range names {
		p, ok := kinds.Spec().NewParams(name)
		if !ok {
			t.Fatalf("kind %s has no params", name)
		}
		var want []string
		typ := reflect.TypeOf(p).Elem()
		for i := range typ.NumField() {
			if tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("yaml"), ","); tag != "" && tag != "-" {
				want = append(want, tag)
			}
		}
		slices.Sort(want)
		doc := params[name]
		if doc == nil {
			t.Errorf("schema has no params for kind %s (fields %v)", name, want)
			continue
		}
		got := slices.Sorted(maps.Keys(doc.Properties))
		if !slices.Equal(got, want) {
			t.Errorf("schema params of kind %s: %v, its parameter type has %v", name, got, want)
		}
	}
}
