package kubernetes_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime/kubernetes"
	"github.com/sfclab/sfclab/spec"
)

// TestSweepOnDeploy leaves on the node what a destroyed lab leaves on a node that was away
// when it was destroyed (the agent's mark of the lab, an hour old, with a namespace UID the
// cluster does not have; a network namespace name sfc.LAB.NODE; the lab's node directory),
// beside an unmarked name (as a netns lab's on the same machine), then deploys a lab: the
// agent on the deploy's node sweeps the destroyed lab's state and leaves the unmarked name and
// the deployed lab alone.
func TestSweepOnDeploy(t *testing.T) {
	requireCluster(t)
	const stale, unmarked = "k8sa-stale", "k8sa-unmarked"
	marks := kubernetes.LabMarkRoot
	_, marksErr := os.Stat(marks)
	for _, l := range []string{stale, unmarked} {
		ns := plan.NetnsName(l, "n1")
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v %s", ns, err, out)
		}
		t.Cleanup(func() { _ = netdev.DeleteNetns(ns) })
	}
	dir := filepath.Join(kubernetes.NodeStateRoot, stale)
	_, rootErr := os.Stat(kubernetes.NodeStateRoot)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(marks, stale)
	if err := os.MkdirAll(marks, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mark, []byte(`{"lab":"`+stale+`","uid":"00000000-dead-4000-8000-000000000000"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	longAgo := time.Now().Add(-time.Hour)
	if err := os.Chtimes(mark, longAgo, longAgo); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the deployed lab's destroy
		if _, err := os.Stat(filepath.Join(marks, "k8sa-sweep")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the deployed lab's mark is left after its destroy: %v", err)
		}
		os.RemoveAll(dir)
		os.Remove(mark)
		if errors.Is(rootErr, fs.ErrNotExist) {
			os.Remove(kubernetes.NodeStateRoot)
		}
		if errors.Is(marksErr, fs.ErrNotExist) {
			os.Remove(marks)
			os.Remove(filepath.Dir(marks))
		}
	})

	d := deployer(t)
	var told []string
	rt := d.Runtimes[spec.RuntimeKubernetes].(kubernetes.Runtime)
	rt.Log = func(f string, a ...any) {
		line := fmt.Sprintf(f, a...)
		t.Logf("told: %s", line)
		told = append(told, line)
	}
	d.Runtimes[spec.RuntimeKubernetes] = rt
	p, _ := deployed(t, d, loadLab(t, "../../examples/baseline.yaml", "k8sa-sweep", spec.RuntimeKubernetes))
	// The deploy tells what it swept: the one stale lab, its node and what was there.
	want := "swept destroyed lab " + stale + " from Kubernetes node localhost: removed network namespaces " +
		plan.NetnsName(stale, "n1") + "; directory " + dir
	if !slices.Contains(told, want) {
		t.Errorf("the deploy told %q\nwant the line %q", told, want)
	}
	for _, line := range told {
		if strings.Contains(line, unmarked) || strings.Contains(line, p.Lab) {
			t.Errorf("the deploy told a sweep of a lab it did not sweep: %q", line)
		}
	}
	if names, _ := netdev.ListNetns(plan.NetnsName(stale, "")); len(names) > 0 {
		t.Errorf("the destroyed lab's namespace names are left after a deploy: %v", names)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the destroyed lab's node directory %s is left after a deploy: %v", dir, err)
	}
	if _, err := os.Stat(mark); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the destroyed lab's mark %s is left after a deploy: %v", mark, err)
	}
	if names, _ := netdev.ListNetns(plan.NetnsName(unmarked, "")); len(names) != 1 {
		t.Errorf("an unmarked lab's namespace name was swept: %v left, want 1", names)
	}
	if _, err := os.Stat(filepath.Join(marks, p.Lab)); err != nil {
		t.Errorf("the deployed lab has no mark on the node: %v", err)
	}
	if names, _ := netdev.ListNetns(plan.NetnsName(p.Lab, "")); len(names) == 0 {
		t.Errorf("the deployed lab has no namespace names on the node")
	}
}
