package plan

import (
	"net/netip"
	"slices"
	"testing"
)

func TestAggregate(t *testing.T) {
	pfx := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	tests := []struct{ in, want []netip.Prefix }{
		{pfx("198.18.1.0/24"), pfx("198.18.1.0/24")},
		{pfx("198.18.0.0/24", "198.18.1.0/24"), pfx("198.18.0.0/23")},
		{pfx("198.18.1.0/24", "198.18.2.0/24"), pfx("198.18.1.0/24", "198.18.2.0/24")},
		{pfx("198.18.3.0/24", "198.18.4.0/24", "198.18.5.0/24", "198.18.6.0/24"), pfx("198.18.3.0/24", "198.18.4.0/23", "198.18.6.0/24")},
		{pfx("198.18.0.0/24", "198.18.0.128/25", "198.18.1.0/24"), pfx("198.18.0.0/23")},
		{pfx("10.0.0.0/8", "198.18.0.0/24"), pfx("10.0.0.0/8", "198.18.0.0/24")},
		{nil, nil},
	}
	for _, tt := range tests {
		got := aggregate(tt.in)
		if !slices.Equal(got, tt.want) {
			t.Errorf("aggregate(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
	// Exactness on a long contiguous run: every /24 covered, nothing else.
	var run []netip.Prefix
	for i := 5; i < 203; i++ {
		run = append(run, netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i), 0}), 24))
	}
	agg := aggregate(run)
	if len(agg) > 16 {
		t.Errorf("198 contiguous /24s aggregate to %d prefixes", len(agg))
	}
	for i := 0; i < 256; i++ {
		a := netip.AddrFrom4([4]byte{198, 18, byte(i), 1})
		in := i >= 5 && i < 203
		covered := false
		for _, p := range agg {
			covered = covered || p.Contains(a)
		}
		if covered != in {
			t.Errorf("198.18.%d.1 covered=%v, want %v", i, covered, in)
		}
	}
}
