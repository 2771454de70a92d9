package docker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"
	"github.com/sfclab/sfclab/runtime/debian"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// BasePackages are the Debian packages every node image has whatever the kinds: what the
// runtime and the probes run inside a node.
var BasePackages = []string{"iperf3", "iproute2", "iputils-ping", "procps", "stress-ng"}

// Packages are the Debian packages of sfclab's node image, sorted: the base ones and those
// every registered function kind needs (vnf.ImagePackager; apache2 brings ab with
// apache2-utils).
func Packages() []string {
	out := append(slices.Clone(BasePackages), kinds.ImagePackages()...)
	slices.Sort(out)
	return slices.Compact(out)
}

// ImageRepo is the repository of the images `sfclab images build` makes; the tag is a hash
// of what went into the image (see ImageTag).
const ImageRepo = "sfclab/node"

// imageRecipe changes whenever the way the image is built changes, so that its tag does too.
const imageRecipe = "debootstrap minbase v1"

// imagePath is the PATH of processes in the image (an imported root filesystem has no ENV).
const imagePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ImageTag is the tag of the node image of a suite and package list: the first 12 hex digits
// of a SHA-256 over the recipe, the suite and the sorted packages.
func ImageTag(suite string, packages []string) string {
	pk := slices.Clone(packages)
	sort.Strings(pk)
	h := sha256.Sum256([]byte(imageRecipe + "\n" + suite + "\n" + strings.Join(pk, "\n")))
	return hex.EncodeToString(h[:])[:12]
}

// DefaultImage is the node image for this host (its Debian suite and Packages).
func DefaultImage() string { return ImageRepo + ":" + ImageTag(hostSuite(), Packages()) }

// BuildProgress is one step of an image build, for a progress display (package debian's).
type BuildProgress = debian.Progress

// Source is the Debian archive the node image is bootstrapped from (package debian's).
type Source = debian.Source

// HostSource reads the mirror and suite the host itself installs from (debian.HostSource).
func HostSource() (Source, error) { return debian.HostSource() }

func hostSuite() string { return debian.HostSuite() }

// BuildOptions say how to build the node image; zero values mean the defaults.
type BuildOptions struct {
	// Source is the archive; zero means HostSource().
	Source Source
	// Packages default to Packages.
	Packages []string
	// Force rebuilds even when an image with the same tag exists.
	Force bool
	// TempDir holds the root filesystem while it is built ("" = os.TempDir()).
	TempDir string
	// Progress receives the steps; nil means silent.
	Progress func(BuildProgress)
}

