package vm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sfclab/sfclab/runtime/debian"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// A Debian guest image (vm: {image: debian}): a Debian root file system bootstrapped by
// package debian (the step sfclab's Docker node image is built by) with the packages the
// node's kind needs, made an ext4 disk image without mounting it (mkfs.ext4 -d), and the
// host's kernel. QEMU attaches the disk read-only (virtio-blk); a small initramfs (the agent
// as /init and the modules that mount the root) mounts it under an overlay whose upper layer
// is guest memory and switches into it, where the agent runs as PID 1 as in the busybox
// image. The root is cached under the image root by a key of the recipe, the suite, the
// kernel and the packages (DebianKey); the initramfs beside it by the agent binary's digest,
// so a new sfclab does not rebuild the root.

// debianRecipe changes whenever the way the Debian root is made changes, so its key does too.
const debianRecipe = "sfclab-vm-debian-1: debootstrap minbase; host kernel modules + depmod; mkfs.ext4 -d, no journal"

// DebianBasePackages are the packages every Debian guest has beside its kind's: the
// programs of BasePrograms (ip and tc, nft, iperf3, ping, sysctl) and kmod, by which the
// guest's kernel loads nftables' and tc's modules on demand.
var DebianBasePackages = []string{"iperf3", "iproute2", "iputils-ping", "kmod", "nftables", "procps"}

// rootfsFile is a Debian image's root file system in its directory.
const rootfsFile = "rootfs.ext4"

// rootModules are the modules the Debian image's initramfs loads to mount its root: the
// microvm's virtio transport, the disk, ext4 (crc32c for its checksums: the kernel would ask
// modprobe for it, which the initramfs has not) and overlayfs.
var rootModules = []string{"virtio_mmio", "virtio_blk", "crc32c_generic", "ext4", "overlay"}

