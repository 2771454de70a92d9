package vm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Loading the guest's boot modules by finit_module from PID 1 itself, instead of running
// kmod's modprobe: under TCG every exec of the dynamically linked kmod (libc, libzstd,
// liblzma, libcrypto relocated by the emulated CPU) cost more than the module loads it made.
// modprobe stays in the image for the modules the kernel asks for later (nftables', tc's).

var (
	depOnce sync.Once
	depMap  map[string][]string // module path -> its dependencies' paths (modules.dep)
	depName map[string]string   // module name ('-' as '_') -> its path
	depDir  string              // /lib/modules/RELEASE
	depErr  error
)

// readModuleDeps parses the running kernel's modules.dep once.
func readModuleDeps() error {
	depOnce.Do(func() {
		var u unix.Utsname
		if depErr = unix.Uname(&u); depErr != nil {
			return
		}
		depDir = filepath.Join("/lib/modules", unix.ByteSliceToString(u.Release[:]))
		var data []byte
		if data, depErr = os.ReadFile(filepath.Join(depDir, "modules.dep")); depErr != nil {
			return
		}
		depMap, depName = parseModuleDeps(string(data))
	})
	return depErr
}

// parseModuleDeps reads modules.dep text: "path: dep dep ..." per line.
func parseModuleDeps(text string) (deps map[string][]string, byName map[string]string) {
	deps, byName = map[string][]string{}, map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		mod, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		deps[mod] = strings.Fields(rest)
		byName[moduleName(mod)] = mod
	}
	return deps, byName
}

// moduleName is a module file's name as the kernel spells it: no suffix, '-' as '_'.
func moduleName(path string) string {
	base := filepath.Base(path)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

// loadOrder is the order the modules and their dependencies are loaded in: every
// dependency before the modules that need it, each once.
func loadOrder(deps map[string][]string, byName map[string]string, names []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	var visit func(p string)
	visit = func(p string) {
		if seen[p] {
			return
		}
		seen[p] = true
		// modules.dep lists the deepest dependencies last.
		d := deps[p]
		for i := len(d) - 1; i >= 0; i-- {
			visit(d[i])
		}
		out = append(out, p)
	}
	for _, n := range names {
		p, ok := byName[strings.ReplaceAll(n, "-", "_")]
		if !ok {
			return nil, fmt.Errorf("find module %s: not in modules.dep", n)
		}
		visit(p)
	}
	return out, nil
}

// loadModules loads the named modules with their dependencies in the guest; a module
// already loaded (or built in) is no error.
func loadModules(names ...string) error {
	if err := readModuleDeps(); err != nil {
		return fmt.Errorf("read modules.dep: %w", err)
	}
	order, err := loadOrder(depMap, depName, names)
	if err != nil {
		return err
	}
	for _, p := range order {
		if !strings.HasSuffix(p, ".ko") {
			return fmt.Errorf("load %s: compressed module (kmod's modprobe loads those)", p)
		}
		f, err := os.Open(filepath.Join(depDir, p))
		if err != nil {
			return fmt.Errorf("load module %s: %w", p, err)
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("load module %s: %w", p, err)
		}
	}
	return nil
}

// loadBootModules loads modules by finit_module, and by modprobe when that fails.
func loadBootModules(names ...string) error {
	err := loadModules(names...)
	if err == nil {
		return nil
	}
	out, merr := exec.Command("/sbin/modprobe", append([]string{"-a"}, names...)...).CombinedOutput()
	if merr != nil {
		return fmt.Errorf("load modules %s: %v; modprobe: %w: %s", strings.Join(names, " "), err, merr, bytes.TrimSpace(out))
	}
	return nil
}
