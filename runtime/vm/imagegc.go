package vm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sfclab/sfclab/spec"
)

// Superseded guest images. An image's key covers everything it is built from, the agent
// binary among them, so every new sfclab build (and every new host kernel) makes a new image
// beside the old ones: ~36 MB per busybox image, hundreds per Debian root. When a build
// stores a new image, the images it supersedes (pruneSelect) are removed unless a running VM
// boots them or a deploy found them within recentUse, and the builder logs one line saying
// what went and what stayed.
//
// A Debian root is removed only when the new root is of a newer kernel (same packages): its
// key holds no agent (a new sfclab rebuilds only the initramfs beside it, whose old copies
// debianBoot already removes), so a new root means a kernel upgrade, another suite or
// another recipe. HostKernel always boots the newest installed kernel, for every sfclab
// version, so a root of an older kernel is never chosen again while the newer kernel stays
// installed: removing it is safe, and it frees 300-500 MB per package set and kernel
// upgrade. A root of the same kernel under another key (another recipe or module set: another
// sfclab version, which may still be installed and in use) stays: a rebuild costs minutes of
// debootstrap and the mirror; `sfclab images rm --runtime vm KEY` removes it.

// recentUse is how long after a deploy found or built an image (its directory's
// modification time, touched by Ensure) the image is kept even when superseded: the deploy
// may not have started its VMs yet (a lab's other images are built first, a bench's trials
// deploy again), or another sfclab version on the host may be using it.
const recentUse = time.Hour

// ImageUse is what keeps a cached image from being removed as superseded.
type ImageUse struct {
	// VMs are the running processes that boot the image (QEMU's -name: LAB.NODE, or
	// "pid N" for a process without one).
	VMs []string
	// LastUsed is when a deploy last found or built it (its directory's modification time).
	LastUsed time.Time
}

// supersedes reports whether fresh, an image just built, replaces old: an image of the same
// kind and content list (a busybox image's programs, a Debian root's packages) built from
// something else (another agent, kernel or host program); for a Debian root only when old is
// of an older kernel (see above).
func supersedes(fresh, old *Image) bool {
	if fresh.Key == old.Key || fresh.KindName() != old.KindName() {
		return false
	}
	if fresh.KindName() == spec.VMImageDebian {
		return slices.Equal(fresh.Packages, old.Packages) && versionLess(old.Kernel, fresh.Kernel)
	}
	return slices.Equal(fresh.Programs, old.Programs)
}

// pruneSelect chooses, among the cached images ims, those to remove now that fresh is built:
// the ones fresh supersedes that no running VM boots (use[key].VMs) and no deploy used
// within recentUse before now. kept says why each other superseded image stays, by key.
func pruneSelect(fresh *Image, ims []*Image, use map[string]ImageUse, now time.Time) (remove []*Image, kept map[string]string) {
	kept = map[string]string{}
	for _, im := range ims {
		if !supersedes(fresh, im) {
			continue
		}
		u := use[im.Key]
		switch {
		case len(u.VMs) > 0:
			kept[im.Key] = "in use by " + strings.Join(u.VMs, ", ")
		case now.Sub(u.LastUsed) < recentUse:
			kept[im.Key] = fmt.Sprintf("used %s ago", now.Sub(u.LastUsed).Round(time.Second))
		default:
			remove = append(remove, im)
		}
	}
	return remove, kept
}

// touchImage marks the image in dir as used now (its directory's modification time), so a
// build elsewhere does not remove it before its VMs start.
func touchImage(dir string) {
	now := time.Now()
	_ = os.Chtimes(dir, now, now)
}

// prune removes the images fresh supersedes (pruneSelect) and logs one line saying which
// went and which stayed. It fails only in what it logs: the new image is built either way.
func (b Builder) prune(fresh *Image) {
	ims, err := b.List()
	if err != nil {
		b.logf("warning: remove superseded guest images: %v", err)
		return
	}
	vms, err := b.InUse()
	if err != nil {
		b.logf("warning: remove superseded guest images: %v", err)
		return
	}
	use := map[string]ImageUse{}
	for _, im := range ims {
		u := ImageUse{VMs: vms[im.Key]}
		if st, err := os.Stat(im.Dir); err == nil {
			u.LastUsed = st.ModTime()
		}
		use[im.Key] = u
	}
	remove, kept := pruneSelect(fresh, ims, use, time.Now())
	var gone []string
	var bytes int64
	for _, im := range remove {
		size := dirBytes(im.Dir)
		ok, err := b.removeUnused(im)
		switch {
		case err != nil:
			kept[im.Key] = err.Error()
		case !ok:
			kept[im.Key] = "used meanwhile"
		default:
			gone = append(gone, im.Key)
			bytes += size
		}
	}
	b.cleanLeftovers()
	kernels, kbytes, err := b.pruneKernels(vms)
	if err != nil {
		b.logf("warning: %v", err)
	}
	if line := pruneLine(fresh, gone, bytes, kept, kernels, kbytes); line != "" {
		b.logf("%s", line)
	}
}

