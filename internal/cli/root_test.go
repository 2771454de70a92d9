package cli

import (
	"bytes"
	"testing"

	"github.com/sfclab/sfclab/runtime/kubernetes"
	"github.com/sfclab/sfclab/spec"
)

// TestDeployerRuntimeLog: what a runtime tells the user beside building a lab (the kubernetes
// runtime: destroyed labs swept from the cluster's nodes) goes to the command's terminal
// stream, a line each.
func TestDeployerRuntimeLog(t *testing.T) {
	var w bytes.Buffer
	d := newDeployer(&w)
	k, ok := d.Runtimes[spec.RuntimeKubernetes].(kubernetes.Runtime)
	if !ok {
		t.Fatalf("runtime %s is %T", spec.RuntimeKubernetes, d.Runtimes[spec.RuntimeKubernetes])
	}
	if k.Log == nil {
		t.Fatal("the kubernetes runtime has no Log: what its deploy sweeps is never told")
	}
	k.Log("swept destroyed lab %s from Kubernetes node %s: %s", "old", "kn2", "removed directory /var/lib/sfclab-node/old")
	if got, want := w.String(), "swept destroyed lab old from Kubernetes node kn2: removed directory /var/lib/sfclab-node/old\n"; got != want {
		t.Errorf("terminal got %q, want %q", got, want)
	}
}
