package api

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestClientVisibleDetails: what the OpenStack client prints beside the attributes is as
// networking-sfc gives it: every answer, errors and 401s too, carries an
// X-Openstack-Request-Id (the client prints it with every error), and a port pair group's
// ppg_n_tuple_mapping lists ingress_n_tuple before egress_n_tuple in lists and shows too (the
// client prints keys in the order answered). Found by scripts/sfc-graph.sh against both servers.
func TestClientVisibleDetails(t *testing.T) {
	h := newHarness(t, fixture(t, "api-oscout"), Config{Token: "tok"})
	_, pp := h.do("POST", "/v2.0/sfc/port_pairs", map[string]any{"port_pair": map[string]any{
		"ingress": PortID("api-oscout", "f1", "ingress"), "egress": PortID("api-oscout", "f1", "egress")}})
	ppID, _ := pp["port_pair"].(map[string]any)["id"].(string)
	_, g := h.do("POST", "/v2.0/sfc/port_pair_groups", map[string]any{"port_pair_group": map[string]any{"port_pairs": []string{ppID}}})
	gID, _ := g["port_pair_group"].(map[string]any)["id"].(string)
	for _, tc := range []struct {
		path, token string
		status      int
	}{
		{"/v2.0/sfc/port_pair_groups", "tok", 200},
		{"/v2.0/sfc/port_pair_groups/" + gID, "tok", 200},
		{"/v2.0/sfc/port_pair_groups/" + gID + "?fields=port_pair_group_parameters", "tok", 200},
		{"/v2.0/sfc/port_chains/" + gID, "tok", 404},
		{"/v2.0/sfc/port_chains", "wrong", 401},
	} {
		req, _ := http.NewRequest("GET", h.url+tc.path, nil)
		req.Header.Set("X-Auth-Token", tc.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s: %d %s, want %d", tc.path, resp.StatusCode, body, tc.status)
		}
		if id := resp.Header.Get("X-Openstack-Request-Id"); !strings.HasPrefix(id, "req-") || len(id) != len("req-")+36 {
			t.Errorf("GET %s: X-Openstack-Request-Id %q, want req-UUID", tc.path, id)
		}
		if tc.status == 200 {
			s := string(body)
			i, e := strings.Index(s, `"ingress_n_tuple"`), strings.Index(s, `"egress_n_tuple"`)
			if i < 0 || e < 0 || i > e {
				t.Errorf("GET %s: ingress_n_tuple not before egress_n_tuple: %s", tc.path, s)
			}
		}
	}
}
