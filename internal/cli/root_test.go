package cli

import (
	"bytes"
	"testing"

	"github.com/sfclab/sfclab/runtime/kubernetes"
	"github.com/sfclab/sfclab/runtime/vm"
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

// TestDeployerVMLog: a deploy's guest image build, and the superseded images it removed, are
// told on the command's terminal stream, a line each (the vm runtime's builder logs there).
func TestDeployerVMLog(t *testing.T) {
	var w bytes.Buffer
	d := newDeployer(&w)
	r, ok := d.Runtimes[spec.RuntimeVM].(vm.Runtime)
	if !ok {
		t.Fatalf("runtime %s is %T", spec.RuntimeVM, d.Runtimes[spec.RuntimeVM])
	}
	if r.Images.Log == nil {
		t.Fatal("the vm runtime's image builder has no Log: a deploy's build and what it removed are never told")
	}
	r.Images.Log("guest image %s: removed %d superseded busybox guest image(s) (%d MB): %s", "new", 1, 36, "old")
	if got, want := w.String(), "guest image new: removed 1 superseded busybox guest image(s) (36 MB): old\n"; got != want {
		t.Errorf("terminal got %q, want %q", got, want)
	}
}
