package vm

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sfclab/sfclab/spec"
)

// DefaultImageRoot is where guest images are cached: one directory per content key.
const DefaultImageRoot = "/var/lib/sfclab/vm"

// imageFormat changes whenever what goes into an image changes in a way the content list
// does not show (the guest's layout, the init protocol).
const imageFormat = "sfclab-vm-image-2"

// BasePrograms are the host programs every guest image holds besides the function kinds'
// needs: the agent configures the guest's network itself, these are for `sfclab exec` and
// the kinds' shell commands.
var BasePrograms = []string{"ip", "tc", "nft", "iperf3", "ping", "sysctl"}

// guestModules are the kernel modules every guest loads at boot, in order, with their
// dependencies (modules.dep): the virtio transport of microvm, its NICs and the agent's
// serial port.
var guestModules = []string{"virtio_mmio", "virtio_net", "virtio_console"}

// helperModules are modules the kernel asks for by alias at run time (libcrc32c, which
// conntrack and nf_tables need, asks for "crypto-crc32c"), so modules.dep does not list them,
// and the 9p modules init loads only when it mounts the shared directory.
// The textsearch modules are asked for by name (xt_string, nft's string match).
var helperModules = slices.Concat([]string{"crc32c_generic", "ts_bm", "ts_kmp", "ts_fsm"}, diagModules, shareModules)

// diagModules are the socket diagnostics `ss` asks the kernel for: it queries sock_diag over
// netlink for each family's sockets, and the kernel loads the family's module by its alias
// (net-pf-16-proto-4-type-N, by modprobe). Without them ss falls back to /proc/net/tcp: it
// lists the sockets, but `ss -i` shows none of TCP's state (rtt, cwnd, bytes, delivery rate)
// and a listener's backlog reads 0 (seen in a Debian guest with the modules removed).
var diagModules = []string{"inet_diag", "tcp_diag", "udp_diag", "raw_diag", "unix_diag", "af_packet_diag", "netlink_diag"}

// moduleSet names every module and module tree a guest image takes from the host's kernel
// (DebianKey: a Debian root is rebuilt when it changes).
func moduleSet() string {
	return strings.Join(slices.Concat(guestModules, helperModules, moduleTrees, rootModules), " ")
}

// moduleTrees are the module directories copied whole into the image, so that nftables,
// iptables and tc find their modules when the kernel asks for them (kmod as modprobe). Not
// kernel/lib whole: 6 MB of it (test_bpf.ko alone 4.8 MB) were test and storage modules that
// every boot unpacked; the library modules the trees need come as their dependencies.
var moduleTrees = []string{"kernel/net/netfilter", "kernel/net/ipv4/netfilter", "kernel/net/ipv6/netfilter", "kernel/net/sched", "kernel/net/bridge"}

// Image is a built guest image: an uncompressed kernel booted directly and an uncompressed
// initramfs with the sfclab binary as init and agent.
type Image struct {
	Dir      string    `json:"-"`
	Key      string    `json:"key"`
	Kernel   string    `json:"kernel"`   // kernel release (uname -r in the guest)
	Programs []string  `json:"programs"` // host programs copied in, sorted
	Created  time.Time `json:"created"`
	Bytes    int64     `json:"bytes"` // size of the initramfs
	// Kind is spec.VMImageBusybox ("" in images built before the field) or
	// spec.VMImageDebian.
	Kind string `json:"kind,omitempty"`
	// Suite and Packages are a Debian image's: what debootstrap installed.
	Suite    string   `json:"suite,omitempty"`
	Packages []string `json:"packages,omitempty"`
	// DiskBytes is a Debian image's root file system's size (allocated, the file is sparse).
	DiskBytes int64 `json:"disk_bytes,omitempty"`
	// BuildSeconds is how long the image took to build.
	BuildSeconds float64 `json:"build_seconds,omitempty"`

	// boot is a Debian image's initramfs (the agent as init, the modules that mount the
	// root), built per agent binary beside the cached root: not in image.json.
	boot string
}

