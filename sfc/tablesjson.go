package sfc

import (
	"fmt"
	"strconv"
	"strings"
)

// MarshalText writes a PathPort as "PATH:PORT", so that Tables (whose HopOf is keyed by it)
// travels as JSON, to the sfclab agent of the node that holds a lab's steering maps.
func (k PathPort) MarshalText() ([]byte, error) {
	return []byte(strconv.FormatUint(uint64(k.Path), 10) + ":" + strconv.FormatUint(uint64(k.Port), 10)), nil
}

// UnmarshalText reads "PATH:PORT".
func (k *PathPort) UnmarshalText(b []byte) error {
	p, q, ok := strings.Cut(string(b), ":")
	path, err1 := strconv.ParseUint(p, 10, 32)
	port, err2 := strconv.ParseUint(q, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("read path and port %q: want PATH:PORT", b)
	}
	k.Path, k.Port = uint32(path), uint32(port)
	return nil
}