// DebianPackages are the packages of a Debian guest for nodes of these kinds: the base ones
// and each kind's (kinds.PackagesOf), sorted, each once.
func DebianPackages(kindNames []string) []string {
	out := slices.Clone(DebianBasePackages)
	for _, k := range kindNames {
		out = append(out, kinds.PackagesOf(k)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// DebianKey is the cache key of a Debian guest root: the first 16 hex digits of a SHA-256
// over the recipe, the suite, the kernel release and the modules taken from it (moduleSet:
// they are in the root) and the packages (in any order: they are sorted).
func DebianKey(suite, release string, packages []string) string {
	pk := slices.Sorted(slices.Values(packages))
	pk = slices.Compact(pk)
	h := sha256.Sum256([]byte(debianRecipe + "\n" + suite + "\n" + release + "\n" + moduleSet() + "\n" + strings.Join(pk, "\n")))
	return "deb-" + hex.EncodeToString(h[:])[:12]
}

// EnsureDebian returns the Debian guest image with these packages (DebianPackages), building
// its root when no image with the same key exists (debootstrap: minutes) and its initramfs
// when none exists for the current agent binary (a second). A new root removes the roots of
// the same packages and an older kernel that are not in use (prune).
func (b Builder) EnsureDebian(ctx context.Context, packages []string) (*Image, error) {
	src, err := debian.HostSource()
	if err != nil {
		return nil, fmt.Errorf("build Debian guest image: %w", err)
	}
	rel, bz, err := HostKernel()
	if err != nil {
		return nil, err
	}
	key := DebianKey(src.Suite, rel, packages)
	dir := filepath.Join(b.root(), key)
	touchImage(dir) // before reading it: a build removing it as superseded sees the use
	im, err := readImage(dir)
	if err != nil {
		if im, err = b.buildDebian(ctx, src, rel, bz, packages, key, dir); err != nil {
			return nil, err
		}
	}
	if err := b.debianBoot(im); err != nil {
		return nil, err
	}
	return im, nil
}

// buildDebian bootstraps the root into a temporary directory under the image root, adds the
// kernel's modules, makes the disk image and renames the directory to dir.
func (b Builder) buildDebian(ctx context.Context, src debian.Source, rel, bz string, packages []string, key, dir string) (*Image, error) {
	start := time.Now()
	pkgs := slices.Compact(slices.Sorted(slices.Values(packages)))
	b.logf("building Debian guest image %s: debootstrap %s from %s with %s (minutes)", key, src.Suite, src.Mirror, strings.Join(pkgs, " "))
	tmp, unlock, err := b.newBuildDir()
	if err != nil {
		return nil, err
	}
	defer unlock()
	defer func() {
		if err := debian.RemoveTree(tmp); err != nil {
			b.logf("warning: %v", err)
		}
	}()
	tree := filepath.Join(tmp, "rootfs")
	last := ""
	progress := func(p debian.Progress) {
		if p.Phase != last {
			last = p.Phase
			b.logf("debootstrap: %s (%s)", p.Phase, time.Since(start).Round(time.Second))
		}
	}
	if err := debian.Bootstrap(ctx, src, pkgs, tree, progress); err != nil {
		return nil, fmt.Errorf("build Debian guest image: %w", err)
	}
	mods, err := moduleClosure(rel, rootModules...)
	if err != nil {
		return nil, err
	}
	if _, err := stageModules(rel, mods, tree); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tree, "etc/hostname"), []byte("guest\n"), 0o644); err != nil {
		return nil, fmt.Errorf("write the guest's hostname: %w", err)
	}
	if err := b.linkKernel(rel, bz, filepath.Join(tmp, "vmlinux")); err != nil {
		return nil, err
	}
	disk := filepath.Join(tmp, rootfsFile)
	if err := mkfsFromTree(tree, disk); err != nil {
		return nil, err
	}
	if err := debian.RemoveTree(tree); err != nil {
		return nil, err
	}
	im := &Image{Key: key, Kernel: rel, Kind: spec.VMImageDebian, Suite: src.Suite, Packages: pkgs,
		Created: time.Now().UTC(), DiskBytes: allocated(disk), BuildSeconds: time.Since(start).Seconds()}
	im, stored, err := storeImage(im, tmp, dir)
	if err != nil || !stored {
		return im, err
	}
	b.logf("Debian guest image %s: root %d MB allocated, built in %s", key, im.DiskBytes>>20, time.Since(start).Round(time.Second))
	b.prune(im)
	return im, nil
}

// mkfsFromTree makes an ext4 file system holding tree in a sparse file, without mounting
// anything: 25 % and 64 MiB over the tree's size, one inode per 8 KiB (a Debian root is
// many small files), no journal (the guest mounts it read-only).
// Equivalent to: mkfs.ext4 -q -F -L sfclab-root -O ^has_journal -i 8192 -d TREE DISK SIZE
func mkfsFromTree(tree, disk string) error {
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		return fmt.Errorf("make the guest's root file system: mkfs.ext4 is not installed; install it: apt-get install e2fsprogs")
	}
	size := treeBytes(tree)*5/4 + 64<<20
	size = (size + 1<<20 - 1) &^ (1<<20 - 1)
	f, err := os.Create(disk)
	if err != nil {
		return fmt.Errorf("create disk image: %w", err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("create disk image: %w", err)
	}
	out, err := exec.Command("mkfs.ext4", "-q", "-F", "-L", "sfclab-root", "-O", "^has_journal", "-i", "8192",
		"-d", tree, disk).CombinedOutput()
	if err != nil {
		return fmt.Errorf("make the guest's root file system: mkfs.ext4 -d: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// treeBytes sums the sizes of the regular files under dir, rounded up to 4 KiB blocks.
func treeBytes(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += (info.Size() + 4095) &^ 4095
			}
		}
		return nil
	})
	return total
}

// allocated is the space a (sparse) file takes on disk.
func allocated(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if sys, ok := st.Sys().(interface{ Blocks() int64 }); ok {
		return sys.Blocks() * 512
	}
	return st.Size()
}

