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
	return n.SetSysctls([][2]string{{key, value}})
}

// SetSysctls writes several sysctls inside the namespace, in order, on one switch into it
// (a switch per key, a thread lock, two setns and an open of the thread's namespace each
// time, dominates at 1,000 nodes).
//
// Equivalent to: ip netns exec NS sysctl -w K1=V1 K2=V2 ...
func (n *NS) SetSysctls(kvs [][2]string) error {
	if len(kvs) == 0 {
		return nil
	}
	paths := make([]string, len(kvs))
	for i, kv := range kvs {
		p, err := sysctlPath(kv[0])
		if err != nil {
			return fmt.Errorf("set sysctl %s=%s in %s: %w", kv[0], kv[1], displayName(n.name), err)
		}
		paths[i] = p
	}
	return n.Do(func() error {
		for i, kv := range kvs {
			if err := writeSysctl(paths[i], kv[1]); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					err = fmt.Errorf("%w: %w", ErrNotFound, err)
				}
				return fmt.Errorf("set sysctl %s=%s in %s: %w", kv[0], kv[1], displayName(n.name), err)
			}
		}
		return nil
	})
}

func writeSysctl(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(value); err != nil {
		f.Close()
		return err
	}
	return f.Close()
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
