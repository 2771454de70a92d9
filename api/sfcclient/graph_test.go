package sfcclient

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// TestFindServiceGraph: a graph is found by id or by its name; a name two graphs share and
// a name nothing has are errors that say so; UpdateServiceGraph and Delete act on the id.
func TestFindServiceGraph(t *testing.T) {
	c, _, _ := serve(t, "api-sgc", 1)
	ctx := context.Background()
	create := func(name string) string {
		var out struct {
			ServiceGraph ServiceGraph `json:"service_graph"`
		}
		body := map[string]any{"service_graph": map[string]any{"name": name, "port_chains": map[string]any{}}}
		if err := c.do(ctx, http.MethodPost, "/v2.0/sfc/service_graphs", body, &out); err != nil {
			t.Fatal(err)
		}
		return out.ServiceGraph.ID
	}
	solo := create("solo")
	create("twin")
	create("twin")
	for _, tc := range []struct {
		nameOrID, wantID, wantErr string
	}{
		{"solo", solo, ""},
		{solo, solo, ""},
		{"twin", "", `2 service graphs are named "twin": give its id`},
		{"none", "", `find service graph "none": no service graph has this name or id`},
		{"00000000-0000-4000-8000-000000000000", "", "no service graph has this name or id"},
	} {
		g, err := c.FindServiceGraph(ctx, tc.nameOrID)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("find %s: %v, %v; want an error saying %q", tc.nameOrID, g, err, tc.wantErr)
			}
		case err != nil || g.ID != tc.wantID:
			t.Errorf("find %s: %v, %v; want graph %s", tc.nameOrID, g, err, tc.wantID)
		}
	}
	if _, err := c.FindServiceGraph(ctx, "none"); !errors.Is(err, ErrGraphNotFound) {
		t.Errorf("not found: %v does not wrap ErrGraphNotFound", err)
	}
	g, err := c.UpdateServiceGraph(ctx, solo, map[string]any{"name": "renamed", "description": "d"})
	if err != nil || g.Name != "renamed" || g.Description != "d" || g.BranchingPoints() != nil {
		t.Errorf("update: %+v, %v", g, err)
	}
	if err := c.Delete(ctx, "service_graphs", solo); err != nil {
		t.Fatal(err)
	}
	if _, err := c.FindServiceGraph(ctx, solo); !errors.Is(err, ErrGraphNotFound) {
		t.Errorf("after delete: %v, want not found", err)
	}
}

func TestBranchingPoints(t *testing.T) {
	g := &ServiceGraph{PortChains: map[string][]string{"b": {"c"}, "a": {"b", "c"}}}
	if got := strings.Join(g.BranchingPoints(), " "); got != "a:b,c b:c" {
		t.Errorf("branching points %q", got)
	}
}