// VMLinux is the uncompressed kernel's path.
func (im *Image) VMLinux() string { return filepath.Join(im.Dir, "vmlinux") }

// Initramfs is the uncompressed initramfs's path.
func (im *Image) Initramfs() string {
	if im.boot != "" {
		return im.boot
	}
	return filepath.Join(im.Dir, "initramfs.cpio")
}

// Disk is a Debian image's root file system (ext4), "" for a busybox image.
func (im *Image) Disk() string {
	if im.Kind != spec.VMImageDebian {
		return ""
	}
	return filepath.Join(im.Dir, rootfsFile)
}

// Builder builds and finds guest images under Root.
type Builder struct {
	Root string // "" = DefaultImageRoot
	// Agent is the binary that becomes the guest's init ("" = this executable).
	Agent string
	// Log receives progress lines; nil means silent.
	Log func(format string, args ...any)
}

// ImageRootEnv overrides DefaultImageRoot (tests keep their images apart with it).
const ImageRootEnv = "SFCLAB_VM_IMAGES"

func (b Builder) root() string {
	switch {
	case b.Root != "":
		return b.Root
	case os.Getenv(ImageRootEnv) != "":
		return os.Getenv(ImageRootEnv)
	}
	return DefaultImageRoot
}

func (b Builder) logf(format string, args ...any) {
	if b.Log != nil {
		b.Log(format, args...)
	}
}

// ErrNoKernel means no kernel image with its modules is installed on the host.
var ErrNoKernel = errors.New("no kernel image with modules in /boot and /lib/modules: install linux-image-amd64")

// HostKernel returns the newest /boot/vmlinuz-RELEASE whose modules are installed.
func HostKernel() (release, path string, err error) {
	files, _ := filepath.Glob("/boot/vmlinuz-*")
	var ok []string
	for _, f := range files {
		rel := strings.TrimPrefix(filepath.Base(f), "vmlinuz-")
		if st, err := os.Stat(filepath.Join("/lib/modules", rel, "modules.dep")); err == nil && !st.IsDir() {
			ok = append(ok, rel)
		}
	}
	if len(ok) == 0 {
		return "", "", fmt.Errorf("find guest kernel: %w", ErrNoKernel)
	}
	sort.Slice(ok, func(i, j int) bool { return versionLess(ok[i], ok[j]) })
	rel := ok[len(ok)-1]
	return rel, "/boot/vmlinuz-" + rel, nil
}

// versionLess compares kernel releases by their dotted numbers, then as strings.
func versionLess(a, b string) bool {
	num := func(s string) []int {
		var out []int
		for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r < '0' || r > '9' }) {
			n := 0
			fmt.Sscan(f, &n)
			out = append(out, n)
		}
		return out
	}
	if c := slices.Compare(num(a), num(b)); c != 0 {
		return c < 0
	}
	return a < b
}

// content is what an image is built from: initramfs members and the kernel.
type content struct {
	release, bzImage string
	programs         []string
	entries          []cpioEntry
	modules          []string // .ko paths relative to /lib/modules/RELEASE
}

// Ensure returns the image for these programs (kinds.Needs of a lab plus BasePrograms),
// building it when no image with the same content exists; a build removes the images it
// supersedes that are not in use (prune).
func (b Builder) Ensure(programs []string) (*Image, error) {
	c, err := b.collect(programs)
	if err != nil {
		return nil, err
	}
	key, err := c.key()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(b.root(), key)
	touchImage(dir) // before reading it: a build removing it as superseded sees the use
	if im, err := readImage(dir); err == nil {
		return im, nil
	}
	return b.build(c, key, dir)
}

