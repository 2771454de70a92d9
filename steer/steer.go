// Package steer is sfclab's transparent data plane: a tc ingress (tcx) eBPF program on the
// host-side end of every port's veth that steers packets through port chains with
// networking-sfc semantics (see bpf/steer.c for the per-packet walk), and the BPF maps that
// hold the compiled chains (sfc.Tables). Changing a chain is Apply with new tables: a handful
// of map updates, no reattachment.
//
// Maps are pinned under /sys/fs/bpf/sfclab/LAB so later commands (inspect, chain changes,
// destroy) find them; programs stay attached (by tcx, or as tc filters without it) until
// their interface goes (the host namespace is deleted) or Detach removes them.
package steer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	gosync "sync"

	"github.com/cilium/ebpf"
	"github.com/sfclab/sfclab/sfc"
	"golang.org/x/sys/unix"
)

// PinRoot is where every lab's maps are pinned: PinRoot/LAB/MAP.
const PinRoot = "/sys/fs/bpf/sfclab"

// ErrNotLoaded says a lab has no pinned data plane.
var ErrNotLoaded = errors.New("no steering data plane pinned")

// PinDir returns the pin directory of a lab's maps.
func PinDir(lab string) string { return filepath.Join(PinRoot, lab) }

// NodePin names the maps of one Kubernetes node's part of a lab whose hosts are nodes of a
// cluster (LAB@NODE): each node's agent pins its own part, and nodes that share a machine's
// BPF file system (the test cluster's second node) must not share the maps. Unpin(lab) and
// Pinned count them as the lab's.
func NodePin(lab, node string) string { return lab + "@" + node }

// labOfPin returns the lab a pin directory's name belongs to (LAB or LAB@NODE).
func labOfPin(name string) string {
	if i := strings.IndexByte(name, '@'); i >= 0 {
		return name[:i]
	}
	return name
}

// Dataplane is a lab's loaded maps and one program copy per emulated host (each knows its
// host id; all share the maps).
type Dataplane struct {
	lab   string
	maps  steerMaps
	ports map[uint32]*ebpf.Program // host id -> steer_port
	tunl  map[uint32]*ebpf.Program // host id -> steer_tunnel
}

// Load creates (or reopens, if pinned) the lab's maps under PinDir(lab) and loads the
// programs for the given host ids.
// Equivalent to: bpftool prog loadall steer_bpfel.o /sys/fs/bpf/... pinmaps /sys/fs/bpf/sfclab/LAB
func Load(lab string, hosts []uint32) (*Dataplane, error) {
	dir := PinDir(lab)
	// Mounting and pinning happen under the lock the last Unpin unmounts under, so one lab's
	// destroy never unmounts the file system another lab is about to pin in.
	unlock, err := lockMount()
	if err != nil {
		return nil, fmt.Errorf("load steering: %w", err)
	}
	defer unlock()
	if err := mountBPFFS(); err != nil {
		return nil, fmt.Errorf("load steering: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("load steering: create pin dir: %w", err)
	}
	spec, err := steerSpec()
	if err != nil {
		return nil, fmt.Errorf("load steering spec: %w", err)
	}
	for _, m := range spec.Maps {
		if m.Name == ".rodata" || m.Name == ".bss" || m.Name == ".data" {
			continue
		}
		m.Pinning = ebpf.PinByName
	}
	d := &Dataplane{lab: lab, ports: map[uint32]*ebpf.Program{}, tunl: map[uint32]*ebpf.Program{}}
	opts := &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: dir}}
	for i, h := range hosts {
		s := spec.Copy()
		if err := s.Variables["host_id"].Set(h); err != nil {
			d.Close()
			return nil, fmt.Errorf("load steering: set host id: %w", err)
		}
		var objs steerObjects
		if err := s.LoadAndAssign(&objs, opts); err != nil {
			d.Close()
			var ve *ebpf.VerifierError
			if errors.As(err, &ve) {
				return nil, fmt.Errorf("load steering program: %+v", ve)
			}
			return nil, fmt.Errorf("load steering program: %w", err)
		}
		if i == 0 {
			d.maps = objs.steerMaps
		} else {
			objs.steerMaps.Close()
		}
		d.ports[h] = objs.SteerPort
		d.tunl[h] = objs.SteerTunnel
	}
	if len(hosts) == 0 {
		var maps steerMaps
		if err := spec.LoadAndAssign(&maps, opts); err != nil {
			return nil, fmt.Errorf("load steering maps: %w", err)
		}
		d.maps = maps
	}
	return d, nil
}

// parsed is the embedded object's spec, parsed once per process (a chain change reopens the
// maps each time; parsing the ELF again would be most of that).
var parsed struct {
	once gosync.Once
	spec *ebpf.CollectionSpec
	err  error
}

// steerSpec returns a copy of the parsed spec, free to change.
func steerSpec() (*ebpf.CollectionSpec, error) {
	parsed.once.Do(func() { parsed.spec, parsed.err = loadSteer() })
	if parsed.err != nil {
		return nil, parsed.err
	}
	return parsed.spec.Copy(), nil
}

