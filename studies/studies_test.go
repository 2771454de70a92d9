package studies

import (
	"regexp"
	"strings"
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
		for _, scale := range []Scale{Full, Quick, Standard} {
			if scale == Standard && st.Standard == nil {
				if _, _, err := st.Load(scale, ""); err == nil {
					t.Errorf("%s: --standard without a standard scale: no error", name)
				}
				continue
			}
			for _, rt := range []string{"", "docker"} {
				if rt == "docker" && st.NetnsOnly {
					if _, _, err := st.Load(scale, rt); err == nil {
						t.Errorf("%s: netns-only study loaded on docker", name)
					}
					continue
				}
				e, inputs, err := st.Load(scale, rt)
				if err != nil {
					t.Fatalf("%s scale=%q runtime=%q: %v", name, scale, rt, err)
				}
				if (scale == Full) != (e.Reduced == "") {
					t.Errorf("%s scale=%q: Reduced %q", name, scale, e.Reduced)
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
		e, _, _ := st.Load(Full, "")
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

// TestPublishedCitesReference checks that every study's published figures
// cite the paper (authors, title, venue, year) and name no file path, which
// exists only beside the repository.
func TestPublishedCitesReference(t *testing.T) {
	year := regexp.MustCompile(`\b(19|20)\d\d\b`)
	for _, name := range Names() {
		p := Published(name)
		if p == nil {
			t.Fatalf("%s: no published figures", name)
		}
		if strings.Count(p.Reference, `"`) != 2 || !year.MatchString(p.Reference) || !strings.Contains(p.Reference, ",") {
			t.Errorf("%s: reference %q does not give authors, \"title\", venue and year", name, p.Reference)
		}
		for _, s := range []string{p.Reference, p.Source} {
			if strings.Contains(s, "papers/") || strings.Contains(s, ".txt") {
				t.Errorf("%s: %q names a file", name, s)
			}
		}
	}
}
