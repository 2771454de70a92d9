package nat

import (
	"reflect"
	"testing"

	"github.com/sfclab/sfclab/vnf"
)

// The listings below have the shape nft 1.0.6 and iptables 1.8.9 (nf_tables) print on Debian
// 12 (seen with NftRuleset and IptablesRules loaded in a scratch namespace); the figures vary.
func TestParseCounts(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		parse func(string) []vnf.Counter
		want  []vnf.Counter
	}{
		{"nft", `table ip sfclab_nat {
	chain prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		tcp dport 8080 counter packets 3 bytes 180 dnat to 198.18.1.2:80 comment "dnat-1"
		udp dport 53 counter packets 0 bytes 0 dnat to 198.18.1.3:53 comment "dnat-2"
	}

	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		oifname "eth1" counter packets 7 bytes 588 masquerade comment "snat"
	}
}
`, parseNftCounts, []vnf.Counter{{Rule: "dnat-1", Packets: 3, Bytes: 180}, {Rule: "dnat-2"}, {Rule: "snat", Packets: 7, Bytes: 588}}},
		{"iptables", `Chain SFCLAB-NAT-PRE (1 references)
    pkts      bytes target     prot opt in     out     source               destination         
       3      180 DNAT       6    --  *      *       0.0.0.0/0            0.0.0.0/0            tcp dpt:8080 to:198.18.1.2:80
       0        0 DNAT       17   --  *      *       0.0.0.0/0            0.0.0.0/0            udp dpt:53 to:198.18.1.3:53
`, parseIptablesCounts, []vnf.Counter{{Packets: 3, Bytes: 180}, {}}},
		{"iptables masquerade", "Chain SFCLAB-NAT-POST (1 references)\n    pkts      bytes target     prot opt in     out     source               destination\n       7      588 MASQUERADE  0    --  *      eth1    0.0.0.0/0            0.0.0.0/0\n", parseIptablesCounts, []vnf.Counter{{Packets: 7, Bytes: 588}}},
		{"iptables empty chain", "Chain SFCLAB-NAT-POST (1 references)\n    pkts      bytes target     prot opt in     out     source               destination\n", parseIptablesCounts, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.parse(tt.text); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
