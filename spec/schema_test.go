package spec_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
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
		"name: x\nendpoints: {client: {driver: macvtap}}\nchains: [{from: client, to: client}]\n",
		"name: x\nendpoints: {client: {driver: {type: sriov, pff: x}}}\nchains: [{from: client, to: client}]\n",
	} {
		if err := s.Validate(yamlToJSON(t, []byte(bad))); err == nil {
			t.Errorf("schema accepts:\n%s", bad)
		}
	}
}