// ImageExists reports whether the engine has an image.
// Equivalent to: docker image inspect REF
func (r Runtime) ImageExists(ctx context.Context, ref string) (bool, error) {
	cli, err := r.client(ctx)
	if err != nil {
		return false, err
	}
	if _, err := cli.ImageInspect(ctx, ref); err != nil {
		if isNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	return true, nil
}

// EnsureImage makes sure the engine has the image a plan's nodes run: sfclab's own node
// image (ref "" or DefaultImage()) is built when missing (minutes; progress goes to
// r.Progress), any other image is pulled when missing.
// Equivalent to: sfclab images build, or docker pull REF
func (r Runtime) EnsureImage(ctx context.Context, ref string) error {
	if ref == "" {
		ref = DefaultImage()
	}
	ok, err := r.ImageExists(ctx, ref)
	if err != nil || ok {
		return err
	}
	if ref == DefaultImage() {
		buildMu.Lock()
		defer buildMu.Unlock()
		_, err := r.BuildImage(ctx, BuildOptions{Progress: r.Progress}) // reuses one built meanwhile
		return err
	}
	return r.pull(ctx, ref)
}

// pull pulls an image from its registry.
// Equivalent to: docker pull REF
func (r Runtime) pull(ctx context.Context, ref string) error {
	cli, err := r.client(ctx)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("pull image %s (it is not on this host; build or load it: docker load -i FILE, or use sfclab's own: remove docker.image from the lab file)", ref)
	resp, err := cli.ImagePull(ctx, ref, client.ImagePullOptions{})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Close()
	for msg, err := range resp.JSONMessages(ctx) {
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if msg.Error != nil {
			return fmt.Errorf("%s: %s", what, msg.Error.Message)
		}
		if r.Progress != nil && msg.Status != "" {
			r.Progress(BuildProgress{Phase: "pull", Message: strings.TrimSpace(msg.ID + " " + msg.Status)})
		}
	}
	return nil
}

// BuildImage builds sfclab's node image without any registry: debootstrap installs a minimal
// Debian root filesystem with the packages into a temporary directory, from the mirror the
// host's APT sources name, and the engine imports it as a tarball with sfclab's labels. An
// image with the same tag (same suite and packages) is reused unless opts.Force. It returns
// the image reference.
// Equivalent to: debootstrap --variant=minbase --include=PKGS SUITE DIR MIRROR &&
// tar -C DIR -c . | docker import -c 'LABEL sfclab.managed=true ...' - sfclab/node:TAG
func (r Runtime) BuildImage(ctx context.Context, opts BuildOptions) (string, error) {
	pkgs := opts.Packages
	if len(pkgs) == 0 {
		pkgs = Packages()
	}
	src := opts.Source
	if src.Mirror == "" || src.Suite == "" {
		hs, err := HostSource()
		if err != nil {
			return "", fmt.Errorf("build node image: %w", err)
		}
		if src.Mirror == "" {
			src.Mirror = hs.Mirror
		}
		if src.Suite == "" {
			src.Suite = hs.Suite
		}
	}
	ref := ImageRepo + ":" + ImageTag(src.Suite, pkgs)
	progress := opts.Progress
	if progress == nil {
		progress = func(BuildProgress) {}
	}
	if !opts.Force {
		ok, err := r.ImageExists(ctx, ref)
		if err != nil {
			return "", err
		}
		if ok {
			progress(BuildProgress{Phase: "done", Message: "image " + ref + " exists"})
			return ref, nil
		}
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return "", fmt.Errorf("build node image: %w", debian.ErrNoDebootstrap)
	}
	cli, err := r.client(ctx)
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(opts.TempDir, "sfclab-image-")
	if err != nil {
		return "", fmt.Errorf("build node image: %w", err)
	}
	root := filepath.Join(tmp, "rootfs")
	defer func() {
		if err := debian.RemoveTree(tmp); err != nil {
			progress(BuildProgress{Phase: "done", Message: "warning: " + err.Error()})
		}
	}()
	if err := debian.Bootstrap(ctx, src, pkgs, root, progress); err != nil {
		return "", fmt.Errorf("build node image: %w", err)
	}
	var oldID string
	if old, err := cli.ImageInspect(ctx, ref); err == nil {
		oldID = old.ID
	}
	if err := importRootfs(ctx, cli, root, ref, src, pkgs, progress); err != nil {
		return "", fmt.Errorf("build node image: %w", err)
	}
	if oldID != "" {
		// A forced rebuild moved the tag: drop the image it left untagged (unless in use).
		if cur, err := cli.ImageInspect(ctx, ref); err == nil && cur.ID != oldID {
			_, _ = cli.ImageRemove(ctx, oldID, client.ImageRemoveOptions{})
		}
	}
	progress(BuildProgress{Phase: "done", Message: "built image " + ref})
	return ref, nil
}

// importRootfs streams the root filesystem as a tarball into the engine.
func importRootfs(ctx context.Context, cli *client.Client, root, ref string, src Source, pkgs []string, progress func(BuildProgress)) error {
	size := treeSize(root)
	tarCmd := exec.CommandContext(ctx, "tar", "--numeric-owner", "-C", root, "-cf", "-", ".")
	var tarErr bytes.Buffer
	tarCmd.Stderr = &tarErr
	out, err := tarCmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := tarCmd.Start(); err != nil {
		return fmt.Errorf("start tar: %w", err)
	}
	counted := &countingReader{r: out, report: func(n int64) {
		progress(BuildProgress{Phase: "import", Done: min(n, size), Total: size, Message: "importing into the engine"})
	}}
	changes := []string{
		fmt.Sprintf("LABEL %s=true %s=node %s=%s sfclab.suite=%s", LabelManaged, LabelImage, LabelPackages, strings.Join(pkgs, ","), src.Suite),
		"ENV PATH=" + imagePath,
		`CMD ["sleep", "infinity"]`,
	}
	resp, err := cli.ImageImport(ctx, client.ImageImportSource{Source: counted, SourceName: "-"}, ref,
		client.ImageImportOptions{Changes: changes, Message: "sfclab node image: debootstrap " + src.Suite + " from " + src.Mirror})
	if err != nil {
		_ = tarCmd.Process.Kill()
		_ = tarCmd.Wait()
		return fmt.Errorf("import image %s: %w", ref, err)
	}
	defer resp.Close()
	if err := readJSONStream(resp); err != nil {
		_ = tarCmd.Process.Kill()
		_ = tarCmd.Wait()
		return fmt.Errorf("import image %s: %w", ref, err)
	}
	if err := tarCmd.Wait(); err != nil {
		return fmt.Errorf("tar root filesystem: %w: %s", err, strings.TrimSpace(tarErr.String()))
	}
	return nil
}

// readJSONStream reads an engine progress stream to its end and returns the error it reports.
func readJSONStream(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m jsonstream.Message
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if m.Error != nil {
			return errors.New(m.Error.Message)
		}
	}
}

