package netdev

import (
	"encoding/json"
	"errors"
	"net/netip"
	"reflect"
	"testing"
)

// TestSettingsJSON: settings cross to the agent as JSON and come back equal (addresses,
// routes with and without gateways, rules with ports and prefixes).
func TestSettingsJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Settings
	}{
		{"empty", Settings{}},
		{"sysctls", Settings{Sysctls: [][2]string{{"net.ipv4.ip_forward", "1"}}}},
		{"addrs", Settings{Addrs: []IfAddr{{Link: "eth0", Prefix: netip.MustParsePrefix("198.18.0.1/24")}}}},
		{"routes", Settings{Routes: []Route{
			{Dst: netip.MustParsePrefix("0.0.0.0/0"), NextHops: []NextHop{{Via: netip.MustParseAddr("198.18.0.254")}}},
			{Dst: netip.MustParsePrefix("2001:2::/64"), Dev: "eth1", Table: 100},
		}}},
		{"rules", Settings{Rules: []Rule{{Priority: 100, Table: 100, IPProto: 6, DstPort: PortRange{From: 80, To: 80},
			Src: netip.MustParsePrefix("198.18.1.0/24")}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.s)
			if err != nil {
				t.Fatal(err)
			}
			var got Settings
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.s) {
				t.Errorf("round trip of %s: got %+v, want %+v", b, got, tc.s)
			}
			if got.Empty() != (tc.name == "empty") {
				t.Errorf("Empty() = %v", got.Empty())
			}
		})
	}
}

// TestGuardNamespaces: a guarded prefix refuses OpenNS, OpenNSPath, BindNetns and CheckGuard
// of what starts with it, and nothing else; release lifts it.
func TestGuardNamespaces(t *testing.T) {
	release := GuardNamespaces("sfc.i26w-guard.", "/proc/")
	t.Cleanup(func() { _ = DeleteNetns("sfc.i26w-other.n1") }) // were BindNetns not refused
	for _, tc := range []struct {
		name    string
		do      func() error
		guarded bool
	}{
		{"OpenNS of a guarded name", func() error { _, err := OpenNS("sfc.i26w-guard.n1"); return err }, true},
		{"OpenNS of another name", func() error { _, err := OpenNS("sfc.i26w-other.n1"); return err }, false},
		{"OpenNSPath under /proc", func() error { _, err := OpenNSPath("/proc/1/ns/net", "init"); return err }, true},
		{"BindNetns from /proc", func() error { return BindNetns("sfc.i26w-other.n1", "/proc/1/ns/net") }, true},
		{"CheckGuard of a guarded path", func() error { return CheckGuard("/proc/42/ns/") }, true},
		{"CheckGuard of another path", func() error { return CheckGuard("/run/netns/x") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if errors.Is(err, ErrGuarded) != tc.guarded {
				t.Errorf("error %v, guarded want %v", err, tc.guarded)
			}
		})
	}
	release()
	if err := CheckGuard("/proc/42/ns/"); err != nil {
		t.Errorf("after release: %v", err)
	}
}
