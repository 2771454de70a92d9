package netdev

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// sysctlPath maps "net.ipv4.ip_forward" or "net/ipv4/ip_forward" to
// /proc/sys/net/ipv4/ip_forward. A key containing "/" is taken as a path,
// so interface names with dots can be written as
// "net/ipv4/conf/eth0.10/rp_filter".
func sysctlPath(key string) (string, error) {
	k := key
	if !strings.Contains(k, "/") {
		k = strings.ReplaceAll(k, ".", "/")
	}
	k = strings.Trim(k, "/")
	if k == "" {
		return "", errors.New("empty sysctl key")
	}
	for _, part := range strings.Split(k, "/") {
		if part == "" || part == "." || part == ".." {
			return "", fmt.Errorf("invalid sysctl key %q", key)
		}
	}
	return filepath.Join("/proc/sys", k), nil
}

// SetSysctl writes a sysctl as seen from inside the namespace (the
// /proc/sys/net tree follows the writing thread's network namespace).
//
// Equivalent to: ip netns exec NS sysctl -w KEY=VALUE
func (n *NS) SetSysctl(key, value string) error {
	what := fmt.Sprintf("set sysctl %s=%s in %s", key, value, displayName(n.name))
	path, err := sysctlPath(key)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	err = n.Do(func() error {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		if _, err := f.WriteString(value); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	})
	if errors.Is(err, fs.ErrNotExist) {
		err = fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// GetSysctl reads a sysctl as seen from inside the namespace, without the
// trailing newline.
//
// Equivalent to: ip netns exec NS sysctl -n KEY
func (n *NS) GetSysctl(key string) (string, error) {
	what := fmt.Sprintf("get sysctl %s in %s", key, displayName(n.name))
	path, err := sysctlPath(key)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	var b []byte
	err = n.Do(func() error {
		var err error
		b, err = os.ReadFile(path)
		return err
	})
	if errors.Is(err, fs.ErrNotExist) {
		err = fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return strings.TrimRight(string(b), "\n"), nil
}
