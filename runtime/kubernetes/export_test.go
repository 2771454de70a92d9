package kubernetes

// SetAfterAttach sets the hook CreateNodes calls once the agents named the pods' namespaces
// (nil: none), for the tests of package kubernetes_test.
func SetAfterAttach(f func(agents map[string]string)) { afterAttach = f }
