package netdev

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// SetSysctls writes several sysctls inside the namespace, in order, on one switch into it
// (SetSysctl switches once per key: a thread lock, two setns and an open of the thread's
// namespace each time, which dominates at 1,000 nodes).
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