// collect lists what goes into the image: the agent, busybox for a shell and its applets,
// the programs with their shared libraries, kmod as modprobe, and the modules.
func (b Builder) collect(programs []string) (*content, error) {
	rel, bz, err := HostKernel()
	if err != nil {
		return nil, err
	}
	c := &content{release: rel, bzImage: bz}
	agent, err := b.agent()
	if err != nil {
		return nil, err
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		return nil, fmt.Errorf("find busybox: %w; install it: apt-get install busybox-static", err)
	}
	if out, err := exec.Command("file", "-L", busybox).Output(); err == nil && !bytes.Contains(out, []byte("statically linked")) {
		return nil, fmt.Errorf("busybox at %s is not statically linked; install busybox-static", busybox)
	}
	kmod, err := exec.LookPath("kmod")
	if err != nil {
		return nil, fmt.Errorf("find kmod: %w; install it: apt-get install kmod", err)
	}
	have := map[string]bool{}
	add := func(e cpioEntry) {
		if !have[e.Name] {
			have[e.Name] = true
			c.entries = append(c.entries, e)
		}
	}
	add(cpioEntry{Name: "init", Source: agent, Mode: 0o755})
	add(cpioEntry{Name: "bin/busybox", Source: busybox, Mode: 0o755})
	progs := slices.Sorted(slices.Values(append(slices.Clone(BasePrograms), programs...)))
	progs = slices.Compact(progs)
	var bins []string
	for _, p := range append(progs, "kmod") {
		path := kmod
		if p != "kmod" {
			if path, err = lookPath(p); err != nil {
				return nil, fmt.Errorf("find %s for the guest image: %w", p, err)
			}
		}
		add(cpioEntry{Name: path, Source: path, Mode: 0o755})
		bins = append(bins, path)
		// A multi-call binary reached through a symlink (iptables-restore ->
		// xtables-nft-multi) picks its applet by the name it is started as: the guest needs
		// the program's own name too, linked to the copy.
		if link := linkPath(p); p != "kmod" && filepath.Base(path) != p && link != "" && link != path {
			add(cpioEntry{Name: link, Mode: os.ModeSymlink, Target: path})
		}
	}
	c.programs = progs
	libs, err := sharedLibs(append(bins, agent))
	if err != nil {
		return nil, err
	}
	for _, l := range libs {
		add(cpioEntry{Name: l, Source: l, Mode: 0o755})
	}
	for _, name := range []string{"sbin/modprobe", "sbin/insmod", "sbin/lsmod"} {
		add(cpioEntry{Name: name, Mode: os.ModeSymlink, Target: kmod})
	}
	applets, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("list busybox applets: %w", err)
	}
	for _, a := range strings.Fields(string(applets)) {
		// A program the kinds name is copied at its host path (sh: /usr/bin/dash); /bin/sh
		// stays busybox's, as the guest's init and the kinds' shell commands expect.
		if (a == "sh" || !slices.Contains(progs, a)) && a != "modprobe" && a != "insmod" && a != "lsmod" {
			add(cpioEntry{Name: "bin/" + a, Mode: os.ModeSymlink, Target: "busybox"})
		}
	}
	for _, d := range []string{"proc", "sys", "dev", "tmp", "run", "etc", "var/run"} {
		add(cpioEntry{Name: d, Mode: os.ModeDir | 0o755})
	}
	if err := addGuestData(progs, add); err != nil {
		return nil, err
	}
	mods, err := moduleClosure(rel)
	if err != nil {
		return nil, err
	}
	c.modules = mods
	return c, nil
}

// GuestAgentEnv names the binary to put into guest images as their init and agent (tests
// build cmd/sfclab-guest and name it here).
const GuestAgentEnv = "SFCLAB_GUEST_AGENT"

// GuestAgentName is the dedicated guest agent's file name, beside the sfclab binary.
const GuestAgentName = "sfclab-guest"

// agent is the binary that becomes the guest's /init: Builder.Agent, else $SFCLAB_GUEST_AGENT,
// else sfclab-guest beside this executable when both were built from the same source, else
// this executable (any sfclab binary is also an agent: its main calls GuestMain first).
func (b Builder) agent() (string, error) {
	if b.Agent != "" {
		return b.Agent, nil
	}
	if a := os.Getenv(GuestAgentEnv); a != "" {
		if _, err := os.Stat(a); err != nil {
			return "", fmt.Errorf("find the guest agent named by %s: %w", GuestAgentEnv, err)
		}
		return a, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the sfclab binary: %w", err)
	}
	sib := filepath.Join(filepath.Dir(self), GuestAgentName)
	if ok, why := sameBuild(self, sib); ok {
		return sib, nil
	} else if why != "" {
		b.logf("guest agent: %s; the guests run sfclab itself (a larger initramfs)", why)
	}
	return self, nil
}

