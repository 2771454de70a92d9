package netdev

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetnsDir is where named network namespaces are bind-mounted, as iproute2
// does it.
const NetnsDir = "/run/netns"

// CreateNetns creates the named network namespace /run/netns/NAME and sets
// its loopback device up. It fails with an error wrapping [os.ErrExist] if
// the name is taken.
//
// Like iproute2, it first makes /run/netns a shared mount point (best
// effort), so that deleting the namespace also unmounts the copies held by
// mount namespaces made later (for example by `ip netns exec`).
//
// Equivalent to: ip netns add NAME && ip -n NAME link set lo up
func CreateNetns(name string) error {
	_, err := CreateNetnsWith(name, nil)
	return err
}

// CreateNetnsWith creates the named network namespace as CreateNetns does, writes the sysctls
// kvs in it and returns it open, all on the thread that created it, before it switches back:
// no further switch into the namespace, and its netlink socket is opened there.
//
// Writing a network sysctl costs time in proportion to the namespaces that wrote the same
// key before (the kernel keeps one cached entry per namespace under one shared /proc/sys
// directory and compares them one by one), so a lab of N nodes that writes them once all
// namespaces exist pays N per key, where writing them as each namespace is created pays on
// average N/2.
//
// Equivalent to: ip netns add NAME && ip -n NAME link set lo up && ip netns exec NAME sysctl -w K=V ...
func CreateNetnsWith(name string, kvs [][2]string) (*NS, error) {
	if err := checkNetnsName(name); err != nil {
		return nil, fmt.Errorf("create netns %q: %w", name, err)
	}
	paths := make([]string, len(kvs))
	for i, kv := range kvs {
		p, err := sysctlPath(kv[0])
		if err != nil {
			return nil, fmt.Errorf("create netns %s: set sysctl %s=%s: %w", name, kv[0], kv[1], err)
		}
		paths[i] = p
	}
	if err := prepareNetnsDir(); err != nil {
		return nil, fmt.Errorf("create netns %s: %w", name, err)
	}
	path := filepath.Join(NetnsDir, name)
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("create netns %s: %w", name, os.ErrExist)
	}
	var created netns.NsHandle = netns.None()
	var h *netlink.Handle
	err := onLockedThread(netns.None(), func() error {
		// NewNamed unshares the calling thread into the new namespace; onLockedThread
		// switches it back afterwards.
		var err error
		if created, err = netns.NewNamed(name); err != nil {
			return err
		}
		// Inside the new namespace: its netlink socket, lo up, its sysctls.
		if h, err = netlink.NewHandle(unix.NETLINK_ROUTE); err != nil {
			return fmt.Errorf("open netlink: %w", err)
		}
		lo, err := h.LinkByName("lo")
		if err != nil {
			return fmt.Errorf("set lo up: %w", err)
		}
		if err := h.LinkSetUp(lo); err != nil {
			return fmt.Errorf("set lo up: %w", err)
		}
		for i, kv := range kvs {
			if err := writeSysctl(paths[i], kv[1]); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					err = fmt.Errorf("%w: %w", ErrNotFound, err)
				}
				return fmt.Errorf("set sysctl %s=%s: %w", kv[0], kv[1], err)
			}
		}
		return nil
	})
	if err != nil {
		if h != nil {
			h.Close()
		}
		if created.IsOpen() {
			created.Close()
			_ = DeleteNetns(name)
		} else if !errors.Is(err, fs.ErrExist) {
			// NewNamed may have left an empty mount target behind.
			_ = unix.Unmount(path, unix.MNT_DETACH)
			_ = os.Remove(path)
		}
		return nil, fmt.Errorf("create netns %s: %w", name, err)
	}
	return &NS{name: name, fd: created, h: h}, nil
}

// DeleteNetns removes the named network namespace. A missing namespace is
// not an error. The namespace itself (and the devices in it) lives on while
// a process or an open [NS] still refers to it.
//
// Equivalent to: ip netns delete NAME
func DeleteNetns(name string) error {
	if err := checkNetnsName(name); err != nil {
		return fmt.Errorf("delete netns %q: %w", name, err)
	}
	path := filepath.Join(NetnsDir, name)
	err := unix.Unmount(path, unix.MNT_DETACH)
	if err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return fmt.Errorf("delete netns %s: unmount: %w", name, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete netns %s: %w", name, err)
	}
	return nil
}

// ListNetns returns the names of the named network namespaces that start
// with prefix, sorted. A missing /run/netns means no namespaces.
//
// Equivalent to: ip netns list | grep ^PREFIX
func ListNetns(prefix string) ([]string, error) {
	entries, err := os.ReadDir(NetnsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list netns: %w", err)
	}
	var names []string
	for _, e := range entries { // os.ReadDir sorts by name
		if !e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

func checkNetnsName(name string) error {
	switch {
	case name == "", name == ".", name == "..":
		return errors.New("invalid namespace name")
	case len(name) > 255, strings.ContainsAny(name, "/\x00"):
		return errors.New("invalid namespace name")
	}
	return nil
}

var netnsDirMu sync.Mutex
var netnsDirShared bool

// prepareNetnsDir creates /run/netns and, like iproute2, turns it into a
// shared mount point so that namespace unmounts propagate to mount
// namespaces created from ours. Failing to make it shared is not fatal.
func prepareNetnsDir() error {
	netnsDirMu.Lock()
	defer netnsDirMu.Unlock()
	if netnsDirShared {
		return nil
	}
	if err := os.MkdirAll(NetnsDir, 0o755); err != nil {
		return err
	}
	for made := false; ; made = true {
		err := unix.Mount("", NetnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
		if err == nil {
			break
		}
		if err != unix.EINVAL || made {
			return nil // best effort, try again next time
		}
		// Not a mount point yet: bind it onto itself, then retry.
		if err := unix.Mount(NetnsDir, NetnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return nil
		}
	}
	netnsDirShared = true
	return nil
}

// onLockedThread runs fn in a new goroutine locked to its OS thread. When
// target is open, the thread is switched into that network namespace first.
// Afterwards the thread is switched back to the namespace it started in; if
// that fails, the thread stays locked so that the Go runtime discards it
// when the goroutine exits instead of reusing it in the wrong namespace.
// A panic in fn is re-raised in the caller's goroutine.
func onLockedThread(target netns.NsHandle, fn func() error) error {
	type result struct {
		err   error
		panic any
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		origin, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("get current netns: %w", err)}
			return
		}
		defer origin.Close()
		if target.IsOpen() {
			if err := netns.Set(target); err != nil {
				runtime.UnlockOSThread() // setns is atomic: still in origin
				done <- result{err: fmt.Errorf("enter netns: %w", err)}
				return
			}
		}
		var res result
		func() {
			defer func() {
				if p := recover(); p != nil {
					res.panic = p
				}
			}()
			res.err = fn()
		}()
		if err := netns.Set(origin); err != nil {
			// Keep the thread locked: it dies with this goroutine.
			res.err = errors.Join(res.err, fmt.Errorf("restore netns: %w", err))
			done <- res
			return
		}
		runtime.UnlockOSThread()
		done <- res
	}()
	res := <-done
	if res.panic != nil {
		panic(res.panic)
	}
	return res.err
}
