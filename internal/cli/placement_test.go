package cli

import (
	"slices"
	"strings"
	"testing"
)

// TestHostMapping: study C's four hosts go round-robin onto the cluster's nodes in name order,
// one node each from four nodes on, and the sentence names every pair and the merge.
func TestHostMapping(t *testing.T) {
	for _, tc := range []struct {
		nodes []string
		want  string
		merge bool
	}{
		{[]string{"localhost"}, "contr01->localhost, comp02->localhost, comp03->localhost, comp04->localhost", true},
		{[]string{"kn2", "localhost"}, "contr01->kn2, comp02->localhost, comp03->kn2, comp04->localhost", true},
		{[]string{"a", "b", "c", "d", "e"}, "contr01->a, comp02->b, comp03->c, comp04->d", false},
	} {
		m, say := hostMapping(tc.nodes)
		if !strings.HasSuffix(say, ": "+tc.want) {
			t.Errorf("nodes %v: %q, want it to end %q", tc.nodes, say, tc.want)
		}
		if got := strings.Contains(say, "merged"); got != tc.merge {
			t.Errorf("nodes %v: %q says merged %v, want %v", tc.nodes, say, got, tc.merge)
		}
		if len(m) != 4 || m["contr01"] != tc.nodes[0] {
			t.Errorf("nodes %v: mapping %v", tc.nodes, m)
		}
	}
}

// TestByNumber: the deploy-time report lists a node's pods by name stem, then number.
func TestByNumber(t *testing.T) {
	names := []string{"server", "f10", "f2", "client", "f1", "f9", "x"}
	slices.SortFunc(names, byNumber)
	if got, want := strings.Join(names, " "), "client f1 f2 f9 f10 server x"; got != want {
		t.Errorf("sorted %q, want %q", got, want)
	}
}