// sameBuild reports whether the guest agent binary guest was built with sfclab (why not,
// when it exists but was not): the same module, Go version and module versions of every
// dependency, the same VCS revision where the builds record one, and built after sfclab but
// not long after (`make build` builds sfclab, then sfclab-guest), so an agent left from an
// earlier build is not taken (GOFLAGS=-buildvcs=false leaves no revision to compare).
func sameBuild(sfclab, guest string) (bool, string) {
	gst, err := os.Stat(guest)
	if err != nil {
		return false, ""
	}
	st, err := os.Stat(sfclab)
	if err != nil {
		return false, fmt.Sprintf("read %s: %v", sfclab, err)
	}
	a, err := buildinfo.ReadFile(sfclab)
	if err != nil {
		return false, fmt.Sprintf("read the build of %s: %v", sfclab, err)
	}
	g, err := buildinfo.ReadFile(guest)
	if err != nil {
		return false, fmt.Sprintf("read the build of %s: %v", guest, err)
	}
	return sameBuildInfo(a, g, st.ModTime(), gst.ModTime(), guest)
}

// agentBuildWindow is how long after sfclab its guest agent may have been built.
const agentBuildWindow = 10 * time.Minute

func sameBuildInfo(a, g *debug.BuildInfo, aTime, gTime time.Time, guest string) (bool, string) {
	setting := func(bi *debug.BuildInfo, k string) string {
		for _, s := range bi.Settings {
			if s.Key == k {
				return s.Value
			}
		}
		return ""
	}
	deps := map[string]string{}
	for _, d := range a.Deps {
		deps[d.Path] = d.Version
	}
	for _, d := range g.Deps {
		if v, ok := deps[d.Path]; !ok || v != d.Version {
			return false, fmt.Sprintf("%s was built with %s %s, sfclab without it or with another version", guest, d.Path, d.Version)
		}
	}
	switch {
	case a.Main.Path != g.Main.Path || a.GoVersion != g.GoVersion:
		return false, fmt.Sprintf("%s is of %s %s, sfclab of %s %s", guest, g.Main.Path, g.GoVersion, a.Main.Path, a.GoVersion)
	case setting(a, "vcs.revision") != setting(g, "vcs.revision") || setting(a, "vcs.modified") != setting(g, "vcs.modified"):
		return false, fmt.Sprintf("%s was built from another revision than sfclab", guest)
	case gTime.Before(aTime) || gTime.After(aTime.Add(agentBuildWindow)):
		return false, fmt.Sprintf("%s was not built with sfclab (make build builds sfclab, then it, within %s)", guest, agentBuildWindow)
	}
	return true, ""
}

// lookPath finds a program in PATH and the sbin directories a root shell has, its symlinks
// resolved.
func lookPath(p string) (string, error) {
	if path := linkPath(p); path != "" {
		return filepath.EvalSymlinks(path)
	}
	return "", fmt.Errorf("%s: not installed on the host", p)
}

// linkPath is where a program is found by its name (PATH, then the sbin directories a root
// shell has), symlinks not resolved; "" when nowhere.
func linkPath(p string) string {
	if path, err := exec.LookPath(p); err == nil {
		return path
	}
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		if st, err := os.Stat(filepath.Join(d, p)); err == nil && !st.IsDir() {
			return filepath.Join(d, p)
		}
	}
	return ""
}

// sharedLibs lists the shared libraries the binaries load (ldd), each once.
func sharedLibs(bins []string) ([]string, error) {
	set := map[string]bool{}
	for _, b := range bins {
		out, err := exec.Command("ldd", b).Output()
		if err != nil {
			continue // static binaries: "not a dynamic executable"
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			for i, w := range f {
				if strings.HasPrefix(w, "/") && (i == 0 || f[i-1] == "=>") {
					set[w] = true
				}
			}
		}
	}
	return slices.Sorted(func(yield func(string) bool) {
		for k := range set {
			if !yield(k) {
				return
			}
		}
	}), nil
}

