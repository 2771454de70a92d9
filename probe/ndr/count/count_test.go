package count

import "testing"

func TestParseRcvbufErrors(t *testing.T) {
	const snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n" +
		"Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n" +
		"Udp: 120 3 7 100 5 0 0 0 0\n" +
		"UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n" +
		"UdpLite: 0 0 0 0 9 0 0 0 0\n"
	if n, err := ParseRcvbufErrors(snmp); err != nil || n != 5 {
		t.Errorf("ParseRcvbufErrors = %d, %v; want 5 (Udp's, not UdpLite's)", n, err)
	}
	for _, bad := range []string{"", "Ip: Forwarding\nIp: 1\n", "Udp: InDatagrams RcvbufErrors\nUdp: 1 x\n"} {
		if n, err := ParseRcvbufErrors(bad); err == nil {
			t.Errorf("ParseRcvbufErrors(%q) = %d, want an error", bad, n)
		}
	}
}
