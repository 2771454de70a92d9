package studies

import (
	"testing"
)

// Every study's experiment loads from the embedded files, quick and full, on both runtimes,
// and every published figure names a scenario of it (or a platform the report explains).
func TestStudiesLoadAndMatchPublished(t *testing.T) {
	for _, name := range Names() {
		st, err := Get(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, quick := range []bool{false, true} {
			for _, rt := range []string{"", "docker"} {
				e, inputs, err := st.Load(quick, rt)
				if err != nil {
					t.Fatalf("%s quick=%v runtime=%q: %v", name, quick, rt, err)
				}
				if inputs["experiment.yaml"] == nil || len(inputs) < 2 {
					t.Errorf("%s: inputs %v lack the experiment or its labs", name, len(inputs))
				}
				if rt == "docker" {
					for _, s := range e.Scenarios {
						if s.Runtime == "" && s.Plan.Runtime != "docker" {
							t.Errorf("%s: scenario %s not moved to docker", name, s.Name)
						}
					}
				}
			}
		}
		e, _, _ := st.Load(false, "")
		for _, r := range st.Published.Rows {
			if e.Scenario(r.Scenario) == nil {
				t.Errorf("%s: published row names scenario %q the experiment lacks", name, r.Scenario)
			}
		}
		for _, r := range st.Published.HTTP {
			if e.Scenario(r.Scenario) == nil && r.Scenario[:3] != "kvm" {
				t.Errorf("%s: published HTTP row names scenario %q the experiment lacks", name, r.Scenario)
			}
		}
	}
}

func TestUnknownStudy(t *testing.T) {
	if _, err := Get("nope"); err == nil {
		t.Error("unknown study accepted")
	}
}
