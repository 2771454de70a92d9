package vnf

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strings"

	"github.com/sfclab/sfclab/proc"
)

// Files is a node whose files are not on sfclab's file system: a pod on another machine's
// Kubernetes node, which mounts a lab directory of that machine where the others see
// Env.StateDir. The kinds write their configuration and pid files and read their logs under
// Env.StateDir through these helpers (WriteFile, ReadFile, Remove, MkdirAll, ReadFrom,
// LogTail), which ask such a node to do it on its machine; every other node (netns, docker,
// a VM guest with its 9p share of the state directory) shares sfclab's file system, and the
// helpers use the local files exactly as os does.
type Files interface {
	// WriteFile writes data to path on the node (os.WriteFile there).
	WriteFile(path string, data []byte, perm fs.FileMode) error
	// ReadFileAt returns what path holds on the node after offset, at most its last max
	// bytes (max <= 0: all of it; an offset past the end: nothing), and the file's size. A
	// missing file is an error that is fs.ErrNotExist.
	ReadFileAt(path string, offset, max int64) (data []byte, size int64, err error)
	// Remove removes path (a file or an empty directory) on the node; a missing one is an
	// error that is fs.ErrNotExist, as for os.Remove.
	Remove(path string) error
	// MkdirAll makes directory path and its parents on the node (os.MkdirAll there).
	MkdirAll(path string, perm fs.FileMode) error
}

// FilesOf returns the node's Files when its files are not sfclab's, else nil.
func FilesOf(node Node) Files {
	f, _ := node.(Files)
	return f
}

// WriteFile is os.WriteFile in the node's file system.
func WriteFile(node Node, path string, data []byte, perm fs.FileMode) error {
	if f := FilesOf(node); f != nil {
		return f.WriteFile(path, data, perm)
	}
	return os.WriteFile(path, data, perm)
}

// ReadFile is os.ReadFile in the node's file system.
func ReadFile(node Node, path string) ([]byte, error) {
	if f := FilesOf(node); f != nil {
		data, _, err := f.ReadFileAt(path, 0, 0)
		return data, err
	}
	return os.ReadFile(path)
}

// Remove is os.Remove in the node's file system.
func Remove(node Node, path string) error {
	if f := FilesOf(node); f != nil {
		return f.Remove(path)
	}
	return os.Remove(path)
}

// MkdirAll is os.MkdirAll in the node's file system.
func MkdirAll(node Node, path string, perm fs.FileMode) error {
	if f := FilesOf(node); f != nil {
		return f.MkdirAll(path, perm)
	}
	return os.MkdirAll(path, perm)
}

// ReadFrom returns what path holds in the node's file system after offset, at most its last
// max bytes (max <= 0: all of it), and the file's size: the part of a log a daemon wrote since
// offset.
func ReadFrom(node Node, path string, offset, max int64) ([]byte, int64, error) {
	if f := FilesOf(node); f != nil {
		return f.ReadFileAt(path, offset, max)
	}
	return readFileAt(path, offset, max)
}

// FileSize is the size of path in the node's file system (a log's offset before a daemon
// appends to it).
func FileSize(node Node, path string) (int64, error) {
	_, size, err := ReadFrom(node, path, math.MaxInt64, 0)
	return size, err
}

// LogTail is proc.LogTail in the node's file system: what a log holds after offset, at most its
// last proc.MaxLogTail bytes, trimmed, or a note in parentheses ("(empty)", the error).
func LogTail(node Node, path string, offset int64) string {
	if FilesOf(node) == nil {
		return proc.LogTail(path, offset)
	}
	b, _, err := ReadFrom(node, path, offset, proc.MaxLogTail)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if s := strings.TrimSpace(string(b)); s != "" {
		return s
	}
	return "(empty)"
}

func readFileAt(path string, offset, max int64) ([]byte, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	return ReadOpenAt(f, offset, max)
}

// ReadOpenAt is Files.ReadFileAt on an open file of this machine (the sfclab agent answers
// with it on its node).
func ReadOpenAt(f fs.File, offset, max int64) ([]byte, int64, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if st.IsDir() {
		return nil, 0, fmt.Errorf("read %s: is a directory", st.Name())
	}
	size := st.Size()
	if offset < 0 {
		offset = 0
	}
	if offset >= size {
		return nil, size, nil
	}
	if max > 0 && size-offset > max {
		offset = size - max
	}
	ra, ok := f.(io.ReaderAt)
	if !ok {
		return nil, 0, errors.New("read: not a regular file")
	}
	b, err := io.ReadAll(io.NewSectionReader(ra, offset, size-offset))
	if err != nil {
		return nil, 0, err
	}
	return b, size, nil
}
