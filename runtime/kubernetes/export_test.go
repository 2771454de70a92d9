package kubernetes

import "context"

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