// debianBoot finds or builds the Debian image's initramfs for the current agent binary:
// the agent as /init and rootModules with their dependencies, indexed by depmod. Initramfs
// files of other agents older than staleBoot are removed (a running guest has its initramfs
// in its memory; a younger one may be another sfclab's about to boot).
func (b Builder) debianBoot(im *Image) error {
	agent, err := b.agent()
	if err != nil {
		return err
	}
	d, err := fileDigest(agent)
	if err != nil {
		return fmt.Errorf("read the agent binary: %w", err)
	}
	mods, err := rootClosure(im.Kernel)
	if err != nil {
		return err
	}
	h := sha256.Sum256([]byte(imageFormat + "\n" + d + "\n" + strings.Join(mods, "\n") + "\nlibs"))
	path := filepath.Join(im.Dir, "boot-"+hex.EncodeToString(h[:])[:12]+".cpio")
	if st, err := os.Stat(path); err == nil {
		im.boot, im.Bytes = path, st.Size()
		return nil
	}
	tmp, err := os.MkdirTemp(im.Dir, ".boot-")
	if err != nil {
		return fmt.Errorf("build the Debian image's initramfs: %w", err)
	}
	defer os.RemoveAll(tmp)
	entries := []cpioEntry{{Name: "init", Source: b.stripped(agent, filepath.Join(tmp, "init")), Mode: 0o755}}
	// A dynamically linked agent (cgo) needs its loader and libraries in the initramfs; the
	// Debian root has its own (the same suite as the host the agent was built on).
	libs, err := sharedLibs([]string{agent})
	if err != nil {
		return err
	}
	for _, l := range libs {
		entries = append(entries, cpioEntry{Name: l, Source: l, Mode: 0o755})
	}
	for _, dir := range []string{"proc", "sys", "dev", "tmp", "run", rootMount} {
		entries = append(entries, cpioEntry{Name: dir, Mode: os.ModeDir | 0o755})
	}
	files, err := stageModules(im.Kernel, mods, filepath.Join(tmp, "mods"))
	if err != nil {
		return err
	}
	for _, f := range files {
		entries = append(entries, cpioEntry{Name: f, Source: filepath.Join(tmp, "mods", f), Mode: 0o644})
	}
	part := filepath.Join(tmp, "boot.cpio")
	out, err := os.Create(part)
	if err != nil {
		return fmt.Errorf("create initramfs: %w", err)
	}
	if err := writeCPIO(out, entries); err != nil {
		out.Close()
		return fmt.Errorf("write initramfs: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("write initramfs: %w", err)
	}
	old, _ := filepath.Glob(filepath.Join(im.Dir, "boot-*.cpio"))
	if err := os.Rename(part, path); err != nil {
		return fmt.Errorf("store the Debian image's initramfs: %w", err)
	}
	for _, o := range old {
		// Another sfclab (or test binary) may be about to boot its own: only stale ones go.
		if st, err := os.Stat(o); err == nil && o != path && time.Since(st.ModTime()) > staleBoot {
			_ = os.Remove(o)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	im.boot, im.Bytes = path, st.Size()
	return nil
}

// staleBoot is the age after which another agent's initramfs beside a Debian root is removed.
const staleBoot = time.Hour

// rootClosure is rootModules with their dependencies, from the host's modules.dep.
func rootClosure(release string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join("/lib/modules", release, "modules.dep"))
	if err != nil {
		return nil, fmt.Errorf("read modules of kernel %s: %w", release, err)
	}
	deps, byName := parseModuleDeps(string(data))
	return loadOrder(deps, byName, rootModules)
}

// KindName is the image's kind as vm: image names it (busybox for images built before
// Image.Kind).
func (im *Image) KindName() string {
	if im.Kind == "" {
		return spec.VMImageBusybox
	}
	return im.Kind
}