// moduleClosure lists the guest's modules and module trees with every dependency, from the
// host's modules.dep for release.
func moduleClosure(release string, extra ...string) ([]string, error) {
	dir := filepath.Join("/lib/modules", release)
	data, err := os.ReadFile(filepath.Join(dir, "modules.dep"))
	if err != nil {
		return nil, fmt.Errorf("read modules of kernel %s: %w", release, err)
	}
	deps := map[string][]string{}
	byName := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		mod, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		deps[mod] = strings.Fields(rest)
		name := strings.TrimSuffix(filepath.Base(mod), ".ko")
		byName[strings.ReplaceAll(name, "-", "_")] = mod
	}
	want := map[string]bool{}
	var visit func(m string)
	visit = func(m string) {
		if want[m] {
			return
		}
		want[m] = true
		for _, d := range deps[m] {
			visit(d)
		}
	}
	for _, m := range append(append(slices.Clone(guestModules), helperModules...), extra...) {
		p, ok := byName[m]
		if !ok {
			return nil, fmt.Errorf("find module %s of kernel %s: not in modules.dep", m, release)
		}
		visit(p)
	}
	for mod := range deps {
		for _, t := range moduleTrees {
			if strings.HasPrefix(mod, t+"/") {
				visit(mod)
			}
		}
	}
	return slices.Sorted(func(yield func(string) bool) {
		for k := range want {
			if !yield(k) {
				return
			}
		}
	}), nil
}

