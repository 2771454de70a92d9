// Package cgroup keeps per-node CPU accounting and process tracking in
// control groups under one root ("sfclab" by default).
//
// On a cgroup v1 (or hybrid) host the groups live in the cpuacct hierarchy
// (/sys/fs/cgroup/cpuacct/sfclab/..., wherever /proc/mounts says cpuacct is
// mounted); on a pure v2 host they live at /sys/fs/cgroup/sfclab/...,
// without enabling any controller: cpu.stat is kept by the cgroup core.
// Usage counters are hierarchical on both versions: a group's CPU includes
// its descendants'.
package cgroup

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNotFound reports that a group does not exist.
var ErrNotFound = errors.New("not found")

// ErrNoHierarchy reports that neither a cgroup v1 cpuacct hierarchy nor a
// cgroup v2 hierarchy is mounted.
var ErrNoHierarchy = errors.New("no cpuacct or cgroup2 hierarchy mounted")

// DefaultRootName is the directory all groups live under.
const DefaultRootName = "sfclab"

var (
	rootMu   sync.Mutex
	rootName = DefaultRootName
)

// SetRootName changes the directory all groups live under (tests use
// "sfclab-test"). It panics if name is not a single path element. Call it
// before creating or opening groups.
func SetRootName(name string) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		panic(fmt.Sprintf("cgroup: invalid root name %q", name))
	}
	rootMu.Lock()
	rootName = name
	rootMu.Unlock()
}

func currentRootName() string {
	rootMu.Lock()
	defer rootMu.Unlock()
	return rootName
}

// hierarchy is the mounted cgroup tree the groups are made in.
type hierarchy struct {
	mount string
	v2    bool
}

var detect = sync.OnceValues(func() (hierarchy, error) {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return hierarchy{}, fmt.Errorf("find cgroup hierarchy: %w", err)
	}
	return parseMounts(b)
})

// parseMounts picks the v1 cpuacct hierarchy if there is one, else the
// cgroup2 mount (the one at /sys/fs/cgroup first).
func parseMounts(b []byte) (hierarchy, error) {
	var v2 []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		mnt := unescapeMount(f[1])
		switch f[2] {
		case "cgroup":
			if slices.Contains(strings.Split(f[3], ","), "cpuacct") {
				return hierarchy{mount: mnt}, nil
			}
		case "cgroup2":
			v2 = append(v2, mnt)
		}
	}
	if len(v2) == 0 {
		return hierarchy{}, fmt.Errorf("find cgroup hierarchy: %w", ErrNoHierarchy)
	}
	if slices.Contains(v2, "/sys/fs/cgroup") {
		return hierarchy{mount: "/sys/fs/cgroup", v2: true}, nil
	}
	return hierarchy{mount: v2[0], v2: true}, nil
}

// unescapeMount undoes the octal escapes (\040 for space) of /proc/mounts.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
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

// Root returns the absolute directory all groups live under, for example
// /sys/fs/cgroup/cpuacct/sfclab, or "" if no usable hierarchy is mounted.
func Root() string {
	h, err := detect()
	if err != nil {
		return ""
	}
	return filepath.Join(h.mount, currentRootName())
}

// Version returns 1 or 2, the cgroup version groups are made with, or 0 if
// no usable hierarchy is mounted.
func Version() int {
	h, err := detect()
	switch {
	case err != nil:
		return 0
	case h.v2:
		return 2
	}
	return 1
}

// Group is one control group under the root.
type Group struct {
	rel string // relative to the root; "" is the root itself
	dir string
	v2  bool
	// twin is the group's directory in the v1 cpuset hierarchy once it is confined to cores
	// (SetCPUs, or found by Open); "" otherwise.
	twin string
}

func cleanRel(rel string) (string, error) {
	if rel == "" {
		return "", nil
	}
	c := path.Clean(rel)
	if c == "." {
		return "", nil
	}
	if !filepath.IsLocal(c) || strings.ContainsRune(c, 0) {
		return "", fmt.Errorf("invalid group path %q", rel)
	}
	return c, nil
}

func locate(rel string) (*Group, error) {
	c, err := cleanRel(rel)
	if err != nil {
		return nil, err
	}
	h, err := detect()
	if err != nil {
		return nil, err
	}
	return &Group{rel: c, dir: filepath.Join(h.mount, currentRootName(), c), v2: h.v2}, nil
}

// Create makes the group at rel under the root (for example
// "labs/LAB/NODE"), with its parents; an existing group is opened. rel ""
// is the root itself.
//
// Equivalent to: mkdir -p /sys/fs/cgroup/cpuacct/sfclab/REL
func Create(rel string) (*Group, error) {
	g, err := locate(rel)
	if err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", rel, err)
	}
	if err := os.MkdirAll(g.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", rel, err)
	}
	return g, nil
}

