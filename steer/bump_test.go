package steer

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// ipChecksum is the IPv4 header checksum of hdr (its checksum field included: 0 when valid).
func ipChecksum(hdr []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(hdr); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(hdr[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// bumpFrame is tcpFrame with the given TTL and a valid IPv4 header checksum.
func bumpFrame(dstMAC net.HardwareAddr, dst netip.Addr, ttl uint8) []byte {
	f := tcpFrame(dstMAC, net.HardwareAddr{2, 0, 0, 0, 0, 1}, netip.MustParseAddr("198.18.0.1"), dst, 40000, 5201)
	ip := f[14:34]
	ip[8] = ttl
	binary.BigEndian.PutUint16(ip[10:], 0)
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip))
	return f
}

// TestBumpProgram runs the bump program (BPF_PROG_TEST_RUN) on frames a transparent
// forwarder gets: IPv4 for someone else is redirected with its TTL one less, its header
// checksum still valid and the MACs the kernel's forwarding would have written; everything the kernel should see (ARP, broadcast, multicast, its own
// address, an expiring TTL) passes up the stack unchanged.
func TestBumpProgram(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED LOUDLY: loading eBPF needs root")
	}
	own := netip.MustParseAddr("198.18.0.3")
	mine := net.HardwareAddr{2, 0, 0, 0, 0, 3}
	server := netip.MustParseAddr("198.18.0.2")
	next := net.HardwareAddr{2, 0x5f, 0xc1, 0xab, 0, 0xfe}
	arp := bumpFrame(mine, server, 64)
	arp[12], arp[13] = 0x08, 0x06
	tests := []struct {
		name    string
		frame   []byte
		queue   bool
		want    uint32 // TC_ACT_OK 0, TC_ACT_REDIRECT 7
		wantTTL uint8  // 0: frame unchanged
	}{
		{"to another host, peer", bumpFrame(mine, server, 64), false, 7, 63},
		{"to another host, queue", bumpFrame(mine, server, 64), true, 7, 63},
		{"ttl 2 still forwarded", bumpFrame(mine, server, 2), false, 7, 1},
		{"ttl 1 left to the kernel", bumpFrame(mine, server, 1), false, 0, 0},
		{"own address", bumpFrame(mine, own, 64), false, 0, 0},
		{"broadcast MAC", bumpFrame(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, server, 64), false, 0, 0},
		{"multicast address", bumpFrame(mine, netip.MustParseAddr("224.0.0.5"), 64), false, 0, 0},
		{"arp", arp, false, 0, 0},
	}
	progs := map[bool]*ebpf.Program{}
	for _, queue := range []bool{false, true} {
		p, err := loadBumpProgram(Bump{In: "eth0", Out: "eth0", Own: []netip.Addr{own}, Next: next, Queue: queue}, 2, mine)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		progs[queue] = p
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]byte(nil), tc.frame...)
			out := make([]byte, len(in)+64)
			ret, err := progs[tc.queue].Run(&ebpf.RunOptions{Data: in, DataOut: out, Context: skbCtx(2)})
			if err != nil {
				t.Fatal(err)
			}
			if ret != tc.want {
				t.Errorf("returned %d, want %d", ret, tc.want)
			}
			out = out[:len(tc.frame)]
			if tc.wantTTL == 0 {
				if string(out) != string(tc.frame) {
					t.Errorf("frame changed:\n got %x\nwant %x", out, tc.frame)
				}
				return
			}
			if got := net.HardwareAddr(out[0:6]); got.String() != next.String() {
				t.Errorf("destination MAC %s, want %s", got, next)
			}
			if got := net.HardwareAddr(out[6:12]); got.String() != mine.String() {
				t.Errorf("source MAC %s, want the egress port's %s", got, mine)
			}
			if out[14+8] != tc.wantTTL {
				t.Errorf("TTL %d, want %d", out[14+8], tc.wantTTL)
			}
			if c := ipChecksum(out[14:34]); c != 0 {
				t.Errorf("IPv4 header checksum does not verify (%#04x): %x", c, out[14:34])
			}
		})
	}
}