// key is a digest of everything the image is built from: the format, the kernel, and every
// member's name, source, size and modification time (the agent's content, as a rebuilt
// sfclab keeps its path).
func (c *content) key() (string, error) {
	h := sha256.New()
	fmt.Fprintln(h, imageFormat, c.release)
	stamp := func(p string) error {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("read %s for the guest image: %w", p, err)
		}
		fmt.Fprintln(h, p, st.Size(), st.ModTime().UnixNano())
		return nil
	}
	if err := stamp(c.bzImage); err != nil {
		return "", err
	}
	for _, e := range c.entries {
		fmt.Fprintln(h, e.Name, e.Mode, e.Target)
		if e.Source == "" {
			continue
		}
		if e.Name == "init" {
			d, err := fileDigest(e.Source)
			if err != nil {
				return "", fmt.Errorf("read the agent binary: %w", err)
			}
			fmt.Fprintln(h, d)
			continue
		}
		if err := stamp(e.Source); err != nil {
			return "", err
		}
	}
	for _, m := range c.modules {
		if err := stamp(filepath.Join("/lib/modules", c.release, m)); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

var (
	digestMu sync.Mutex
	digests  = map[string]string{} // "path size mtime" -> sha256 of the content
)

// fileDigest is the sha256 of a file's content, computed once per process for each path,
// size and modification time (the agent binary: tens of MB, read at every deploy otherwise).
func fileDigest(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	id := fmt.Sprint(path, st.Size(), st.ModTime().UnixNano())
	digestMu.Lock()
	defer digestMu.Unlock()
	if d, ok := digests[id]; ok {
		return d, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	d := hex.EncodeToString(h.Sum(nil))
	digests[id] = d
	return d, nil
}

// build writes vmlinux (a link to the shared kernel) and initramfs.cpio into a build
// directory and renames it to dir.
func (b Builder) build(c *content, key, dir string) (*Image, error) {
	b.logf("building guest image %s (kernel %s, programs %s)", key, c.release, strings.Join(c.programs, " "))
	tmp, unlock, err := b.newBuildDir()
	if err != nil {
		return nil, err
	}
	defer unlock()
	defer os.RemoveAll(tmp)
	if err := b.linkKernel(c.release, c.bzImage, filepath.Join(tmp, "vmlinux")); err != nil {
		return nil, err
	}
	stage := filepath.Join(tmp, "modroot")
	entries := slices.Clone(c.entries)
	// The agent without its debug information: a third less initramfs for QEMU to load and
	// the guest kernel to unpack at every boot (binutils' strip, when installed).
	for i, e := range entries {
		if e.Name == "init" {
			entries[i].Source = b.stripped(e.Source, filepath.Join(tmp, "init"))
		}
	}
	files, err := stageModules(c.release, c.modules, stage)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		entries = append(entries, cpioEntry{Name: f, Source: filepath.Join(stage, f), Mode: 0o644})
	}
	out, err := os.Create(filepath.Join(tmp, "initramfs.cpio"))
	if err != nil {
		return nil, fmt.Errorf("create initramfs: %w", err)
	}
	if err := writeCPIO(out, entries); err != nil {
		out.Close()
		return nil, fmt.Errorf("write initramfs: %w", err)
	}
	st, err := out.Stat()
	if err != nil {
		out.Close()
		return nil, err
	}
	if err := out.Close(); err != nil {
		return nil, fmt.Errorf("write initramfs: %w", err)
	}
	if err := os.RemoveAll(stage); err != nil {
		return nil, err
	}
	_ = os.Remove(filepath.Join(tmp, "init"))
	im := &Image{Key: key, Kernel: c.release, Kind: spec.VMImageBusybox, Programs: c.programs, Created: time.Now().UTC(), Bytes: st.Size()}
	im, stored, err := storeImage(im, tmp, dir)
	if err != nil || !stored {
		return im, err
	}
	b.logf("guest image %s: initramfs %d MB", key, st.Size()>>20)
	b.prune(im)
	return im, nil
}

// stripped is the agent binary src without its debug information, written to dst (binutils'
// strip, when installed), or src itself when it cannot be stripped.
func (b Builder) stripped(src, dst string) string {
	strip, err := exec.LookPath("strip")
	if err != nil {
		return src
	}
	if out, err := exec.Command(strip, "-o", dst, src).CombinedOutput(); err != nil {
		b.logf("strip the agent: %v: %s (kept as is)", err, bytes.TrimSpace(out))
		return src
	}
	return dst
}

// stageModules copies the host's modules mods of release (paths relative to
// /lib/modules/RELEASE) into root/lib/modules/RELEASE and indexes them there by depmod, so
// kmod and the guest's init find them (and their aliases) as on the host. It returns the
// files written, relative to root.
func stageModules(release string, mods []string, root string) ([]string, error) {
	mdir := filepath.Join(root, "lib/modules", release)
	var out []string
	for _, m := range mods {
		if err := copyFile(filepath.Join("/lib/modules", release, m), filepath.Join(mdir, m)); err != nil {
			return nil, err
		}
		out = append(out, filepath.Join("lib/modules", release, m))
	}
	for _, f := range []string{"modules.builtin", "modules.builtin.modinfo", "modules.order"} {
		if err := copyFile(filepath.Join("/lib/modules", release, f), filepath.Join(mdir, f)); err != nil {
			return nil, err
		}
	}
	if out, err := exec.Command("depmod", "-b", root, release).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("index guest modules: depmod: %w: %s", err, bytes.TrimSpace(out))
	}
	idx, _ := filepath.Glob(filepath.Join(mdir, "modules.*"))
	for _, f := range idx {
		out = append(out, filepath.Join("lib/modules", release, filepath.Base(f)))
	}
	return out, nil
}

func readImage(dir string) (*Image, error) {
	data, err := os.ReadFile(filepath.Join(dir, "image.json"))
	if err != nil {
		return nil, err
	}
	var im Image
	if err := json.Unmarshal(data, &im); err != nil {
		return nil, fmt.Errorf("read image %s: %w", dir, err)
	}
	im.Dir = dir
	return &im, nil
}

// List returns the cached images, newest first.
func (b Builder) List() ([]*Image, error) {
	ents, err := os.ReadDir(b.root())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list guest images: %w", err)
	}
	var out []*Image
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if im, err := readImage(filepath.Join(b.root(), e.Name())); err == nil {
			out = append(out, im)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out, nil
}

