package vm

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The guest side of a Debian image: PID 1 in the initramfs mounts the root disk read-only
// under an overlay whose writes go to guest memory and switches into it, where it starts
// again as PID 1 of the Debian root.

const (
	// rootParam on the kernel command line names the root disk (a Debian image's).
	rootParam = "sfclab.root"
	// rootEnv marks the PID 1 started in the switched root.
	rootEnv = "SFCLAB_VM_ROOT"
	// rootMount is the initramfs's directory holding the disk (lower), the memory for writes
	// (rw) and the overlay (root).
	rootMount = "sfclab"
)

// rootFromCmdline returns the value of rootParam on a kernel command line ("" = none).
func rootFromCmdline(cmdline string) string {
	for _, f := range strings.Fields(cmdline) {
		if v, ok := strings.CutPrefix(f, rootParam+"="); ok {
			return v
		}
	}
	return ""
}

// switchRoot loads the root's modules, mounts dev read-only as the overlay's lower layer
// with a tmpfs upper layer, puts the agent (this binary) at the new root's /init, undoes the
// initramfs's mounts and moves the overlay to / (as switch_root), then executes /init there.
// It returns only on failure. t0 is the initramfs's /init's start, handed to the next.
func switchRoot(dev string, mounted []string, t0 float64) error {
	if err := loadModules(rootModules...); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(dev); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("root disk %s did not appear", dev)
		}
		time.Sleep(5 * time.Millisecond)
	}
	base := "/" + rootMount
	lower, rw, root := base+"/lower", base+"/rw", base+"/root"
	for _, d := range []string{lower, rw, root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount(dev, lower, "ext4", unix.MS_RDONLY|unix.MS_NOATIME, ""); err != nil {
		return fmt.Errorf("mount root disk %s: %w", dev, err)
	}
	if err := unix.Mount("tmpfs", rw, "tmpfs", 0, "mode=0755"); err != nil {
		return fmt.Errorf("mount the root's write layer: %w", err)
	}
	for _, d := range []string{rw + "/upper", rw + "/work"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	opts := "lowerdir=" + lower + ",upperdir=" + rw + "/upper,workdir=" + rw + "/work"
	if err := unix.Mount("overlay", root, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount the root overlay: %w", err)
	}
	if err := copyExecutable("/init", root+"/init"); err != nil {
		return fmt.Errorf("put the agent into the root: %w", err)
	}
	for i := len(mounted) - 1; i >= 0; i-- {
		_ = unix.Unmount(mounted[i], unix.MNT_DETACH)
	}
	if err := unix.Chdir(root); err != nil {
		return err
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move the root overlay to /: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot into the root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	env := append(os.Environ(), rootEnv+"="+strconv.FormatFloat(t0, 'f', 6, 64))
	return fmt.Errorf("execute /init in the root: %w", unix.Exec("/init", []string{"/init"}, env))
}

// copyExecutable copies a file to dst with mode 0755.
func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
