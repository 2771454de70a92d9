package kubernetes

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestEnsureAgentRefuses: with the agent's DaemonSet in place (this program's) but no agent
// pod running on the node, ensureAgent gives up after PodTimeout naming the node; when the
// DaemonSet's node selector (set by hand) excludes the node, it says so at once.
func TestEnsureAgentRefuses(t *testing.T) {
	const self = "/opt/sfclab"
	for _, tc := range []struct {
		name     string
		selector map[string]string
		want     []string
	}{
		{"no pod runs", nil, []string{"wait for the sfclab agent on node n1", "timed out"}},
		{"node selector excludes the node", map[string]string{"sfclab.test/none": "x"},
			[]string{"wait for the sfclab agent on node n1", "no label sfclab.test/none=x of its node selector"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/apis/apps/v1/namespaces/" + AgentNamespace + "/daemonsets/" + AgentName:
					json.NewEncoder(w).Encode(map[string]any{
						"metadata": map[string]any{"annotations": map[string]string{annotationBinary: agentRevision(self)}},
						"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"nodeSelector": tc.selector}}}})
				case "/api/v1/nodes/n1":
					json.NewEncoder(w).Encode(map[string]any{"metadata": map[string]any{"labels": map[string]string{"kubernetes.io/hostname": "n1"}}})
				case "/api/v1/namespaces/" + AgentNamespace + "/pods":
					w.Write([]byte(`{"items":[]}`))
				default:
					w.WriteHeader(http.StatusNotFound)
				}
			}))
			defer srv.Close()
			old := PodTimeout
			PodTimeout = 300 * time.Millisecond
			t.Cleanup(func() { PodTimeout = old })
			c := &client{Server: srv.URL, http: srv.Client()}
			_, err := Runtime{Image: "img:1"}.ensureAgent(context.Background(), c, self, []string{"n1"})
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want %q", err, w)
				}
			}
		})
	}
}