// pruneLine is prune's one line: the images removed (with the space freed), the superseded
// ones kept with why and the shared kernels removed (no image left that links them, with the
// space freed); "" when fresh superseded none and no kernel went.
func pruneLine(fresh *Image, gone []string, bytes int64, kept map[string]string, kernels []string, kbytes int64) string {
	var parts []string
	if len(gone) > 0 {
		parts = append(parts, fmt.Sprintf("removed %d superseded %s guest image(s) (%d MB): %s", len(gone), fresh.KindName(), bytes>>20, strings.Join(gone, " ")))
	}
	if len(kernels) > 0 {
		parts = append(parts, fmt.Sprintf("removed %d shared kernel(s) no image uses (%d MB): %s", len(kernels), kbytes>>20, strings.Join(kernels, " ")))
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range kept {
			if !yield(k) {
				return
			}
		}
	}) {
		parts = append(parts, fmt.Sprintf("kept superseded %s (%s)", k, kept[k]))
	}
	if len(parts) == 0 {
		return ""
	}
	return "guest image " + fresh.Key + ": " + strings.Join(parts, "; ")
}

// removeUnused removes im's directory unless a deploy touched it since pruneSelect chose it:
// the directory is first renamed out of the cache (a deploy looking for it from then on
// builds it again), then its modification time read again; a deploy that found it before the
// rename has touched it, and it is put back. It reports whether the image went.
func (b Builder) removeUnused(im *Image) (bool, error) {
	gone := filepath.Join(b.root(), ".gc-"+im.Key+"-"+strconv.Itoa(os.Getpid()))
	if err := os.Rename(im.Dir, gone); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil // removed by another build meanwhile
		}
		return false, fmt.Errorf("remove superseded guest image %s: %w", im.Key, err)
	}
	if st, err := os.Stat(gone); err == nil && time.Since(st.ModTime()) < recentUse {
		if err := os.Rename(gone, im.Dir); err != nil {
			// Built again meanwhile: that copy serves.
			_ = os.RemoveAll(gone)
		}
		return false, nil
	}
	if err := os.RemoveAll(gone); err != nil {
		return false, fmt.Errorf("remove superseded guest image %s: %w", im.Key, err)
	}
	return true, nil
}

// cleanLeftovers removes what a removal cut short left under the image root (.gc-*
// directories not used within recentUse, as removeUnused's own choice).
func (b Builder) cleanLeftovers() {
	left, _ := filepath.Glob(filepath.Join(b.root(), ".gc-*"))
	for _, d := range left {
		if st, err := os.Stat(d); err == nil && time.Since(st.ModTime()) >= recentUse {
			_ = os.RemoveAll(d)
		}
	}
}

// dirBytes is the space removing dir frees: what its regular files take on disk (a Debian
// root is sparse), but not those with another link (a shared kernel: its last link frees
// it, see pruneKernels) nor those on another file system (a mount left in a killed build).
func dirBytes(dir string) int64 {
	var total int64
	var dev uint64
	if st, err := os.Stat(dir); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			dev = sys.Dev
		}
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		sys, ok := info.Sys().(*syscall.Stat_t)
		switch {
		case !ok:
		case sys.Dev != dev && d.IsDir():
			return fs.SkipDir
		case d.Type().IsRegular() && sys.Nlink == 1 && sys.Dev == dev:
			total += sys.Blocks * 512
		}
		return nil
	})
	return total
}

// InUse returns the cached images that running processes boot, by key: every process whose
// command line names a file in an image's directory (QEMU's -kernel, -initrd and -drive
// file=), with the VM's name (QEMU's -name: LAB.NODE) or "pid N"; a process naming a file of
// a shared kernel (kernels/ID/vmlinux) under "kernels/ID". Any sfclab version's VMs
// count, as do processes of other image roots' tests that name this root.
func (b Builder) InUse() (map[string][]string, error) {
	roots := []string{}
	if abs, err := filepath.Abs(b.root()); err == nil {
		roots = append(roots, abs)
		if r, err := filepath.EvalSymlinks(abs); err == nil && r != abs {
			roots = append(roots, r)
		}
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	out := map[string][]string{}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil || len(data) == 0 {
			continue // gone meanwhile, or a kernel thread
		}
		argv := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		cwd, _ := os.Readlink(filepath.Join("/proc", p.Name(), "cwd"))
		keys, name := imageRefs(argv, cwd, roots)
		if name == "" {
			name = "pid " + p.Name()
		}
		for _, k := range keys {
			out[k] = append(out[k], name)
		}
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out, nil
}

// imageRefs returns the keys of the images under roots whose files the command line argv
// names (a whole argument, or a comma-separated field of one with or without "key=", as
// QEMU's -drive file=PATH,...; relative paths from cwd), and QEMU's -name (its first field,
// "guest=" dropped), "" without one.
func imageRefs(argv []string, cwd string, roots []string) (keys []string, name string) {
	for i, a := range argv {
		if a == "-name" && i+1 < len(argv) {
			name, _, _ = strings.Cut(argv[i+1], ",")
			name = strings.TrimPrefix(name, "guest=")
		}
		for _, f := range strings.Split(a, ",") {
			if _, v, ok := strings.Cut(f, "="); ok {
				f = v
			}
			if f == "" {
				continue
			}
			if !filepath.IsAbs(f) {
				if cwd == "" {
					continue
				}
				f = filepath.Join(cwd, f)
			}
			f = filepath.Clean(f)
			for _, r := range roots {
				rel, ok := strings.CutPrefix(f, r+"/")
				key, file, inside := strings.Cut(rel, "/")
				if !ok || !inside || file == "" || strings.HasPrefix(key, ".") {
					continue
				}
				if key = imageRefKey(key, file); !slices.Contains(keys, key) {
					keys = append(keys, key)
				}
			}
		}
	}
	return keys, name
}
