package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// ErrNoCpuset reports that the kernel offers no cpuset controller (neither a v1 cpuset
// hierarchy nor cpuset in the v2 root's cgroup.controllers).
var ErrNoCpuset = errors.New("no cpuset controller")

// ErrNoCore reports a cpuset naming a core this machine does not have.
var ErrNoCore = errors.New("no such core")

// ParseCPUs parses a cpuset list as the kernel writes it ("0", "0-3", "0,2-3") into sorted,
// distinct core numbers.
func ParseCPUs(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("parse cpu list: empty (write e.g. \"0\", \"0-1\" or \"0,2\")")
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("parse cpu list %q: %q is not a core number or range A-B", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("parse cpu list %q: %q is not a range A-B with A <= B", s, part)
			}
		}
		if b > 4095 {
			return nil, fmt.Errorf("parse cpu list %q: core %d is beyond 4095", s, b)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// FormatCPUs writes cores as the kernel's list form ("0-2,5").
func FormatCPUs(cores []int) string {
	var parts []string
	for i := 0; i < len(cores); {
		j := i
		for j+1 < len(cores) && cores[j+1] == cores[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(cores[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cores[i], cores[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// OnlineFile lists the machine's online cores; tests point it elsewhere.
var OnlineFile = "/sys/devices/system/cpu/online"

// OnlineCPUs returns the cores the machine has online.
//
// Equivalent to: cat /sys/devices/system/cpu/online
func OnlineCPUs() ([]int, error) {
	b, err := os.ReadFile(OnlineFile)
	if err != nil {
		return nil, fmt.Errorf("read online cores: %w", err)
	}
	return ParseCPUs(string(b))
}

// CheckCPUs refuses a cpu list that names a core this machine does not have online; the
// error (wrapping [ErrNoCore]) names the cores there are.
func CheckCPUs(list string) error {
	want, err := ParseCPUs(list)
	if err != nil {
		return err
	}
	have, err := OnlineCPUs()
	if err != nil {
		return err
	}
	var missing []int
	for _, c := range want {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("check cpus %q: %w: core %s does not exist on this machine (online: %s, %s)",
			list, ErrNoCore, FormatCPUs(missing), FormatCPUs(have), OnlineFile)
	}
	return nil
}

// cpusetMount is the v1 cpuset hierarchy's mount point ("" when there is none).
var cpusetMount = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return ""
	}
	return parseCpusetMount(b)
})

func parseCpusetMount(b []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 4 && f[2] == "cgroup" && slices.Contains(strings.Split(f[3], ","), "cpuset") {
			return unescapeMount(f[1])
		}
	}
	return ""
}

// twinDir is where a v1 group's cpuset twin lives: the same relative path in the cpuset
// hierarchy ("" on v2 or without a cpuset hierarchy).
func twinDir(rel string, v2 bool) string {
	m := cpusetMount()
	if v2 || m == "" {
		return ""
	}
	return filepath.Join(m, currentRootName(), rel)
}

// CpusetRoot is the root of the v1 cpuset twins ("" on v2 or without a cpuset hierarchy).
func CpusetRoot() string {
	h, err := detect()
	if err != nil {
		return ""
	}
	return twinDir("", h.v2)
}

// CPUsAvailable reports whether groups can be confined to cores here.
func CPUsAvailable() error {
	h, err := detect()
	if err != nil {
		return err
	}
	if h.v2 {
		b, err := os.ReadFile(filepath.Join(h.mount, "cgroup.controllers"))
		if err != nil || !slices.Contains(strings.Fields(string(b)), "cpuset") {
			return fmt.Errorf("confine to cores: %w: %s/cgroup.controllers lacks cpuset", ErrNoCpuset, h.mount)
		}
		return nil
	}
	if cpusetMount() == "" {
		return fmt.Errorf("confine to cores: %w: no cgroup v1 cpuset hierarchy in /proc/mounts (mount -t cgroup -o cpuset cgroup /sys/fs/cgroup/cpuset)", ErrNoCpuset)
	}
	return nil
}

// SetCPUs confines the group's processes (those added after, and those in it now on v2) to
// the cores of list. On cgroup v1 the cpuset controller is its own hierarchy: the group gets
// a twin at the same path there (each new parent inherits its parent's cores and memory
// nodes, as v1 requires before a task may join), and [Group.AddProc] and [Group.ProcsFiles]
// then cover both. On v2 cpuset is enabled in cgroup.subtree_control from the mount down to
// the group's parent, then the group's cpuset.cpus is written.
//
// Equivalent to (v1): mkdir -p /sys/fs/cgroup/cpuset/sfclab/REL; echo LIST > .../cpuset.cpus;
// cat PARENT/cpuset.mems > .../cpuset.mems. (v2): echo +cpuset > ANCESTOR/cgroup.subtree_control;
// echo LIST > /sys/fs/cgroup/sfclab/REL/cpuset.cpus
func (g *Group) SetCPUs(list string) error {
	what := fmt.Sprintf("confine cgroup %s to cores %s", g.name(), list)
	if _, err := ParseCPUs(list); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := CPUsAvailable(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if g.v2 {
		h, _ := detect()
		rel, err := filepath.Rel(h.mount, filepath.Dir(g.dir))
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		dir := h.mount
		for _, el := range append([]string{""}, strings.Split(rel, string(filepath.Separator))...) {
			dir = filepath.Join(dir, el)
			if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+cpuset"); err != nil {
				return fmt.Errorf("%s: enable cpuset in %s: %w", what, dir, err)
			}
		}
		if err := writeFile(filepath.Join(g.dir, "cpuset.cpus"), list); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	twin := twinDir(g.rel, false)
	root := cpusetMount()
	rel, err := filepath.Rel(root, twin)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	dir := root
	for _, el := range strings.Split(rel, string(filepath.Separator)) {
		parent := dir
		dir = filepath.Join(dir, el)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w", what, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v := ""
			if dir == twin && f == "cpuset.cpus" {
				v = list
			} else if cur, _ := os.ReadFile(filepath.Join(dir, f)); strings.TrimSpace(string(cur)) != "" {
				continue // an existing parent keeps its setting
			} else {
				b, err := os.ReadFile(filepath.Join(parent, f))
				if err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
				v = strings.TrimSpace(string(b))
			}
			if err := writeFile(filepath.Join(dir, f), v); err != nil {
				return fmt.Errorf("%s: write %s: %w", what, filepath.Join(dir, f), err)
			}
		}
	}
	g.twin = twin
	return nil
}

// CPUs returns the cores the group's processes may run on ("" when the group was never
// confined: every core).
//
// Equivalent to: cat PATH/cpuset.cpus
func (g *Group) CPUs() (string, error) {
	dir := g.twin
	if g.v2 {
		dir = g.dir
	}
	if dir == "" {
		return "", nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "cpuset.cpus"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read cores of cgroup %s: %w", g.name(), err)
	}
	return strings.TrimSpace(string(b)), nil
}

// ProcsFiles are the cgroup.procs files a process must be written to to join the group: its
// own, and on v1 its cpuset twin's when the group is confined to cores.
func (g *Group) ProcsFiles() []string {
	out := []string{g.ProcsFile()}
	if g.twin != "" {
		out = append(out, filepath.Join(g.twin, "cgroup.procs"))
	}
	return out
}

// removeTwin removes a v1 group's cpuset twin and its descendants, deepest first; a missing
// twin is not an error. Processes were killed with the group.
func (g *Group) removeTwin() error {
	twin := twinDir(g.rel, g.v2)
	if twin == "" {
		return nil
	}
	var dirs []string
	err := filepath.WalkDir(twin, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortStableFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, d := range dirs {
		if err := rmdir(d); err != nil {
			return err
		}
	}
	return nil
}