// mountBPFFS mounts the BPF filesystem at /sys/fs/bpf when it is not there, as tc does.
// Equivalent to: mount -t bpf bpf /sys/fs/bpf
func mountBPFFS() error {
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/bpf", &st); err != nil {
		return fmt.Errorf("stat /sys/fs/bpf: %w", err)
	}
	if st.Type == unix.BPF_FS_MAGIC {
		return nil
	}
	if err := unix.Mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700"); err != nil {
		return fmt.Errorf("mount bpffs on /sys/fs/bpf: %w", err)
	}
	// Remember that sfclab mounted it, so the last Unpin can leave the host as it was.
	if err := os.MkdirAll(filepath.Dir(MountedMark), 0o755); err == nil {
		_ = os.WriteFile(MountedMark, nil, 0o644)
	}
	return nil
}

// MountLock serializes mounting, pinning and unmounting the BPF filesystem between sfclab
// processes.
const MountLock = "/run/sfclab/bpffs.lock"

// lockMount takes MountLock, waiting for it; the returned function releases it.
// Equivalent to: flock /run/sfclab/bpffs.lock
func lockMount() (func(), error) {
	if err := os.MkdirAll(filepath.Dir(MountLock), 0o755); err != nil {
		return nil, fmt.Errorf("lock bpffs: %w", err)
	}
	f, err := os.OpenFile(MountLock, os.O_CREATE|os.O_RDWR, 0o644) // Go opens close-on-exec
	if err != nil {
		return nil, fmt.Errorf("lock bpffs: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock bpffs: %w", err)
	}
	return func() { f.Close() }, nil
}

// MountedMark exists while the BPF filesystem at /sys/fs/bpf is one sfclab mounted.
const MountedMark = "/run/sfclab/bpffs-mounted"

// kernelEntries are what the kernel itself shows in a fresh BPF filesystem (bpf_preload).
var kernelEntries = map[string]bool{"maps.debug": true, "progs.debug": true}

// unmountIfOurs unmounts /sys/fs/bpf when sfclab mounted it and nothing but the kernel's own
// entries is left in it: a host that had no BPF filesystem mounted gets none back.
// Equivalent to: umount /sys/fs/bpf
func unmountIfOurs() {
	if _, err := os.Stat(MountedMark); err != nil {
		return
	}
	ents, err := os.ReadDir("/sys/fs/bpf")
	if err != nil {
		return
	}
	for _, e := range ents {
		if !kernelEntries[e.Name()] {
			return // something else is pinned: leave it mounted
		}
	}
	if err := unix.Unmount("/sys/fs/bpf", 0); err == nil {
		_ = os.Remove(MountedMark)
	}
}

// Open reopens a deployed lab's pinned maps (no programs): for inspect and chain changes.
func Open(lab string) (*Dataplane, error) {
	if _, err := os.Stat(PinDir(lab)); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open steering of lab %s: %w", lab, ErrNotLoaded)
	}
	return Load(lab, nil)
}

// Close releases this process's handles; pinned maps and attached programs stay.
func (d *Dataplane) Close() error {
	for _, p := range d.ports {
		p.Close()
	}
	for _, p := range d.tunl {
		p.Close()
	}
	return d.maps.Close()
}

// Unpin removes a lab's pinned maps; the kernel frees them once no attached program uses
// them. Nothing pinned is not an error.
// Equivalent to: rm -r /sys/fs/bpf/sfclab/LAB
func Unpin(lab string) error {
	unlock, err := lockMount()
	if err != nil {
		return fmt.Errorf("unpin steering maps of lab %s: %w", lab, err)
	}
	defer unlock()
	if err := os.RemoveAll(PinDir(lab)); err != nil {
		return fmt.Errorf("unpin steering maps of lab %s: %w", lab, err)
	}
	// The lab's nodes' parts (NodePin), when lab is a lab's name.
	if !strings.Contains(lab, "@") {
		parts, _ := filepath.Glob(PinDir(NodePin(lab, "*")))
		for _, d := range parts {
			if err := os.RemoveAll(d); err != nil {
				return fmt.Errorf("unpin steering maps of lab %s: %w", lab, err)
			}
		}
	}
	// Leave PinRoot when it is empty, so nothing of sfclab stays in /sys/fs/bpf.
	if ents, err := os.ReadDir(PinRoot); err == nil && len(ents) == 0 {
		_ = os.Remove(PinRoot)
	}
	unmountIfOurs()
	return nil
}

// Pinned lists the labs that have pinned maps (for destroy --all).
func Pinned() ([]string, error) {
	ents, err := os.ReadDir(PinRoot)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list pinned steering maps: %w", err)
	}
	var out []string
	for _, e := range ents {
		if lab := labOfPin(e.Name()); !slices.Contains(out, lab) {
			out = append(out, lab)
		}
	}
	return out, nil
}

// Maps is a lab's pinned steering maps as deploy, `sfclab inspect` and `sfclab serve` use
// them: the Dataplane of the machine they are pinned on (Open), or a runtime's stand-in that
// reaches them on the machine where they are (the kubernetes runtime's agent).
type Maps interface {
	// Apply replaces the chains the maps hold (Dataplane.Apply).
	Apply(t *sfc.Tables) error
	// Counters reads the per-hop counters (Dataplane.Counters).
	Counters() ([]HopCounter, error)
	// Picks reads the instances groups picked for recent flows (Dataplane.Picks).
	Picks() ([]Pick, error)
	Close() error
}

var _ Maps = (*Dataplane)(nil)
