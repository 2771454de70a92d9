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
	if err := checkNetnsName(name); err != nil {
		return fmt.Errorf("create netns %q: %w", name, err)
	}
	if err := prepareNetnsDir(); err != nil {
		return fmt.Errorf("create netns %s: %w", name, err)
	}
	path := filepath.Join(NetnsDir, name)
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("create netns %s: %w", name, os.ErrExist)
	}

	var created netns.NsHandle = netns.None()
	err := onLockedThread(netns.None(), func() error {
		// NewNamed unshares the calling thread into the new namespace;
		// onLockedThread switches it back afterwards.
		h, err := netns.NewNamed(name)
		created = h
		return err
	})
	if err != nil {
		if !errors.Is(err, fs.ErrExist) {
			// NewNamed may have left an empty mount target behind.
			_ = unix.Unmount(path, unix.MNT_DETACH)
			_ = os.Remove(path)
		}
		if created.IsOpen() {
			created.Close()
		}
		return fmt.Errorf("create netns %s: %w", name, err)
	}
	defer created.Close()

	if err := setLoUp(created); err != nil {
		_ = DeleteNetns(name)
		return fmt.Errorf("create netns %s: set lo up: %w", name, err)
	}
	return nil
}

func setLoUp(ns netns.NsHandle) error {
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return err
	}
	return h.LinkSetUp(lo)
}

// BindNetns names an existing network namespace, found at path (for example a container's
// /proc/PID/ns/net), as /run/netns/NAME: it is then opened, listed and deleted as one
// CreateNetns made. It fails with an error wrapping [os.ErrExist] if the name is taken. The
// name keeps the namespace alive after its processes are gone, until [DeleteNetns].
//
// Equivalent to: touch /run/netns/NAME && mount --bind PATH /run/netns/NAME
func BindNetns(name, path string) error {
	if err := errors.Join(CheckGuard(name), CheckGuard(path)); err != nil {
		return err
	}
	if err := checkNetnsName(name); err != nil {
		return fmt.Errorf("bind netns %q: %w", name, err)
	}
	if err := prepareNetnsDir(); err != nil {
		return fmt.Errorf("bind netns %s: %w", name, err)
	}
	target := filepath.Join(NetnsDir, name)
	f, err := os.OpenFile(target, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return fmt.Errorf("bind netns %s: %w", name, err)
	}
	f.Close()
	if err := unix.Mount(path, target, "none", unix.MS_BIND, ""); err != nil {
		_ = os.Remove(target)
		return fmt.Errorf("bind netns %s to %s: %w", name, path, err)
	}
	return nil
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

// ShareNetnsDir makes NetnsDir a shared mount point (as `ip netns` does), so that names bound
// under it in another mount namespace that mounts it with shared propagation (a privileged
// container's) appear here too.
func ShareNetnsDir() error { return prepareNetnsDir() }

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
