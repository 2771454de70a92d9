package kubernetes_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sfclab/sfclab/runtime/kubernetes"
)

// fakeKubectl is a kubectl that runs the agent program of its exec (what follows "--") in this
// test binary, as the agent pod would, and appends its request to $FAKE_KUBECTL_LOG; with
// $FAKE_KUBECTL_OLD it is an agent of an sfclab without sessions.
const fakeKubectl = `#!/bin/sh
while [ "$1" != "--" ]; do shift; done
shift 2
echo "$*" >>"$FAKE_KUBECTL_LOG"
if [ -n "$FAKE_KUBECTL_OLD" ] && [ "$2" = serve ]; then
	echo 'Error: agent: unknown request "serve" (the agent takes: attach, ...)' >&2
	exit 1
fi
exec env SFCLAB_K8S_CLI_CHILD=1 "$FAKE_KUBECTL_BIN" "$@"
`

// TestAgentSessions: requests to an agent pod go on one session (one exec): answers and
// errors come back named by the agent pod, its node and the request; a session idle for
// sessionIdle after its last request closes and the next request opens another; a request to an
// agent pod the API server no longer has fails naming it, with no exec; an agent of an sfclab
// without sessions is asked with one exec per request. Runs the agent program of this binary
// behind a fake kubectl and a fake API server; needs no cluster.
func TestAgentSessions(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "execs")
	if err := os.WriteFile(filepath.Join(dir, "kubectl"), []byte(fakeKubectl), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	t.Setenv("FAKE_KUBECTL_LOG", log)
	t.Setenv("FAKE_KUBECTL_BIN", os.Args[0])
	var anyPod atomic.Bool // every agent pod exists, or only agent-1
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if anyPod.Load() || r.URL.Path == "/api/v1/namespaces/"+kubernetes.AgentNamespace+"/pods/agent-1" {
			w.Write([]byte(`{}`))
			return
		}
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"reason":"NotFound","message":"not found"}`))
	}))
	defer api.Close()
	kc := filepath.Join(dir, "kubeconfig")
	body := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: %q}\nusers:\n- name: u\n  user: {token: x}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n", api.URL)
	if err := os.WriteFile(kc, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	execs := func() []string {
		b, _ := os.ReadFile(log)
		return strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(b)), " ", "_"))
	}
	restore := kubernetes.SetSessionIdle(time.Hour)
	defer restore()
	ports := kubernetes.AgentPortsRequest{Ports: map[string]kubernetes.AgentPortRef{}}
	var ans kubernetes.AgentHostsAnswer
	if err := kubernetes.AgentCall(kc, "n1", "agent-1", kubernetes.AgentPorts, ports, &ans); err != nil || ans.Ports == nil {
		t.Fatalf("ports on a session: %+v, %v", ans, err)
	}
	err := kubernetes.AgentCall(kc, "n1", "agent-1", kubernetes.AgentCounters, kubernetes.AgentDestroyRequest{Lab: "i26w-nomaps"}, nil)
	if want := "sfclab agent agent-1 on node n1: counters: agent counters: "; err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "no steering data plane pinned") {
		t.Errorf("counters of a lab without maps: %v, want %q and the agent's reason", err, want)
	}
	// A request resets the idle time to the one in force: the session closes after it.
	kubernetes.SetSessionIdle(100 * time.Millisecond)
	if err := kubernetes.AgentCall(kc, "n1", "agent-1", kubernetes.AgentPorts, ports, &ans); err != nil {
		t.Fatalf("ports on a session: %v", err)
	}
	if got := execs(); len(got) != 1 || got[0] != "agent_serve" {
		t.Errorf("execs for three requests: %q, want one session", got)
	}
	deadline := time.Now().Add(20 * time.Second)
	for kubernetes.SessionOpen(kc, "agent-1") {
		if time.Now().After(deadline) {
			t.Fatal("an idle session stayed open")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := kubernetes.AgentCall(kc, "n1", "agent-1", kubernetes.AgentPorts, ports, &ans); err != nil {
		t.Fatalf("ports after the idle session closed: %v", err)
	}
	if got := execs(); len(got) != 2 {
		t.Errorf("execs: %q, want a second session after the first closed", got)
	}
	err = kubernetes.AgentCall(kc, "n1", "agent-gone", kubernetes.AgentPorts, ports, &ans)
	if err == nil || !strings.Contains(err.Error(), "sfclab agent agent-gone on node n1") || !strings.Contains(err.Error(), "404") {
		t.Errorf("request to a deleted agent pod: %v, want it named and the API server's 404", err)
	}
	if got := execs(); len(got) != 2 {
		t.Errorf("execs: %q, want none for a deleted agent pod", got)
	}
	// An agent without sessions (another pod: the fallback is remembered by pod).
	t.Setenv("FAKE_KUBECTL_OLD", "1")
	anyPod.Store(true)
	for range 2 {
		ans = kubernetes.AgentHostsAnswer{}
		if err := kubernetes.AgentCall(kc, "n1", "agent-old", kubernetes.AgentPorts, ports, &ans); err != nil || ans.Ports == nil {
			t.Fatalf("ports from an agent without sessions: %+v, %v", ans, err)
		}
	}
	if got := execs(); len(got) != 5 || got[2] != "agent_serve" || got[3] != "agent_ports" || got[4] != "agent_ports" {
		t.Errorf("execs: %q, want one refused session, then one exec per request", got)
	}
}
