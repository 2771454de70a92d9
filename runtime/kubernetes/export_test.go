package kubernetes

import (
	"context"
	"time"
)

// SetAfterAttach sets the hook CreateNodes calls once the agents named the pods' namespaces
// (nil: none), for the tests of package kubernetes_test.
func SetAfterAttach(f func(agents map[string]string)) { afterAttach = f }

// LabSlot is the VXLAN slot lab holds on r's cluster (for the cluster tests).
func LabSlot(r Runtime, lab string) (int, bool, error) {
	c, err := r.client()
	if err != nil {
		return 0, false, err
	}
	return labSlot(context.Background(), c, lab)
}

// AgentCall sends one request to agent pod pod on Kubernetes node kn of the cluster kubeconfig
// names, as the runtime does (on a session), for the session tests.
func AgentCall(kubeconfig, kn, pod, op string, req, ans any) error {
	c, err := loadClient(kubeconfig)
	if err != nil {
		return err
	}
	return agentCall(context.Background(), c, kn, pod, op, req, ans)
}

// SetSessionIdle sets how long an idle session stays open and returns a function that sets
// it back.
func SetSessionIdle(d time.Duration) (restore func()) {
	old := sessionIdle
	sessionIdle = d
	return func() { sessionIdle = old }
}

// SessionOpen says whether a session to agent pod pod of the cluster kubeconfig names is open.
func SessionOpen(kubeconfig, pod string) bool {
	sessions.Lock()
	defer sessions.Unlock()
	return sessions.m[kubeconfig+"\x00"+pod] != nil
}

// LabMarkRoot is where the agent marks the labs it builds on its node (sweep.go).
const LabMarkRoot = labMarkRoot
