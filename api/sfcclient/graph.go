package sfcclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// ServiceGraph is a networking-sfc service graph as the API answers it.
type ServiceGraph struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	// PortChains maps each source port chain's id to its destination chains' ids.
	PortChains map[string][]string `json:"port_chains"`
	ProjectID  string              `json:"project_id"`
}

// ErrGraphNotFound is wrapped by FindServiceGraph's error when nothing has the name or id.
var ErrGraphNotFound = errors.New("no service graph has this name or id")

var uuidRe = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// FindServiceGraph returns the service graph whose id or name is nameOrID, as the OpenStack
// client resolves names: an id first (GET /service_graphs/ID), then the name
// (GET /service_graphs?name=NAME), which must match exactly one graph.
func (c *Client) FindServiceGraph(ctx context.Context, nameOrID string) (*ServiceGraph, error) {
	if uuidRe.MatchString(nameOrID) {
		var out struct {
			ServiceGraph ServiceGraph `json:"service_graph"`
		}
		err := c.do(ctx, http.MethodGet, "/v2.0/sfc/service_graphs/"+nameOrID, nil, &out)
		var ae *APIError
		switch {
		case err == nil:
			return &out.ServiceGraph, nil
		case !errors.As(err, &ae) || ae.Status != http.StatusNotFound:
			return nil, err
		}
	}
	var out struct {
		ServiceGraphs []ServiceGraph `json:"service_graphs"`
	}
	if err := c.do(ctx, http.MethodGet, "/v2.0/sfc/service_graphs?name="+url.QueryEscape(nameOrID), nil, &out); err != nil {
		return nil, err
	}
	switch len(out.ServiceGraphs) {
	case 0:
		return nil, fmt.Errorf("find service graph %q: %w", nameOrID, ErrGraphNotFound)
	case 1:
		return &out.ServiceGraphs[0], nil
	}
	return nil, fmt.Errorf("find service graph: %d service graphs are named %q: give its id", len(out.ServiceGraphs), nameOrID)
}

// UpdateServiceGraph changes a service graph's attributes (networking-sfc lets a PUT change
// name, description and port_chains) and returns the graph as the API answers.
func (c *Client) UpdateServiceGraph(ctx context.Context, id string, attrs map[string]any) (*ServiceGraph, error) {
	var out struct {
		ServiceGraph ServiceGraph `json:"service_graph"`
	}
	if err := c.do(ctx, http.MethodPut, "/v2.0/sfc/service_graphs/"+id, map[string]any{"service_graph": attrs}, &out); err != nil {
		return nil, err
	}
	return &out.ServiceGraph, nil
}

// BranchingPoints renders the graph's port_chains as the OpenStack client's
// --branching-point values: SRC:DST1,DST2, one per source chain, sorted.
func (g *ServiceGraph) BranchingPoints() []string {
	var out []string
	for src, dsts := range g.PortChains {
		out = append(out, src+":"+strings.Join(dsts, ","))
	}
	sort.Strings(out)
	return out
}
