package kubernetes

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// files sends one AgentFiles request through AgentMain (JSON in, JSON out), as a session does.
func files(t *testing.T, req AgentFilesRequest) (*AgentFilesAnswer, error) {
	t.Helper()
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := AgentMain([]string{AgentFiles}, bytes.NewReader(in), &out); err != nil {
		if out.Len() != 0 {
			t.Errorf("answered %q on a refusal", out.String())
		}
		return nil, err
	}
	var ans AgentFilesAnswer
	if err := json.Unmarshal(out.Bytes(), &ans); err != nil {
		t.Fatalf("answer %q: %v", out.String(), err)
	}
	return &ans, nil
}

// TestAgentFiles: the agent writes, reads, removes and makes files in a lab's directory on its
// node (nodeStateRoot/LAB, here a temporary directory), and refuses every path that leaves
// it: absolute, "..", a symbolic link out of it (which a pod, root in the directory it
// mounts, could make), a lab name that is no directory name. The lab's destroy removes the
// directory.
func TestAgentFiles(t *testing.T) {
	if nodeRoot() != "" {
		t.Skip("SKIPPED LOUDLY: this process sees a node's root at " + hostRoot + " (it runs in an agent's pod)")
	}
	old := nodeStateRoot
	nodeStateRoot = filepath.Join(t.TempDir(), "node")
	t.Cleanup(func() { nodeStateRoot = old })
	const lab = "k8r-files"
	dir := filepath.Join(nodeStateRoot, lab)
	outside := t.TempDir()

	// Before the lab's directory is made: reads and removals find nothing, writes fail.
	if ans, err := files(t, AgentFilesRequest{Op: FileRead, Lab: lab, Path: "a"}); err != nil || !ans.Missing {
		t.Errorf("read before the directory exists: %+v, %v; want missing", ans, err)
	}
	if _, err := files(t, AgentFilesRequest{Op: FileWrite, Lab: lab, Path: "a", Data: []byte("x")}); err == nil {
		t.Error("write before the directory exists succeeded")
	}

	ok := func(req AgentFilesRequest) *AgentFilesAnswer {
		t.Helper()
		req.Lab = lab
		ans, err := files(t, req)
		if err != nil {
			t.Fatalf("%s %s: %v", req.Op, req.Path, err)
		}
		return ans
	}
	ok(AgentFilesRequest{Op: FileMkdir, Path: "."})
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("lab directory: %v %v, want mode 0755", st, err)
	}
	ok(AgentFilesRequest{Op: FileWrite, Path: "lb.cfg", Data: []byte("0123456789"), Perm: 0o600})
	if b, err := os.ReadFile(filepath.Join(dir, "lb.cfg")); err != nil || string(b) != "0123456789" {
		t.Errorf("written file: %q %v", b, err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "lb.cfg")); st == nil || st.Mode().Perm() != 0o600 {
		t.Errorf("written file's mode: %v, want 0600", st)
	}
	for _, tc := range []struct {
		offset, max int64
		want        string
	}{{0, 0, "0123456789"}, {4, 0, "456789"}, {4, 3, "789"}, {10, 0, ""}, {1 << 40, 0, ""}} {
		ans := ok(AgentFilesRequest{Op: FileRead, Path: "lb.cfg", Offset: tc.offset, Max: tc.max})
		if string(ans.Data) != tc.want || ans.Size != 10 || ans.Missing {
			t.Errorf("read from %d (max %d): %q size %d missing %v; want %q size 10", tc.offset, tc.max, ans.Data, ans.Size, ans.Missing, tc.want)
		}
	}
	ok(AgentFilesRequest{Op: FileMkdir, Path: "srv.www/objects"})
	ok(AgentFilesRequest{Op: FileWrite, Path: "srv.www/objects/1k", Data: make([]byte, 1024)})
	if st, err := os.Stat(filepath.Join(dir, "srv.www/objects/1k")); err != nil || st.Size() != 1024 {
		t.Errorf("object: %v %v", st, err)
	}
	ok(AgentFilesRequest{Op: FileRemove, Path: "lb.cfg"})
	if _, err := os.Stat(filepath.Join(dir, "lb.cfg")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("removed file still there: %v", err)
	}
	if ans := ok(AgentFilesRequest{Op: FileRemove, Path: "lb.cfg"}); !ans.Missing {
		t.Error("removing a missing file: not missing")
	}
	if ans := ok(AgentFilesRequest{Op: FileRead, Path: "nosuch"}); !ans.Missing {
		t.Error("reading a missing file: not missing")
	}

	// A pod made a symbolic link out of the directory.
	if err := os.Symlink(outside, filepath.Join(dir, "esc")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  AgentFilesRequest
		want string
	}{
		{"absolute path", AgentFilesRequest{Op: FileWrite, Lab: lab, Path: filepath.Join(outside, "x"), Data: []byte("x")}, "is not inside the directory of lab"},
		{"parent", AgentFilesRequest{Op: FileWrite, Lab: lab, Path: "../x", Data: []byte("x")}, "is not inside the directory of lab"},
		{"parent inside", AgentFilesRequest{Op: FileRead, Lab: lab, Path: "srv.www/../../x"}, "is not inside the directory of lab"},
		{"empty path", AgentFilesRequest{Op: FileRead, Lab: lab, Path: ""}, "is not inside the directory of lab"},
		{"write through a link out", AgentFilesRequest{Op: FileWrite, Lab: lab, Path: "esc/x", Data: []byte("x")}, "escapes"},
		{"read through a link out", AgentFilesRequest{Op: FileRead, Lab: lab, Path: "esc/secret"}, "escapes"},
		{"remove through a link out", AgentFilesRequest{Op: FileRemove, Lab: lab, Path: "esc/secret"}, "escapes"},
		{"mkdir through a link out", AgentFilesRequest{Op: FileMkdir, Lab: lab, Path: "esc/d"}, "escapes"},
		{"no lab", AgentFilesRequest{Op: FileRead, Path: "a"}, "is not a directory name"},
		{"lab ..", AgentFilesRequest{Op: FileMkdir, Lab: "..", Path: "."}, "is not a directory name"},
		{"lab with a slash", AgentFilesRequest{Op: FileMkdir, Lab: "a/b", Path: "."}, "is not a directory name"},
		{"unknown operation", AgentFilesRequest{Op: "chmod", Lab: lab, Path: "a"}, `unknown operation "chmod"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := files(t, tc.req)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Errorf("the refused requests changed the directory outside: %v", ents)
	}
	if _, err := os.Stat(filepath.Join(nodeStateRoot, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused lab name made a directory: %v", err)
	}

	// The lab's destroy removes its directory (twice: nothing there is no error), and the
	// root once no lab's directory is left; another lab's keeps it.
	if _, err := files(t, AgentFilesRequest{Op: FileMkdir, Lab: "k8r-other", Path: "."}); err != nil {
		t.Fatal(err)
	}
	if err := removeLabDir(lab); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(nodeStateRoot, "k8r-other")); err != nil {
		t.Errorf("destroying lab %s removed another lab's directory: %v", lab, err)
	}
	if err := removeLabDir("k8r-other"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := removeLabDir(lab); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("lab directory after destroy: %v", err)
	}
	if _, err := os.Stat(nodeStateRoot); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the root of the labs' directories, empty, after the last destroy: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
		t.Errorf("destroy removed what a link in the lab's directory pointed to: %v", err)
	}
	if err := removeLabDir("../x"); err == nil {
		t.Error("removeLabDir(../x) did not refuse")
	}
}

// TestRemoteNodeRefuses: a pod on another machine reaches only the lab's directory there, and
// its namespace is not entered.
func TestRemoteNodeRefuses(t *testing.T) {
	n := &RemoteNode{Node: &Node{Name: "lb", Lab: "k8r", KubeNode: "far"}, StateDir: "/run/sfclab/labs/k8r/nodes", NodeDir: "/var/lib/sfclab-node/k8r"}
	for _, path := range []string{"/etc/passwd", "/run/sfclab/labs/k8r", "/run/sfclab/labs/k8r/nodes/../x", "relative"} {
		if err := n.WriteFile(path, nil, 0o644); err == nil || !strings.Contains(err.Error(), "reaches only the lab's directory /var/lib/sfclab-node/k8r") {
			t.Errorf("WriteFile(%s): %v", path, err)
		}
		if _, _, err := n.ReadFileAt(path, 0, 0); err == nil {
			t.Errorf("ReadFileAt(%s) did not refuse", path)
		}
	}
	if err := n.Do(func() error { return nil }); !errors.Is(err, errNoEnter) {
		t.Errorf("Do: %v, want errNoEnter", err)
	}
}

// TestForeign: a Kubernetes node is another machine's unless it is this machine (the name
// localhost, its hostname or addresses) or of its kernel (boot ID); ForeignNodes makes any
// node foreign.
func TestForeign(t *testing.T) {
	here, err := bootID()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, json string
		treat      []string
		foreign    bool
	}{
		{"localhost", `{"metadata":{"name":"localhost"}}`, nil, false},
		{"localhost treated as foreign", `{"metadata":{"name":"localhost"}}`, []string{"localhost"}, true},
		{"this kernel", `{"metadata":{"name":"kn2"},"status":{"addresses":[{"type":"InternalIP","address":"198.19.253.2"}],"nodeInfo":{"bootID":"` + here + `"}}}`, nil, false},
		{"loopback address", `{"metadata":{"name":"n1"},"status":{"addresses":[{"type":"InternalIP","address":"127.0.0.1"}]}}`, nil, false},
		{"another machine", `{"metadata":{"name":"far"},"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.7"}],"nodeInfo":{"bootID":"0b5e3c1e-0000-4000-8000-000000000000"}}}`, nil, true},
		{"another machine, other nodes treated", `{"metadata":{"name":"far"},"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.7"}]}}`, []string{"kn2"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n kubeNode
			if err := json.Unmarshal([]byte(tc.json), &n); err != nil {
				t.Fatal(err)
			}
			if got := (Runtime{ForeignNodes: tc.treat}).foreign(&n); got != tc.foreign {
				t.Errorf("foreign %v, want %v", got, tc.foreign)
			}
		})
	}
}
