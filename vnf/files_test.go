package vnf_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/vnf"
)

// localNode is a node sharing this machine's file system (no vnf.Files).
type localNode struct{}

func (localNode) Output(context.Context, []byte, ...string) ([]byte, error) { return nil, nil }
func (localNode) Daemon([]string, string) (int, error)                      { return 0, nil }
func (localNode) Do(fn func() error) error                                  { return fn() }

// farNode keeps its files in a map, as a pod on another machine keeps them on its node.
type farNode struct {
	localNode
	files map[string][]byte
}

func (n *farNode) WriteFile(path string, data []byte, _ fs.FileMode) error {
	n.files[path] = append([]byte(nil), data...)
	return nil
}

func (n *farNode) ReadFileAt(path string, offset, max int64) ([]byte, int64, error) {
	b, ok := n.files[path]
	if !ok {
		return nil, 0, &fs.PathError{Op: "read", Path: path, Err: fs.ErrNotExist}
	}
	size := int64(len(b))
	if offset >= size {
		return nil, size, nil
	}
	if max > 0 && size-offset > max {
		offset = size - max
	}
	return b[offset:], size, nil
}

func (n *farNode) Remove(path string) error {
	if _, ok := n.files[path]; !ok {
		return &fs.PathError{Op: "remove", Path: path, Err: fs.ErrNotExist}
	}
	delete(n.files, path)
	return nil
}

func (n *farNode) MkdirAll(path string, _ fs.FileMode) error { return nil }

// TestFiles: the helpers use this machine's files for a node without vnf.Files, exactly as os
// does, and the node's own for one with it, never the other's.
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "f.log")
	far := &farNode{files: map[string][]byte{}}
	for _, tc := range []struct {
		name string
		node vnf.Node
	}{{"local", localNode{}}, {"far", far}} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.node
			if _, err := vnf.ReadFile(n, path); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("ReadFile of a missing file: %v", err)
			}
			if _, err := vnf.FileSize(n, path); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("FileSize of a missing file: %v", err)
			}
			if got := vnf.LogTail(n, path, 0); !strings.HasPrefix(got, "(") {
				t.Errorf("LogTail of a missing file: %q, want a note in parentheses", got)
			}
			if err := vnf.MkdirAll(n, filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := vnf.WriteFile(n, path, []byte("line1\nline2\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if b, err := vnf.ReadFile(n, path); err != nil || string(b) != "line1\nline2\n" {
				t.Errorf("ReadFile: %q %v", b, err)
			}
			if size, err := vnf.FileSize(n, path); err != nil || size != 12 {
				t.Errorf("FileSize: %d %v, want 12", size, err)
			}
			if b, size, err := vnf.ReadFrom(n, path, 6, 0); err != nil || string(b) != "line2\n" || size != 12 {
				t.Errorf("ReadFrom 6: %q %d %v", b, size, err)
			}
			if b, _, err := vnf.ReadFrom(n, path, 0, 3); err != nil || string(b) != "e2\n" {
				t.Errorf("ReadFrom max 3: %q %v", b, err)
			}
			if got := vnf.LogTail(n, path, 6); got != "line2" {
				t.Errorf("LogTail from 6: %q, want line2", got)
			}
			if got := vnf.LogTail(n, path, 12); got != "(empty)" {
				t.Errorf("LogTail at the end: %q, want (empty)", got)
			}
			if err := vnf.Remove(n, path); err != nil {
				t.Fatal(err)
			}
			if err := vnf.Remove(n, path); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Remove of a missing file: %v", err)
			}
		})
	}
	// Each node's files are its own: the far node's never reached this machine's.
	if err := vnf.WriteFile(far, path, []byte("far"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a far node's file is on this machine: %v", err)
	}
	if b, err := vnf.ReadFile(localNode{}, path); err == nil {
		t.Errorf("this machine read the far node's file: %q", b)
	}
}
