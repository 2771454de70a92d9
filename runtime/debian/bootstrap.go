// Package debian bootstraps Debian root file systems with debootstrap from the mirror this
// host's APT sources name: the one step sfclab's Docker node image (runtime/docker) and the
// vm runtime's Debian guest root (runtime/vm) are both built by.
package debian

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Progress is one step of a build, for a progress display.
type Progress struct {
	// Phase is "resolve", "download", "extract", "unpack", "configure", "import", "done" (or
	// "pull" for an image from a registry).
	Phase string
	// Done and Total count packages (bytes in "import"); Total 0 means not known yet.
	Done, Total int64
	// Message is the latest line of the builder.
	Message string
}

// ErrNoDebootstrap means debootstrap is not installed.
var ErrNoDebootstrap = fmt.Errorf("debootstrap is not installed; install it: apt-get install debootstrap")

// Bootstrap installs a minimal Debian root file system (variant minbase) with the packages
// into root, from src, and empties APT's download cache and lists in it (nothing in a node
// uses them). debootstrap runs in its own process group: a cancelled context kills all of
// it, dpkg included. progress may be nil.
// Equivalent to: debootstrap --variant=minbase --include=PKGS SUITE ROOT MIRROR
func Bootstrap(ctx context.Context, src Source, pkgs []string, root string, progress func(Progress)) error {
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return ErrNoDebootstrap
	}
	if progress == nil {
		progress = func(Progress) {}
	}
	if err := debootstrap(ctx, src, pkgs, root, progress); err != nil {
		return err
	}
	for _, dir := range []string{"var/cache/apt/archives", "var/lib/apt/lists"} {
		_ = removeFiles(filepath.Join(root, dir))
	}
	return nil
}

// debootstrapPhases maps debootstrap's "I: VERB ..." lines to progress phases.
var debootstrapPhases = map[string]string{
	"Retrieving": "download", "Validating": "download", "Extracting": "extract",
	"Unpacking": "unpack", "Configuring": "configure",
}

// totalOf is the expected count of a phase: unknown while downloading (and for extract, which
// covers only the required packages), then the number of packages downloaded (each is unpacked
// and configured about once).
func totalOf(phase string, downloaded int64) int64 {
	if phase == "unpack" || phase == "configure" {
		return downloaded
	}
	return 0
}

// perPackage reports whether a debootstrap line is about one package ("Retrieving adduser
// 3.134", "Unpacking libc6:amd64..."), not a step ("Retrieving InRelease", "Unpacking the base
// system...", "Configuring required packages...").
func perPackage(msg string) bool {
	_, obj, _ := strings.Cut(strings.TrimSuffix(msg, "..."), " ")
	switch {
	case obj == "InRelease" || obj == "Release" || obj == "Packages" || strings.HasPrefix(obj, "the "):
		return false
	case strings.HasSuffix(obj, " packages"):
		return false
	}
	return obj != ""
}

// debootstrapProgress turns debootstrap's output into progress steps.
type debootstrapProgress struct {
	phase      string
	counts     map[string]int64
	downloaded int64
	report     func(Progress)
}

func (d *debootstrapProgress) line(line string) {
	msg, ok := strings.CutPrefix(line, "I: ")
	if !ok {
		return
	}
	verb, _, _ := strings.Cut(msg, " ")
	p, known := debootstrapPhases[verb]
	if known {
		d.phase = p
	}
	// Validating interleaves with Retrieving; steps ("Unpacking the base system...") are not
	// packages.
	if known && verb != "Validating" && perPackage(msg) {
		d.counts[d.phase]++
		if d.phase == "download" {
			d.downloaded = d.counts[d.phase]
		}
	}
	done, total := d.counts[d.phase], totalOf(d.phase, d.downloaded)
	if total > 0 && done > total {
		done = total
	}
	d.report(Progress{Phase: d.phase, Done: done, Total: total, Message: msg})
}

// debootstrap runs debootstrap in its own process group and reports its progress.
func debootstrap(ctx context.Context, src Source, pkgs []string, root string, progress func(Progress)) error {
	args := []string{"--variant=minbase", "--include=" + strings.Join(pkgs, ","), src.Suite, root, src.Mirror}
	cmd := exec.CommandContext(ctx, "debootstrap", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	progress(Progress{Phase: "resolve", Message: fmt.Sprintf("debootstrap %s from %s", src.Suite, src.Mirror)})
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start debootstrap: %w", err)
	}
	var tail []string
	dp := &debootstrapProgress{phase: "resolve", counts: map[string]int64{}, report: progress}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		tail = append(tail, line)
		if len(tail) > 20 {
			tail = tail[1:]
		}
		dp.line(line)
	}
	if err := cmd.Wait(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("run debootstrap: %w", ctx.Err())
		}
		return fmt.Errorf("run debootstrap %s: %w:\n%s", strings.Join(args, " "), err, strings.Join(tail, "\n"))
	}
	return nil
}

// removeFiles empties a directory, keeping its subdirectories' structure out of the image.
func removeFiles(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.IsDir() {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	return nil
}

// RemoveTree deletes a build directory, after detaching whatever an interrupted debootstrap
// left mounted in it (/proc, /sys). If anything stays mounted the directory is left alone:
// removing through a bind mount would delete the host's files.
func RemoveTree(dir string) error {
	mounts := mountsUnder(dir)
	for i := len(mounts) - 1; i >= 0; i-- {
		_ = unix.Unmount(mounts[i], unix.MNT_DETACH)
	}
	if left := mountsUnder(dir); len(left) > 0 {
		return fmt.Errorf("remove build directory %s: still mounted: %s; unmount them and remove it by hand", dir, strings.Join(left, ", "))
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove build directory %s: %w", dir, err)
	}
	return nil
}

// mountsUnder lists the mount points below dir, outermost first.
func mountsUnder(dir string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	dir = filepath.Clean(dir) + "/"
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeOctal(f[4])
		if strings.HasPrefix(mp+"/", dir) {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) < len(out[j]) })
	return out
}

func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