// Open opens an existing group; a missing one gives an error wrapping
// [ErrNotFound].
func Open(rel string) (*Group, error) {
	g, err := locate(rel)
	if err != nil {
		return nil, fmt.Errorf("open cgroup %s: %w", rel, err)
	}
	if _, err := os.Stat(g.ProcsFile()); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = ErrNotFound
		}
		return nil, fmt.Errorf("open cgroup %s: %w", rel, err)
	}
	if t := twinDir(g.rel, g.v2); t != "" {
		if _, err := os.Stat(filepath.Join(t, "cgroup.procs")); err == nil {
			g.twin = t
		}
	}
	return g, nil
}

// List returns the names of the groups directly under relPrefix, sorted
// (open one with Open(relPrefix + "/" + name)). A missing relPrefix gives
// an empty list.
//
// Equivalent to: ls /sys/fs/cgroup/cpuacct/sfclab/RELPREFIX
func List(relPrefix string) ([]string, error) {
	g, err := locate(relPrefix)
	if err != nil {
		return nil, fmt.Errorf("list cgroups under %s: %w", relPrefix, err)
	}
	entries, err := os.ReadDir(g.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list cgroups under %s: %w", relPrefix, err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Rel returns the group's path relative to the root.
func (g *Group) Rel() string { return g.rel }

// Path returns the group's directory (the one holding cgroup.procs).
func (g *Group) Path() string { return g.dir }

// ProcsFile returns the group's cgroup.procs file; writing a PID there
// moves that process into the group.
func (g *Group) ProcsFile() string { return filepath.Join(g.dir, "cgroup.procs") }

func (g *Group) name() string {
	if g.rel == "" {
		return "(root)"
	}
	return g.rel
}

// AddProc moves process pid (all its threads) into the group.
//
// Equivalent to: echo PID > PATH/cgroup.procs
func (g *Group) AddProc(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("add pid %d to cgroup %s: invalid pid", pid, g.name())
	}
	for _, f := range g.ProcsFiles() {
		if err := writeFile(f, strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("add pid %d to cgroup %s: %w", pid, g.name(), err)
		}
	}
	return nil
}

func writeFile(name, value string) error {
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(value); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Procs returns the PIDs of the processes directly in the group (not its
// descendants), sorted.
//
// Equivalent to: cat PATH/cgroup.procs
func (g *Group) Procs() ([]int, error) {
	pids, err := readPids(g.ProcsFile())
	if err != nil {
		if gone(err) {
			err = ErrNotFound
		}
		return nil, fmt.Errorf("list procs of cgroup %s: %w", g.name(), err)
	}
	return pids, nil
}

// gone says whether err is what reading a cgroup's file answers once the group is removed:
// ENOENT, or on cgroup v1 ENODEV for a directory removed while it was being walked (seen in
// VM benchmark destroys: "cgroup.procs: no such device").
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV)
}

func readPids(file string) ([]int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", file, err)
		}
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return slices.Compact(pids), nil
}

// Usage is CPU time consumed by a group and its descendants.
type Usage struct {
	User, System time.Duration
}

// Total returns User + System.
func (u Usage) Total() time.Duration { return u.User + u.System }

// CPU returns the CPU time used by the group's processes, descendants
// included, since the group was created. On v1 it reads
// cpuacct.usage_user/usage_sys (nanoseconds), falling back to cpuacct.stat
// (clock ticks); on v2 cpu.stat user_usec/system_usec.
func (g *Group) CPU() (Usage, error) {
	u, err := g.cpu()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w: %w", ErrNotFound, err)
		}
		return Usage{}, fmt.Errorf("read cpu of cgroup %s: %w", g.name(), err)
	}
	return u, nil
}

func (g *Group) cpu() (Usage, error) {
	if g.v2 {
		kv, err := readKV(filepath.Join(g.dir, "cpu.stat"))
		if err != nil {
			return Usage{}, err
		}
		return Usage{
			User:   time.Duration(kv["user_usec"]) * time.Microsecond,
			System: time.Duration(kv["system_usec"]) * time.Microsecond,
		}, nil
	}
	user, uerr := readUint(filepath.Join(g.dir, "cpuacct.usage_user"))
	sys, serr := readUint(filepath.Join(g.dir, "cpuacct.usage_sys"))
	if uerr == nil && serr == nil {
		return Usage{User: time.Duration(user), System: time.Duration(sys)}, nil
	}
	// Kernels before 4.6 have only cpuacct.stat, in USER_HZ ticks.
	kv, err := readKV(filepath.Join(g.dir, "cpuacct.stat"))
	if err != nil {
		return Usage{}, err
	}
	tick := time.Second / time.Duration(clockTicks())
	return Usage{
		User:   time.Duration(kv["user"]) * tick,
		System: time.Duration(kv["system"]) * tick,
	}, nil
}

func readUint(file string) (uint64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", file, err)
	}
	return v, nil
}

