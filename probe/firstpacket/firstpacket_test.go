package firstpacket

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cmsg builds one control message as the kernel writes it.
func cmsg(level, typ int32, data []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(len(data)))
	copy(b[unix.CmsgLen(0):], data)
	return b
}

func TestTTLOf(t *testing.T) {
	ttl := func(v uint32) []byte {
		b := make([]byte, 4)
		binary.NativeEndian.PutUint32(b, v)
		return b
	}
	for _, tc := range []struct {
		name string
		oob  []byte
		want int
	}{
		{"ttl 58", cmsg(unix.IPPROTO_IP, unix.IP_TTL, ttl(58)), 58},
		{"after another message", append(cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{0}), cmsg(unix.IPPROTO_IP, unix.IP_TTL, ttl(63))...), 63},
		{"none", nil, -1},
		{"other level", cmsg(unix.SOL_SOCKET, unix.IP_TTL, ttl(5)), -1},
	} {
		if got := ttlOf(tc.oob); got != tc.want {
			t.Errorf("%s: ttlOf = %d, want %d", tc.name, got, tc.want)
		}
	}
}

type noNS struct{ called bool }

func (n *noNS) Do(fn func() error) error { n.called = true; return fn() }

// TestOpenOutsideLabRange: probes go only to the lab range; nothing is opened otherwise.
func TestOpenOutsideLabRange(t *testing.T) {
	ns := &noNS{}
	_, err := Open(ns, ns, netip.MustParseAddrPort("127.0.0.1:40001"))
	if err == nil || !strings.Contains(err.Error(), "198.18.0.0/15") || ns.called {
		t.Errorf("Open(127.0.0.1) = %v (namespace entered: %v), want a refusal naming 198.18.0.0/15", err, ns.called)
	}
}
