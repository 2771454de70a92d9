package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sfclab/sfclab/vnf"
)

// Pods on another machine's Kubernetes node. sfclab's kinds write their configuration, pid
// files and logs under the lab's node directory (vnf.Env.StateDir, the journal's), which
// pods on sfclab's own machine mount. A pod on another machine mounts instead the lab's
// directory on its node, NodeStateRoot/LAB, made by the agent there, at the same path, and
// its RemoteNode has the kinds' file accesses done by that agent (AgentFiles, vnf.Files).

// NodeStateRoot is where the sfclab agent keeps, on its Kubernetes node, the directory of each
// lab with pods there on a machine other than sfclab's (NodeStateRoot/LAB). The agent's
// destroy removes the lab's directory on every node.
const NodeStateRoot = "/var/lib/sfclab-node"

// nodeStateRoot is NodeStateRoot (tests of the agent's requests change it).
var nodeStateRoot = NodeStateRoot

// nodeLabDir is a lab's directory as its node sees it.
func nodeLabDir(lab string) string { return filepath.Join(nodeStateRoot, lab) }

// AgentFiles asks the agent for one file operation in a lab's directory on its node
// (AgentFilesRequest, AgentFilesAnswer): what vnf.Files does for a pod on another machine.
const AgentFiles = "files"

// Operations of AgentFiles.
const (
	FileWrite  = "write"  // write Data to Path (Perm)
	FileRead   = "read"   // answer Data after Offset (at most the last Max bytes) and Size
	FileRemove = "remove" // remove Path (a file or an empty directory)
	FileMkdir  = "mkdir"  // make Path and its parents (Perm); "." makes the lab's directory
)

// AgentFilesRequest is one AgentFiles request. Path is relative to the lab's directory on the
// node and may not leave it (no absolute path, no "..", no symbolic link out of it).
type AgentFilesRequest struct {
	Op     string      `json:"op"`
	Lab    string      `json:"lab"`
	Path   string      `json:"path"`
	Data   []byte      `json:"data,omitempty"`
	Perm   fs.FileMode `json:"perm,omitempty"`
	Offset int64       `json:"offset,omitempty"`
	Max    int64       `json:"max,omitempty"`
}

// AgentFilesAnswer is the answer to an AgentFilesRequest: the data read and the file's size,
// or Missing when the file (or the lab's directory) does not exist.
type AgentFilesAnswer struct {
	Data    []byte `json:"data,omitempty"`
	Size    int64  `json:"size"`
	Missing bool   `json:"missing,omitempty"`
}