func readKV(file string) (map[string]uint64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	kv := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			kv[f[0]] = v
		}
	}
	return kv, nil
}

// clockTicks returns USER_HZ from the auxiliary vector (AT_CLKTCK), 100 if
// it cannot be read.
var clockTicks = sync.OnceValue(func() int64 {
	const atClktck = 17
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 100
	}
	for i := 0; i+16 <= len(b); i += 16 {
		k := binary.NativeEndian.Uint64(b[i:])
		v := binary.NativeEndian.Uint64(b[i+8:])
		if k == atClktck && v > 0 && v < 1e6 {
			return int64(v)
		}
		if k == 0 {
			break
		}
	}
	return 100
})

// subtree returns the group's directory and those of all its descendants,
// deepest first.
func (g *Group) subtree() ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(g.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed meanwhile
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	slices.SortStableFunc(dirs, func(a, b string) int {
		return strings.Count(b, "/") - strings.Count(a, "/")
	})
	return dirs, err
}

// allProcs lists the PIDs in the group and its descendants.
func (g *Group) allProcs() ([]int, error) {
	dirs, err := g.subtree()
	if err != nil {
		return nil, err
	}
	var all []int
	for _, d := range dirs {
		pids, err := readPids(filepath.Join(d, "cgroup.procs"))
		if err != nil && !gone(err) {
			return nil, err
		}
		all = append(all, pids...)
	}
	slices.Sort(all)
	return slices.Compact(all), nil
}

// Kill sends SIGKILL to every process in the group and its descendants (on
// v2 through cgroup.kill when the kernel has it, else one by one, repeated
// to catch processes forked meanwhile) and waits until they are gone or
// timeout passes. Killed children of the caller still need to be reaped
// by it, but they no longer count as members. A missing group is not an
// error.
//
// Equivalent to: echo 1 > PATH/cgroup.kill (v2), or kill -9 $(cat PATH/cgroup.procs)
func (g *Group) Kill(timeout time.Duration) error {
	if _, err := os.Stat(g.dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	deadline := time.Now().Add(timeout)
	pids, err := g.allProcs()
	if err != nil {
		return fmt.Errorf("kill cgroup %s: %w", g.name(), err)
	}
	if slices.Contains(pids, os.Getpid()) {
		return fmt.Errorf("kill cgroup %s: refusing to kill sfclab itself (pid %d)", g.name(), os.Getpid())
	}
	usedKillFile := false
	if g.v2 && len(pids) > 0 {
		err := writeFile(filepath.Join(g.dir, "cgroup.kill"), "1")
		usedKillFile = err == nil
	}
	wait := time.Millisecond
	for {
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kill cgroup %s: %d processes left after %s: %v", g.name(), len(pids), timeout, pids)
		}
		if !usedKillFile {
			for _, pid := range pids {
				if err := unix.Kill(pid, unix.SIGKILL); err != nil && err != unix.ESRCH {
					return fmt.Errorf("kill cgroup %s: pid %d: %w", g.name(), pid, err)
				}
			}
		}
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
		if pids, err = g.allProcs(); err != nil {
			return fmt.Errorf("kill cgroup %s: %w", g.name(), err)
		}
	}
}

// RemoveTimeout bounds how long Remove waits for killed processes to go.
const RemoveTimeout = 5 * time.Second

// Remove kills the group's processes (see [Group.Kill]) and removes the
// group and all its descendants, deepest first. A missing group is not an
// error. Removing the root group ("") removes every group.
//
// Equivalent to: kill -9 ...; find PATH -depth -type d -exec rmdir {} \;
func (g *Group) Remove() error {
	if err := g.Kill(RemoveTimeout); err != nil {
		return fmt.Errorf("remove cgroup %s: %w", g.name(), err)
	}
	// The cpuset twin first: a crash in between leaves the group itself, which destroy finds.
	if err := g.removeTwin(); err != nil {
		return fmt.Errorf("remove cgroup %s: %w", g.name(), err)
	}
	dirs, err := g.subtree()
	if err != nil {
		return fmt.Errorf("remove cgroup %s: %w", g.name(), err)
	}
	for _, d := range dirs {
		if err := rmdir(d); err != nil {
			return fmt.Errorf("remove cgroup %s: %w", g.name(), err)
		}
	}
	return nil
}

// rmdir removes one cgroup directory, retrying briefly while the kernel
// still reports it busy (tasks that are exiting).
func rmdir(dir string) error {
	deadline := time.Now().Add(time.Second)
	for {
		err := unix.Rmdir(dir)
		switch {
		case err == nil, err == unix.ENOENT:
			return nil
		case err == unix.EBUSY && time.Now().Before(deadline):
			time.Sleep(10 * time.Millisecond)
		default:
			return &fs.PathError{Op: "rmdir", Path: dir, Err: err}
		}
	}
}