// Remove deletes the cached image with this key (or every one for "all"), and the shared
// kernels no image links any more. An image a running VM boots (InUse) stays, and is an
// error naming the VMs ("all" removes the others first).
func (b Builder) Remove(key string) error {
	ims, err := b.List()
	if err != nil {
		return err
	}
	use, err := b.InUse()
	if err != nil {
		return err
	}
	found := false
	var busy []string
	for _, im := range ims {
		if key == "all" || im.Key == key {
			found = true
			if vms := use[im.Key]; len(vms) > 0 {
				busy = append(busy, im.Key+" (in use by "+strings.Join(vms, ", ")+")")
				continue
			}
			if err := os.RemoveAll(im.Dir); err != nil {
				return fmt.Errorf("remove guest image %s: %w", im.Key, err)
			}
		}
	}
	// The shared kernels whose last image went (an error here leaves only disk space).
	_, _, _ = b.pruneKernels(use)
	if !found && key != "all" {
		return fmt.Errorf("remove guest image %s: no such image (sfclab images list --runtime vm)", key)
	}
	if len(busy) > 0 {
		return fmt.Errorf("remove guest image %s: kept %s: destroy the lab first", key, strings.Join(busy, ", "))
	}
	return nil
}

func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}

// xzMagic starts an XZ stream; Debian compresses its kernels with XZ.
var xzMagic = []byte{0xFD, '7', 'z', 'X', 'Z', 0x00}

// extractVMLinux writes the uncompressed kernel (an ELF with a PVH entry, which QEMU boots
// directly) held in a bzImage: the XZ stream in it, decompressed by xz. Decompressing under
// emulation costs seconds per boot; here it is done once per image.
func extractVMLinux(bzImage, dst string) error {
	data, err := os.ReadFile(bzImage)
	if err != nil {
		return fmt.Errorf("read kernel: %w", err)
	}
	off := bytes.Index(data, xzMagic)
	if off < 0 {
		return fmt.Errorf("extract kernel %s: no XZ stream in it (only XZ-compressed kernels are supported)", bzImage)
	}
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("extract kernel: %w", err)
	}
	cmd := exec.Command("xz", "-dc", "--single-stream")
	cmd.Stdin = bytes.NewReader(data[off:])
	cmd.Stdout = out
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("extract kernel %s: xz: %w: %s", bzImage, err, bytes.TrimSpace(stderr.Bytes()))
	}
	head := make([]byte, 4)
	f, err := os.Open(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, []byte("\x7fELF")) {
		return fmt.Errorf("extract kernel %s: the decompressed kernel is not an ELF file", bzImage)
	}
	return nil
}

// BusyboxFiles lists the paths (without the leading /) a busybox guest image for these
// programs holds, without building it.
func (b Builder) BusyboxFiles(programs []string) ([]string, error) {
	c, err := b.collect(programs)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range c.entries {
		out = append(out, strings.TrimPrefix(e.Name, "/"))
	}
	for _, m := range c.modules {
		out = append(out, filepath.Join("lib/modules", c.release, m))
	}
	return out, nil
}

// storeImage writes im's record into the build directory tmp and moves it to dir, where
// the image then is. When another build stored dir meanwhile, that image is returned and
// stored is false (the caller's tmp stays for it to remove).
func storeImage(im *Image, tmp, dir string) (_ *Image, stored bool, err error) {
	data, _ := json.MarshalIndent(im, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "image.json"), data, 0o644); err != nil {
		return nil, false, err
	}
	// Not in the image; the build's lock keeps cleanBuilds away until the rename.
	if err := os.Remove(filepath.Join(tmp, buildMarker)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("store guest image: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(dir); serr == nil {
			other, err := readImage(dir) // built by someone else meanwhile
			return other, false, err
		}
		return nil, false, fmt.Errorf("store guest image: %w", err)
	}
	im.Dir = dir
	return im, true, nil
}
