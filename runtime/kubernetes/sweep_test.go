package kubernetes

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sfclab/sfclab/netdev"
)

// TestSweepable is the sweep's decision: a marked lab is removed only when no namespace of its
// UID lives, sfclab's own journal has no lab of its name, and its mark is SweepGrace old.
func TestSweepable(t *testing.T) {
	now := time.Date(2026, 11, 27, 21, 0, 0, 0, time.UTC)
	old, young := now.Add(-SweepGrace-time.Second), now.Add(-SweepGrace+time.Second)
	live := AgentSweepRequest{Live: map[string]string{"a": "uid-a", "b": "uid-b2"}, Local: []string{"c"}}
	for _, tc := range []struct {
		name string
		mark labMark
		req  AgentSweepRequest
		want bool
	}{
		{"namespace gone, mark old", labMark{Lab: "x", UID: "uid-x", Made: old}, live, true},
		{"namespace gone, mark exactly the grace old", labMark{Lab: "x", UID: "uid-x", Made: now.Add(-SweepGrace)}, live, true},
		{"namespace gone, mark young (a deploy racing the list)", labMark{Lab: "x", UID: "uid-x", Made: young}, live, false},
		{"lives, same UID", labMark{Lab: "a", UID: "uid-a", Made: old}, live, false},
		{"lives, mark without UID", labMark{Lab: "a", Made: old}, live, false},
		{"a new namespace of the same name (another UID), mark old", labMark{Lab: "b", UID: "uid-b1", Made: old}, live, true},
		{"a new namespace of the same name, mark young", labMark{Lab: "b", UID: "uid-b1", Made: young}, live, false},
		{"a lab of sfclab's journal (any runtime)", labMark{Lab: "c", UID: "uid-c", Made: old}, live, false},
		{"no lab lives at all", labMark{Lab: "a", UID: "uid-a", Made: old}, AgentSweepRequest{Live: map[string]string{}}, true},
		{"mark without UID, namespace gone", labMark{Lab: "y", Made: old}, live, true},
	} {
		got := sweepable([]labMark{tc.mark}, tc.req, now)
		if (len(got) == 1) != tc.want || len(got) > 1 {
			t.Errorf("%s: sweepable %v, want swept %v", tc.name, got, tc.want)
		}
	}
	marks := []labMark{{Lab: "z", Made: old}, {Lab: "a", UID: "uid-a", Made: old}, {Lab: "m", Made: old}}
	if got := sweepable(marks, live, now); !slices.Equal(got, []string{"m", "z"}) {
		t.Errorf("sweepable of several: %v, want [m z]", got)
	}
}

// TestAgentSweep runs the agent's sweep on this machine, its marks and node directories in
// temporary directories: a destroyed lab's network namespace name, node directory and mark
// go, as does a lab replaced by a new namespace of its name; a live lab's, a young mark's and
// an unmarked lab's namespace names (as a netns lab's on the same machine) stay.
func TestAgentSweep(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED LOUDLY: the sweep removes network namespaces: run as root")
	}
	oldMarks, oldState := labMarkDir, nodeStateRoot
	labMarkDir, nodeStateRoot = filepath.Join(t.TempDir(), "marks", "labs"), filepath.Join(t.TempDir(), "node")
	t.Cleanup(func() { labMarkDir, nodeStateRoot = oldMarks, oldState })
	const dead, replaced, live, young, unmarked = "k8sa-sw-dead", "k8sa-sw-repl", "k8sa-sw-live", "k8sa-sw-young", "k8sa-sw-none"
	longAgo := time.Now().Add(-time.Hour)
	for _, l := range []string{dead, replaced, live, young, unmarked} {
		ns := "sfc." + l + ".n1"
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v %s", ns, err, out)
		}
		t.Cleanup(func() { _ = netdev.DeleteNetns(ns) })
		if err := os.MkdirAll(filepath.Join(nodeStateRoot, l), 0o755); err != nil {
			t.Fatal(err)
		}
		if l == unmarked {
			continue
		}
		if err := markLab(l, "uid-"+l); err != nil {
			t.Fatal(err)
		}
		if l != young {
			if err := os.Chtimes(filepath.Join(labMarkDir, l), longAgo, longAgo); err != nil {
				t.Fatal(err)
			}
		}
	}
	req := AgentSweepRequest{Live: map[string]string{live: "uid-" + live, replaced: "uid-new"}}
	ans, err := agentSweep(req)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{dead, replaced}; !slices.Equal(ans.Swept, want) {
		t.Errorf("swept %v, want %v", ans.Swept, want)
	}
	// What each swept lab had on the node, for the deploy's report (sweptLines).
	for _, l := range []string{dead, replaced} {
		want := []string{"network namespaces sfc." + l + ".n1", "directory " + filepath.Join(nodeStateRoot, l)}
		if got := ans.Removed[l]; !slices.Equal(got, want) {
			t.Errorf("removed of lab %s: %q, want %q", l, got, want)
		}
	}
	if len(ans.Removed) != 2 {
		t.Errorf("removed names %d labs, want the 2 swept: %v", len(ans.Removed), ans.Removed)
	}
	for _, l := range []string{dead, replaced, live, young, unmarked} {
		gone := l == dead || l == replaced
		names, err := netdev.ListNetns("sfc." + l + ".")
		if err != nil {
			t.Fatal(err)
		}
		_, dirErr := os.Stat(filepath.Join(nodeStateRoot, l))
		_, markErr := os.Stat(filepath.Join(labMarkDir, l))
		if gone && (len(names) > 0 || !errors.Is(dirErr, fs.ErrNotExist) || !errors.Is(markErr, fs.ErrNotExist)) {
			t.Errorf("lab %s after the sweep: namespaces %v, directory %v, mark %v; want all gone", l, names, dirErr, markErr)
		}
		if !gone && (len(names) != 1 || dirErr != nil || (l != unmarked && markErr != nil)) {
			t.Errorf("lab %s after the sweep: namespaces %v, directory %v, mark %v; want all kept", l, names, dirErr, markErr)
		}
	}
	if _, err := agentSweep(AgentSweepRequest{}); err == nil {
		t.Error("a sweep with no live labs named (nil) was taken: it would remove every marked lab")
	}
}

// TestSweptLines: a deploy tells each lab an agent swept in one line naming the lab, the
// Kubernetes node and what was removed there (or that only the lab's mark was left).
func TestSweptLines(t *testing.T) {
	for _, tc := range []struct {
		name string
		ans  AgentSweepAnswer
		want []string
	}{
		{name: "nothing swept", ans: AgentSweepAnswer{}, want: nil},
		{name: "two labs", ans: AgentSweepAnswer{Swept: []string{"a", "b"}, Removed: map[string][]string{
			"a": {"network namespaces sfc.a, sfc.a.n1", "steering maps pinned at /sys/fs/bpf/sfclab/a", "directory /var/lib/sfclab-node/a"},
			"b": {"directory /var/lib/sfclab-node/b"},
		}}, want: []string{
			"swept destroyed lab a from Kubernetes node kn2: removed network namespaces sfc.a, sfc.a.n1; steering maps pinned at /sys/fs/bpf/sfclab/a; directory /var/lib/sfclab-node/a",
			"swept destroyed lab b from Kubernetes node kn2: removed directory /var/lib/sfclab-node/b",
		}},
		{name: "only its mark", ans: AgentSweepAnswer{Swept: []string{"c"}}, want: []string{
			"swept destroyed lab c from Kubernetes node kn2: nothing but its mark was left",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sweptLines("kn2", tc.ans); !slices.Equal(got, tc.want) {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}
