package studies

import (
	"regexp"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/experiment"
)

// allOwnRuntime says whether every scenario of st's experiment names its own runtime.
func allOwnRuntime(t *testing.T, st *Study) bool {
	t.Helper()
	e, _, err := st.Load(Full, "")
	if err != nil {
		t.Fatalf("load %s: %v", st.Name, err)
	}
	for _, sc := range e.Scenarios {
		if sc.Runtime == "" {
			return false
		}
	}
	return true
}

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
				e, inputs, err := st.Load(scale, rt)
				if rt == "docker" && allOwnRuntime(t, st) {
					if err == nil || !strings.Contains(err.Error(), "would change nothing") {
						t.Errorf("%s on docker, every scenario naming its runtime: %v; want refused", name, err)
					}
					continue
				}
				if rt == "docker" && st.NetnsOnly != "" {
					if err == nil || !strings.Contains(err.Error(), st.NetnsOnly) {
						t.Errorf("%s on docker: %v; want refused with %q", name, err, st.NetnsOnly)
					}
					continue
				}
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
		for _, f := range st.Published.Figures {
			for _, s := range f.Scenarios {
				if e.Scenario(s) == nil {
					t.Errorf("%s: figure %s names scenario %q the experiment lacks", name, f.Name, s)
				}
			}
		}
	}
}

func TestUnknownStudy(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"nope", "the studies are http-proxy, openstack-sfc, rtt-background-load, single-host-chain"},
		{"single-hots-chain", "did you mean single-host-chain?"},
		{"http_proxy", "did you mean http-proxy?"},
	} {
		_, err := Get(tc.name)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Get(%q): %v; want an error containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := Get("nope"); err != nil && strings.Contains(err.Error(), "did you mean") {
		t.Errorf("Get(nope): %v; suggests a study far from the name", err)
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

// TestLoadRuntimeVMWithoutFunctions checks that --runtime vm is refused, with what to do, on a
// study whose labs have no function to put into a VM (study D's are endpoints only), and
// accepted on the studies that have VM scenarios.
func TestLoadRuntimeVMWithoutFunctions(t *testing.T) {
	for _, tc := range []struct {
		study   string
		refused bool
	}{
		{"rtt-background-load", true},
		{OpenStackSFC, true},
		{"single-host-chain", false},
		{"http-proxy", false},
	} {
		st, err := Get(tc.study)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = st.Load(Quick, "vm")
		switch {
		case tc.refused && (err == nil || !strings.Contains(err.Error(), "leave out --runtime") && !strings.Contains(err.Error(), "--vm")):
			t.Errorf("%s --runtime vm: %v; want refused, saying what to run instead", tc.study, err)
		case !tc.refused && err != nil:
			t.Errorf("%s --runtime vm: %v; want loaded", tc.study, err)
		}
	}
}

// TestRuntimeFlagOnOwnRuntimes checks that --runtime is never ignored without a word: a study
// whose every scenario names its own runtime (A, B) refuses it, saying which runtime each keeps,
// except --runtime vm where the study has a VM column; where only some scenarios name one, those
// that keep a runtime other than the flag's are recorded for the report.
func TestRuntimeFlagOnOwnRuntimes(t *testing.T) {
	for _, tc := range []struct {
		study, runtime string
		refused        bool
	}{
		{"single-host-chain", "kubernetes", true},
		{"single-host-chain", "docker", true},
		{"http-proxy", "kubernetes", true},
		{"http-proxy", "netns", true},
		{"http-proxy", "vm", false},
		{"rtt-background-load", "docker", false},
	} {
		t.Run(tc.study+"/"+tc.runtime, func(t *testing.T) {
			st, err := Get(tc.study)
			if err != nil {
				t.Fatal(err)
			}
			e, _, err := st.Load(Quick, tc.runtime)
			if tc.refused {
				if err == nil || !strings.Contains(err.Error(), "--runtime "+tc.runtime+" would change nothing") ||
					!strings.Contains(err.Error(), "leave out --runtime") || !strings.Contains(err.Error(), " on netns") {
					t.Errorf("err = %v; want refused, naming each scenario's runtime and what to do", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v; want loaded", err)
			}
			if e.KeptRuntime != nil {
				t.Errorf("KeptRuntime = %v; want none (no scenario names a runtime)", e.KeptRuntime)
			}
		})
	}
	mixed := func() *experiment.Experiment {
		return &experiment.Experiment{Scenarios: []*experiment.Scenario{{Name: "a", Runtime: "netns"}, {Name: "b"}, {Name: "c", Runtime: "docker"}}}
	}
	for _, tc := range []struct {
		runtime string
		want    map[string]string
	}{
		{"kubernetes", map[string]string{"a": "netns", "c": "docker"}},
		{"docker", map[string]string{"a": "netns"}},
		{"", nil},
	} {
		e := mixed()
		if err := (&Study{Name: "mixed"}).keepOwnRuntimes(e, tc.runtime); err != nil {
			t.Fatalf("mixed --runtime %q: %v; want accepted (b names no runtime)", tc.runtime, err)
		}
		if len(e.KeptRuntime) != len(tc.want) {
			t.Errorf("mixed --runtime %q: KeptRuntime = %v, want %v", tc.runtime, e.KeptRuntime, tc.want)
		}
		for k, v := range tc.want {
			if e.KeptRuntime[k] != v {
				t.Errorf("mixed --runtime %q: KeptRuntime = %v, want %v", tc.runtime, e.KeptRuntime, tc.want)
			}
		}
	}
}
