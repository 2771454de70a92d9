// Package plantest builds plans from lab files for tests, with the registered kinds: for the
// tests that the lab-deploying helpers (internal/labtest) cannot serve, deploy's and probe's
// own, which labtest imports.
package plantest

import (
	"testing"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// Decode decodes an inline lab file (named test.yaml in errors) and builds its plan; either
// failing fails the test.
func Decode(t testing.TB, yaml string) *plan.Plan {
	t.Helper()
	lab, err := spec.Decode([]byte(yaml), "test.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	return build(t, lab)
}

// Load reads the lab file at path and builds its plan; either failing fails the test.
func Load(t testing.TB, path string) *plan.Plan {
	t.Helper()
	lab, err := spec.Load(path, kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	return build(t, lab)
}

// LoadAs reads the lab file at path, renames the lab (so that a test's lab never clashes
// with a user's, nor with another test's copy of the same file), applies edits in order and
// builds its plan; failing to read or to build fails the test.
func LoadAs(t testing.TB, path, name string, edits ...func(*spec.Lab)) *plan.Plan {
	t.Helper()
	lab, err := spec.Load(path, kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	lab.Name = name
	for _, edit := range edits {
		edit(lab)
	}
	return build(t, lab)
}

func build(t testing.TB, lab *spec.Lab) *plan.Plan {
	t.Helper()
	p, err := plan.Build(lab)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
