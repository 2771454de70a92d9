package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/results/metric"
)

// Adding a probe touches its package and the registers only (issue 22). The probe below
// exists only in this file: registered with experiment.WithProbe (its settings under
// probes:) and its metric with metric.Define (results/metric), it runs in every trial of `sfclab bench`,
// its samples land in results.db and the report shows them, with no edit anywhere else.

// linksCount is the test probe's metric in the vocabulary: the report shows it under "Other
// measurements"; an undeclared metric would make the report fail.
var linksCount = metric.Define("links", "count", "count", "links in the node")

// links is the test's own probe: it counts the network links in one node of the chain.
type links struct{ node string }

// linksConfig is its settings, a type experiment has never heard of.
type linksConfig struct {
	// Node is "source" (default) or "destination": the chain end whose links are counted.
	Node string `yaml:"node"`
}

type linksKind struct{}

func (linksKind) NewConfig() any { return &linksConfig{} }

func (linksKind) Probe(config any) (probe.Probe, error) {
	c := config.(*linksConfig)
	switch c.Node {
	case "", "source":
		return links{node: "source"}, nil
	case "destination":
		return links{node: "destination"}, nil
	}
	return nil, fmt.Errorf("node %q is not source or destination", c.Node)
}

func (links) Name() string { return "links" }

func (l links) Run(ctx context.Context, env probe.Env, emit func(results.Sample)) error {
	name := env.Chain.Path[0]
	if l.node == "destination" {
		name = env.Chain.Path[len(env.Chain.Path)-1]
	}
	n, err := env.Node(name)
	if err != nil {
		return err
	}
	out, err := n.Output(ctx, nil, "ip", "-o", "link", "show")
	if err != nil {
		return fmt.Errorf("list links in %s: %w", name, err)
	}
	count := strings.Count(strings.TrimSpace(string(out)), "\n") + 1
	emit(probe.NewSample(linksCount.Probe, linksCount.Metric, linksCount.Unit, float64(count), map[string]string{"node": name}))
	return nil
}

// TestNewProbeBench: the test's probe goes through `sfclab bench` on a netns lab: a bad
// setting is refused at load with the file's line, and a run stores its samples (one per
// trial) in results.db and shows them in the report's other metrics.
func TestNewProbeBench(t *testing.T) {
	requireRoot(t)
	privateState(t)
	dir := t.TempDir()
	lab := "name: t-nprobe\nendpoints: {client: {}, server: {}}\nchains: [{from: client, to: server}]\n"
	if err := os.WriteFile(filepath.Join(dir, "lab.yaml"), []byte(lab), 0o644); err != nil {
		t.Fatal(err)
	}
	exp := func(settings string) string {
		f := filepath.Join(dir, "exp.yaml")
		text := "name: t-nprobe\nrepetitions: 2\nscenarios: [{name: base, lab: lab.yaml}]\nprobes:\n  links: " + settings + "\n"
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	if code, _, errOut := run(t, "bench", exp("{node: source}"), "--out", filepath.Join(dir, "never")); code == 0 || !strings.Contains(errOut, "unknown field links") {
		t.Fatalf("before registration: exit %d, %q; want the unknown field refused", code, errOut)
	}
	t.Cleanup(experiment.WithProbe("links", linksKind{}))

	if code, _, errOut := run(t, "bench", exp("{node: middle}"), "--out", filepath.Join(dir, "never")); code == 0 || !strings.Contains(errOut, `exp.yaml:5: links: node "middle" is not source or destination`) {
		t.Fatalf("bad setting: exit %d, %q; want it refused with its line", code, errOut)
	}
	out := filepath.Join(dir, "out")
	code, stdout, errOut := run(t, "bench", exp("{node: destination}"), "--out", out)
	if code != 0 {
		t.Fatalf("bench: exit %d\n%s%s", code, stdout, errOut)
	}
	st, err := results.Open(filepath.Join(out, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	samples, err := st.Samples()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range samples {
		if x.Probe == "links" {
			// lo and the server's one veth.
			if x.Value != 2 || x.Labels["node"] != "server" {
				t.Errorf("sample %+v: want 2 links in server", x)
			}
			got = append(got, fmt.Sprintf("trial %d", x.Trial))
		}
	}
	if strings.Join(got, ",") != "trial 1,trial 2" {
		t.Errorf("links samples in results.db: %v, want one per trial", got)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "## Other measurements") || !strings.Contains(string(md), "| links/count | count | base | node=server | 2 | 2 | 2.000 |") {
		t.Errorf("report.md shows no links row:\n%s", md)
	}
}
