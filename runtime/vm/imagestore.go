package vm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The shared kernel store. The uncompressed kernel is 63 MiB (31 MiB allocated: xz writes
// its runs of zeros as holes) and the same for every image of one host kernel, so it is kept
// once under the image root, kernels/RELEASE-DIGEST/vmlinux (DIGEST: the first 12 hex digits
// of the bzImage's SHA-256, so a kernel package rebuilt under the same release gets its own),
// and each image's vmlinux is a hard link to it. An image's directory stays self-contained:
// QEMU's -kernel, memNeed, InUse and `images rm` see a file in the image as before, an image
// removed takes only its link, and the kernel's blocks go with its last link. Images built
// before the store hold a copy of their own (one link); they are used as they are, and go
// as any image does (superseded, or `images rm`).
//
// The store's copy counts as a link: a kernel whose vmlinux has no other link (no image,
// no build directory holds it) and that no process names is removed after a build's prune
// and after `images rm` (kernelSelect). A build links the store's copy, or extracts the
// kernel into its own directory and then links that into the store (both atomic), so the
// store never holds a partial kernel and no image ever loses its kernel: a kernel removed
// from the store while a build links it only leaves that build's image a copy of its own.

// kernelStore is the shared kernels' directory under the image root (never an image key:
// keys are hex digits or deb-*).
const kernelStore = "kernels"

// kernelFile is where the store keeps the uncompressed kernel of bzImage (release).
func (b Builder) kernelFile(release, bzImage string) (string, error) {
	d, err := fileDigest(bzImage)
	if err != nil {
		return "", fmt.Errorf("read kernel %s: %w", bzImage, err)
	}
	return filepath.Join(b.root(), kernelStore, release+"-"+d[:12], "vmlinux"), nil
}

// linkKernel puts the uncompressed kernel of bzImage at dst (a new file in a build
// directory): a hard link to the store's copy, which is extracted first when the store has
// none. When the store cannot take it, the image keeps a copy of its own and a warning says
// why.
func (b Builder) linkKernel(release, bzImage, dst string) error {
	shared, err := b.kernelFile(release, bzImage)
	if err != nil {
		return err
	}
	linkErr := os.Link(shared, dst)
	if linkErr == nil {
		return nil
	}
	if err := extractVMLinux(bzImage, dst); err != nil {
		return err
	}
	if !errors.Is(linkErr, os.ErrNotExist) {
		b.logf("warning: share the guest kernel: %v; the image gets a copy of its own", linkErr)
		return nil
	}
	// A prune may remove the kernel's empty directory between MkdirAll and Link: try again.
	for try := 0; ; try++ {
		if err = os.MkdirAll(filepath.Dir(shared), 0o755); err == nil {
			err = os.Link(dst, shared)
		}
		if err == nil {
			return nil
		}
		if errors.Is(err, os.ErrExist) {
			// Stored by another build meanwhile: take that copy, drop this one.
			next := dst + ".shared"
			if os.Link(shared, next) == nil {
				if os.Rename(next, dst) != nil {
					_ = os.Remove(next)
				}
			}
			return nil
		}
		if !errors.Is(err, os.ErrNotExist) || try == 2 {
			b.logf("warning: share the guest kernel: %v; the image keeps a copy of its own", err)
			return nil
		}
	}
}

// storedKernel is a kernel in the store as kernelSelect sees it.
type storedKernel struct {
	ID    string   // RELEASE-DIGEST, its directory under kernels/
	Links int      // hard links to its vmlinux, the store's own among them; 0 = no vmlinux
	VMs   []string // processes naming a file of it (InUse's "kernels/ID")
	Bytes int64    // allocated
}

// kernelSelect chooses the stored kernels to remove: those whose vmlinux has no link but
// the store's (no image and no build holds it) and that no process names, and directories
// left without a vmlinux.
func kernelSelect(ks []storedKernel) (remove []storedKernel) {
	for _, k := range ks {
		if k.Links <= 1 && len(k.VMs) == 0 {
			remove = append(remove, k)
		}
	}
	return remove
}

// listKernels reads the store, with the processes naming its files (InUse's map).
func (b Builder) listKernels(use map[string][]string) ([]storedKernel, error) {
	ents, err := os.ReadDir(filepath.Join(b.root(), kernelStore))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list shared guest kernels: %w", err)
	}
	var out []storedKernel
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		k := storedKernel{ID: e.Name(), VMs: use[kernelStore+"/"+e.Name()]}
		if st, err := os.Stat(filepath.Join(b.root(), kernelStore, e.Name(), "vmlinux")); err == nil {
			if sys, ok := st.Sys().(*syscall.Stat_t); ok {
				k.Links = int(sys.Nlink)
				k.Bytes = sys.Blocks * 512
			}
		}
		out = append(out, k)
	}
	return out, nil
}

// pruneKernels removes the stored kernels nothing uses (kernelSelect) and returns their IDs
// and the space freed.
func (b Builder) pruneKernels(use map[string][]string) (gone []string, bytes int64, err error) {
	ks, err := b.listKernels(use)
	if err != nil {
		return nil, 0, err
	}
	for _, k := range kernelSelect(ks) {
		dir := filepath.Join(b.root(), kernelStore, k.ID)
		if err := os.Remove(filepath.Join(dir, "vmlinux")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return gone, bytes, fmt.Errorf("remove shared guest kernel %s: %w", k.ID, err)
		}
		_ = os.Remove(dir) // not empty: a build stored the kernel again meanwhile
		if k.Links > 0 {
			gone = append(gone, k.ID)
			bytes += k.Bytes
		}
	}
	return gone, bytes, nil
}

// imageRefKey maps what imageRefs found under an image root, KEY/FILE, to InUse's key: the
// image's key, or "kernels/ID" for a shared kernel.
func imageRefKey(key, file string) string {
	if key == kernelStore {
		id, _, _ := strings.Cut(file, "/")
		return kernelStore + "/" + id
	}
	return key
}
