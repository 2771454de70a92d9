package steer

import (
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// TestFwOffloadProgram runs the firewall offload program (BPF_PROG_TEST_RUN) on frames a
// transparent firewall gets. A test run has no conntrack entry for them (the run's skb sits
// in the test's namespace, where no flow was ever seen), so every frame must pass up the
// stack unchanged and nothing count as offloaded: whatever conntrack has not seen established
// both ways goes to the kernel, and so do SYN, FIN, RST, ICMP, fragments, IP options, an
// expiring TTL, the firewall's own address, ARP and IPv6, whatever the table says. The lab
// test (deploy) shows established flows offloaded.
func TestFwOffloadProgram(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED LOUDLY: loading eBPF needs root")
	}
	own := netip.MustParseAddr("198.18.0.3")
	mine := net.HardwareAddr{2, 0, 0, 0, 0, 3}
	server := netip.MustParseAddr("198.18.0.2")
	next := net.HardwareAddr{2, 0x5f, 0xc1, 0xab, 0, 0xfe}
	withTCPFlags := func(flags byte) []byte {
		f := bumpFrame(mine, server, 64)
		f[14+20+13] = flags
		return f
	}
	withProto := func(proto byte) []byte {
		f := bumpFrame(mine, server, 64)
		f[14+9] = proto
		return f
	}
	fragment := bumpFrame(mine, server, 64)
	fragment[14+6] = 0x20 // more fragments
	options := bumpFrame(mine, server, 64)
	options[14] = 0x46
	arp := bumpFrame(mine, server, 64)
	arp[12], arp[13] = 0x08, 0x06
	tests := []struct {
		name  string
		frame []byte
	}{
		{"tcp ack, no conntrack entry", withTCPFlags(0x10)},
		{"tcp syn", withTCPFlags(0x02)},
		{"tcp fin", withTCPFlags(0x11)},
		{"tcp rst", withTCPFlags(0x14)},
		{"udp, no conntrack entry", withProto(17)},
		{"icmp", withProto(1)},
		{"fragment", fragment},
		{"ip options", options},
		{"ttl 1", bumpFrame(mine, server, 1)},
		{"own address", bumpFrame(mine, own, 64)},
		{"broadcast MAC", bumpFrame(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, server, 64)},
		{"arp", arp},
		{"ipv6", tcpFrame(mine, net.HardwareAddr{2, 0, 0, 0, 0, 1}, netip.MustParseAddr("2001:2::1"), netip.MustParseAddr("2001:2::2"), 40000, 5201)},
	}
	spec, err := loadFwoffload()
	if err != nil {
		t.Fatal(err)
	}
	if err := setWire(spec, Bump{In: "eth0", Out: "eth0", Own: []netip.Addr{own}, Next: next}, 2, mine); err != nil {
		t.Fatal(err)
	}
	var objs fwoffloadObjects
	if err := loadAndAssign(spec, &objs); err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]byte(nil), tc.frame...)
			out := make([]byte, len(in)+64)
			ret, err := objs.Fwoffload.Run(&ebpf.RunOptions{Data: in, DataOut: out, Context: skbCtx(2)})
			if err != nil {
				t.Fatal(err)
			}
			if ret != 0 {
				t.Errorf("returned %d, want TC_ACT_OK (0: up the stack)", ret)
			}
			if out = out[:len(tc.frame)]; string(out) != string(tc.frame) {
				t.Errorf("frame changed:\n got %x\nwant %x", out, tc.frame)
			}
		})
	}
	var vs []uint64
	if err := objs.OffloadStats.Lookup(uint32(0), &vs); err != nil {
		t.Fatal(err)
	}
	for cpu, v := range vs {
		if v != 0 {
			t.Errorf("cpu %d counted %d packets offloaded, want none", cpu, v)
		}
	}
}

// TestLoadFwOffloadThresholds: the refresh threshold is half the timeout in jiffies, capped
// so the program's signed 32-bit comparison holds; the program loads with each.
func TestLoadFwOffloadThresholds(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED LOUDLY: loading eBPF needs root")
	}
	mine := net.HardwareAddr{2, 0, 0, 0, 0, 3}
	for _, tc := range []struct {
		name string
		t    CTTimeouts
		hz   uint32
	}{
		{"defaults at 250 Hz", defaultCTTimeouts, 250},
		{"defaults at 1000 Hz", defaultCTTimeouts, 1000},
		{"huge timeouts", CTTimeouts{TCP: 1 << 31, UDP: 1 << 31}, 1000},
	} {
		p, err := loadFwOffloadProgram(Bump{In: "a", Out: "b", Next: mine}, 2, mine, tc.t, tc.hz)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		p.Close()
	}
}