type countingReader struct {
	r      io.Reader
	n      int64
	last   time.Time
	report func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if time.Since(c.last) > 200*time.Millisecond || err != nil {
		c.last = time.Now()
		c.report(c.n)
	}
	return n, err
}

// treeSize sums the sizes of the regular files under dir.
func treeSize(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}

// ImageInfo is one node image sfclab built.
type ImageInfo struct {
	ID       string    `json:"id"`
	Tags     []string  `json:"tags"`
	Created  time.Time `json:"created"`
	Size     int64     `json:"size"`
	Packages string    `json:"packages"`
	// Current is true for the image this host's deploys use (DefaultImage).
	Current bool `json:"current"`
}

// Images lists the node images sfclab built (label sfclab.image=node).
// Equivalent to: docker images --filter label=sfclab.image=node
func (r Runtime) Images(ctx context.Context) ([]ImageInfo, error) {
	cli, err := r.client(ctx)
	if err != nil {
		return nil, err
	}
	res, err := cli.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("label", LabelImage+"=node")})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	cur := DefaultImage()
	var out []ImageInfo
	for _, im := range res.Items {
		out = append(out, ImageInfo{ID: im.ID, Tags: im.RepoTags, Created: time.Unix(im.Created, 0),
			Size: im.Size, Packages: im.Labels[LabelPackages], Current: slices.Contains(im.RepoTags, cur)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out, nil
}

// RemoveImages removes the node images sfclab built, all of them or only those deploys no
// longer use (outdated), and returns their tags. An image a container still uses is refused by
// the engine.
// Equivalent to: docker rmi $(docker images -q --filter label=sfclab.image=node)
func (r Runtime) RemoveImages(ctx context.Context, outdatedOnly bool) ([]string, error) {
	imgs, err := r.Images(ctx)
	if err != nil {
		return nil, err
	}
	cli, err := r.client(ctx)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, im := range imgs {
		if outdatedOnly && im.Current {
			continue
		}
		if _, err := cli.ImageRemove(ctx, im.ID, client.ImageRemoveOptions{Force: true}); err != nil {
			errs = append(errs, fmt.Errorf("remove image %s: %w", strings.Join(im.Tags, ","), err))
			continue
		}
		removed = append(removed, im.Tags...)
	}
	return removed, errors.Join(errs...)
}

// buildMu serialises image builds within one process (deploys in tests run in parallel).
var buildMu sync.Mutex
