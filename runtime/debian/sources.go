package debian

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Source is the Debian archive a root file system is bootstrapped from.
type Source struct {
	// Mirror is the archive's URL, e.g. http://deb.debian.org/debian.
	Mirror string
	// Suite is the release, e.g. bookworm.
	Suite string
}

// ErrNoSource is returned when the host's APT configuration names no Debian archive.
var ErrNoSource = errors.New("no Debian archive in the APT sources")

// AptDir is where HostSource reads the APT sources (sources.list and sources.list.d/).
var AptDir = "/etc/apt"

// HostSource reads the mirror and suite the host itself installs from: the first "deb" entry
// of /etc/apt/sources.list or /etc/apt/sources.list.d/*.list|*.sources (one-line or deb822
// format) with an http(s) URL, a plain suite (no -updates, -security, ...) and the main
// component. The image is then built from the same mirror the host can reach.
func HostSource() (Source, error) {
	files := []string{filepath.Join(AptDir, "sources.list")}
	for _, pat := range []string{"*.list", "*.sources"} {
		m, _ := filepath.Glob(filepath.Join(AptDir, "sources.list.d", pat))
		slices.Sort(m)
		files = append(files, m...)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var entries []aptEntry
		if strings.HasSuffix(f, ".sources") {
			entries = parseDeb822(string(data))
		} else {
			entries = parseOneLine(string(data))
		}
		if s, ok := pickSource(entries); ok {
			return s, nil
		}
	}
	return Source{}, fmt.Errorf("read APT sources in %s: %w", AptDir, ErrNoSource)
}

type aptEntry struct {
	types, uris, suites, components []string
}

// pickSource returns the first entry that is a Debian archive sfclab can bootstrap from.
func pickSource(entries []aptEntry) (Source, bool) {
	for _, e := range entries {
		if !slices.Contains(e.types, "deb") || !slices.Contains(e.components, "main") {
			continue
		}
		for _, u := range e.uris {
			if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				continue
			}
			for _, s := range e.suites {
				if s != "" && !strings.ContainsAny(s, "-/") {
					return Source{Mirror: strings.TrimSuffix(u, "/"), Suite: s}, true
				}
			}
		}
	}
	return Source{}, false
}

// parseOneLine reads "deb [opts] URI SUITE COMPONENT..." lines.
func parseOneLine(text string) []aptEntry {
	var out []aptEntry
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		e := aptEntry{types: []string{f[0]}}
		rest := f[1:]
		if strings.HasPrefix(rest[0], "[") {
			for len(rest) > 0 {
				done := strings.HasSuffix(rest[0], "]")
				rest = rest[1:]
				if done {
					break
				}
			}
		}
		if len(rest) < 2 {
			continue
		}
		e.uris, e.suites, e.components = []string{rest[0]}, []string{rest[1]}, rest[2:]
		out = append(out, e)
	}
	return out
}

// parseDeb822 reads stanzas of "Types: / URIs: / Suites: / Components:" fields; stanzas with
// "Enabled: no" are skipped.
func parseDeb822(text string) []aptEntry {
	var out []aptEntry
	for _, stanza := range strings.Split(strings.ReplaceAll(text, "\r", ""), "\n\n") {
		fields := map[string]string{}
		last := ""
		for _, line := range strings.Split(stanza, "\n") {
			if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
				continue
			}
			if (line[0] == ' ' || line[0] == '\t') && last != "" {
				fields[last] += " " + strings.TrimSpace(line)
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			last = strings.ToLower(strings.TrimSpace(k))
			fields[last] = strings.TrimSpace(v)
		}
		if strings.EqualFold(fields["enabled"], "no") || fields["types"] == "" {
			continue
		}
		out = append(out, aptEntry{
			types: strings.Fields(fields["types"]), uris: strings.Fields(fields["uris"]),
			suites: strings.Fields(fields["suites"]), components: strings.Fields(fields["components"]),
		})
	}
	return out
}

// HostSuite is the suite of the host's archive, or its release codename from os-release when
// the APT sources name none (image tags and keys depend on it).
func HostSuite() string {
	if s, err := HostSource(); err == nil {
		return s.Suite
	}
	data, err := os.ReadFile("/etc/os-release")
	if err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "VERSION_CODENAME="); ok && v != "" {
				return strings.Trim(v, `"`)
			}
		}
	}
	return "stable"
}