// checkLabName refuses a lab name that is no single path element (it names a directory on
// the node).
func checkLabName(lab string) error {
	if lab == "" || lab == "." || !filepath.IsLocal(lab) || strings.ContainsAny(lab, `/\`) {
		return fmt.Errorf("lab name %q is not a directory name", lab)
	}
	return nil
}

// agentFiles does one AgentFiles request in the lab's directory on the agent's node (under
// nodeRoot: the node's root in the agent's pod). Everything goes through an os.Root of the
// lab's directory, which refuses paths that leave it, also through symbolic links a pod made.
func agentFiles(req AgentFilesRequest) (*AgentFilesAnswer, error) {
	if err := checkLabName(req.Lab); err != nil {
		return nil, err
	}
	if !filepath.IsLocal(req.Path) {
		return nil, fmt.Errorf("path %q is not inside the directory of lab %s", req.Path, req.Lab)
	}
	dir := filepath.Join(nodeRoot(), nodeLabDir(req.Lab))
	perm := req.Perm.Perm()
	if req.Op == FileMkdir {
		if perm == 0 {
			perm = 0o755
		}
		// Searchable by others: servers in the pods run as other users (www-data, proxy).
		// Once more when another lab's destroy removed the empty root meanwhile.
		err := os.MkdirAll(dir, 0o755)
		if errors.Is(err, fs.ErrNotExist) {
			err = os.MkdirAll(dir, 0o755)
		}
		if err != nil {
			return nil, fmt.Errorf("make the directory of lab %s: %w", req.Lab, err)
		}
	}
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) && (req.Op == FileRead || req.Op == FileRemove) {
		return &AgentFilesAnswer{Missing: true}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open the directory of lab %s: %w", req.Lab, err)
	}
	defer root.Close()
	ans := &AgentFilesAnswer{}
	switch req.Op {
	case FileWrite:
		if perm == 0 {
			perm = 0o644
		}
		err = root.WriteFile(req.Path, req.Data, perm)
	case FileRead:
		var f *os.File
		if f, err = root.Open(req.Path); err == nil {
			ans.Data, ans.Size, err = vnf.ReadOpenAt(f, req.Offset, req.Max)
			f.Close()
		}
	case FileRemove:
		err = root.Remove(req.Path)
	case FileMkdir:
		if req.Path != "." {
			err = root.MkdirAll(req.Path, perm)
		}
	default:
		err = fmt.Errorf("unknown operation %q", req.Op)
	}
	if errors.Is(err, fs.ErrNotExist) && (req.Op == FileRead || req.Op == FileRemove) {
		return &AgentFilesAnswer{Missing: true}, nil
	}
	if err != nil {
		return nil, err
	}
	return ans, nil
}

// removeLabDir removes the lab's directory on the agent's node (agentDestroy), and
// NodeStateRoot when no other lab's is left in it; nothing there is not an error.
func removeLabDir(lab string) error {
	if err := checkLabName(lab); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(nodeRoot(), nodeLabDir(lab))); err != nil {
		return fmt.Errorf("remove the directory of lab %s: %w", lab, err)
	}
	_ = os.Remove(filepath.Join(nodeRoot(), nodeStateRoot)) // fails while another lab's is there
	return nil
}

// RemoteNode is the pod of a lab node on another machine's Kubernetes node (or one the
// runtime treats as such: Runtime.ForeignNodes). It mounts the lab's directory on its node
// (NodeDir) where pods on sfclab's machine mount the journal's node directory (StateDir), so
// the paths the kinds write into configurations hold in it; the kinds' files there are
// written and read by the agent on its node (vnf.Files), daemons log there, and Do refuses:
// sfclab's process cannot enter a namespace of another machine (probe.InGuest then measures
// the pod as a guest, through the agent).
type RemoteNode struct {
	*Node
	StateDir string // the lab's node directory as the kinds name it (vnf.Env.StateDir)
	NodeDir  string // the lab's directory on the pod's Kubernetes node (NodeStateRoot/LAB)
}

var _ vnf.Files = (*RemoteNode)(nil)

// rel is path relative to the lab's directory; a path outside it is refused (the agent
// reaches nothing else of its node for the kinds).
func (n *RemoteNode) rel(path string) (string, error) {
	r, err := filepath.Rel(n.StateDir, path)
	if err != nil || !filepath.IsLocal(r) {
		return "", fmt.Errorf("file %s of node %s: the pod runs on another machine (Kubernetes node %s), where sfclab reaches only the lab's directory %s (here %s)", path, n.Name, n.KubeNode, n.NodeDir, n.StateDir)
	}
	return r, nil
}

// files sends one AgentFiles request about path; a missing file is fs.ErrNotExist.
func (n *RemoteNode) files(op, path string, req AgentFilesRequest) (*AgentFilesAnswer, error) {
	r, err := n.rel(path)
	if err != nil {
		return nil, err
	}
	req.Op, req.Lab, req.Path = op, n.Lab, r
	var ans AgentFilesAnswer
	if err := agentCall(context.Background(), n.c, n.KubeNode, n.Agent, AgentFiles, req, &ans); err != nil {
		return nil, &fs.PathError{Op: op, Path: path, Err: err}
	}
	if ans.Missing {
		return nil, &fs.PathError{Op: op, Path: path, Err: fs.ErrNotExist}
	}
	return &ans, nil
}

// WriteFile writes data to path in the lab's directory on the pod's node.
func (n *RemoteNode) WriteFile(path string, data []byte, perm fs.FileMode) error {
	_, err := n.files(FileWrite, path, AgentFilesRequest{Data: data, Perm: perm})
	return err
}

// ReadFileAt reads path in the lab's directory on the pod's node (vnf.Files).
func (n *RemoteNode) ReadFileAt(path string, offset, max int64) ([]byte, int64, error) {
	ans, err := n.files(FileRead, path, AgentFilesRequest{Offset: offset, Max: max})
	if err != nil {
		return nil, 0, err
	}
	return ans.Data, ans.Size, nil
}

// Remove removes path in the lab's directory on the pod's node.
func (n *RemoteNode) Remove(path string) error {
	_, err := n.files(FileRemove, path, AgentFilesRequest{})
	return err
}

// MkdirAll makes directory path in the lab's directory on the pod's node.
func (n *RemoteNode) MkdirAll(path string, perm fs.FileMode) error {
	_, err := n.files(FileMkdir, path, AgentFilesRequest{Perm: perm})
	return err
}

// Daemon starts a long-running process in the pod (Node.Daemon), its output appended on its
// node to logPath's place in the lab's directory there; a log outside the lab's node
// directory (a probe's scratch directory on sfclab's machine) goes to the lab's directory
// there under its base name.
func (n *RemoteNode) Daemon(argv []string, logPath string) (int, error) {
	log := filepath.Join(n.NodeDir, filepath.Base(logPath))
	if r, err := n.rel(logPath); err == nil {
		log = filepath.Join(n.NodeDir, r)
	}
	return n.Node.Daemon(argv, log)
}

// Do refuses: the pod runs on another machine (errNoEnter).
func (n *RemoteNode) Do(func() error) error {
	return fmt.Errorf("enter node %s (pod on Kubernetes node %s): %w", n.Name, n.KubeNode, errNoEnter)
}

// foreign reports whether Kubernetes node kn is another machine's for sfclab: named in
// ForeignNodes, or neither this machine (its addresses or hostname, or the name localhost)
// nor of this machine's kernel (another kubelet here).
func (r Runtime) foreign(n *kubeNode) bool {
	if slices.Contains(r.ForeignNodes, n.Metadata.Name) {
		return true
	}
	hostname, addrs := machine()
	return !n.local(hostname, addrs) && n.Metadata.Name != "localhost" && !n.sameKernel()
}

// foreignNodes returns which of the Kubernetes nodes kns are another machine's (foreign).
func (r Runtime) foreignNodes(ctx context.Context, c *client, kns []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, kn := range kns {
		var n kubeNode
		if err := c.do(ctx, "GET", "/api/v1/nodes/"+kn, nil, nil, &n); err != nil {
			return nil, fmt.Errorf("read Kubernetes node %s: %w", kn, err)
		}
		if r.foreign(&n) {
			out[kn] = true
		}
	}
	return out, nil
}
