// Package fuzzseed reads and writes the seed files of Go's native fuzzing
// (testdata/fuzz/FuzzName/NAME, format "go test fuzz v1") for targets that
// take one []byte, so tests can keep their tables of bad input and the
// committed seed corpus in step.
package fuzzseed

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

const header = "go test fuzz v1\n"

// Encode returns the seed file holding data, as `go test` writes it.
func Encode(data []byte) []byte {
	return []byte(header + "[]byte(" + strconv.Quote(string(data)) + ")\n")
}

// Decode returns the []byte value of a seed file of a one-argument target.
func Decode(file []byte) ([]byte, error) {
	s, ok := strings.CutPrefix(string(file), header)
	if !ok {
		return nil, fmt.Errorf("decode seed: no %q header", strings.TrimSpace(header))
	}
	s = strings.TrimSpace(s)
	lit, ok := strings.CutPrefix(s, "[]byte(")
	if !ok || !strings.HasSuffix(lit, ")") {
		return nil, fmt.Errorf("decode seed: want one []byte(...) value, got %.40q", s)
	}
	v, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
	if err != nil {
		return nil, fmt.Errorf("decode seed: %w", err)
	}
	return []byte(v), nil
}

// ReadDir returns the values of every seed file in dir by file name
// (shell: ls testdata/fuzz/FuzzName).
func ReadDir(dir string) (map[string][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read seeds: %w", err)
	}
	seeds := map[string][]byte{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		file, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read seeds: %w", err)
		}
		v, err := Decode(file)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		seeds[e.Name()] = v
	}
	return seeds, nil
}

// Has reports whether one of seeds holds exactly data.
func Has(seeds map[string][]byte, data []byte) bool {
	for _, v := range seeds {
		if bytes.Equal(v, data) {
			return true
		}
	}
	return false
}

// Name turns a test case name into a seed file name: "bad cidr" -> "bad-cidr".
func Name(prefix, test string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, r := range strings.ToLower(test) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

// Sync makes dir hold a seed file for each named value (name -> data): with
// write it writes the missing ones, without it it returns the names of those
// missing, so a test can fail and say how to add them.
func Sync(dir string, want map[string][]byte, write bool) ([]string, error) {
	have, err := ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var missing []string
	for name, data := range want {
		if Has(have, data) {
			continue
		}
		if !write {
			missing = append(missing, name)
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("write seed: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), Encode(data), 0o644); err != nil {
			return nil, fmt.Errorf("write seed: %w", err)
		}
	}
	slices.Sort(missing)
	return missing, nil
}
