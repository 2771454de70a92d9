package plan_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/internal/labgen"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// forwarderChain is a lab of one chain through n forwarders (n+1 segments).
func forwarderChain(n int, addressing string) string {
	var b strings.Builder
	b.WriteString("name: big\n" + addressing + "endpoints: {client: {}, server: {}}\nfunctions:\n")
	hops := make([]string, n)
	for i := range n {
		hops[i] = fmt.Sprintf("f%d", i+1)
		fmt.Fprintf(&b, "  f%d: {kind: forwarder}\n", i+1)
	}
	fmt.Fprintf(&b, "chains: [{from: client, to: server, hops: [%s]}]\n", strings.Join(hops, ", "))
	return b.String()
}

func TestAutoPrefix(t *testing.T) {
	tests := []struct {
		name       string
		yaml       string
		wantBits   int
		wantErrSub string
	}{
		{"small lab keeps /24", forwarderChain(6, ""), 24, ""},
		{"511 segments fit /24", forwarderChain(510, ""), 24, ""},
		{"999 segments take /25", forwarderChain(998, ""), 25, ""},
		{"1,000 nodes in chains and fan-out groups take /25", labgen.Big("big", 5, 190, 8), 25, ""},
		{"a prefix the file set is kept, and the pool runs out", forwarderChain(998, "addressing: {prefix: 24}\n"), 0, "no free /24 left"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lab, err := spec.Decode([]byte(tt.yaml), "big.yaml", kinds.Spec())
			if err != nil {
				t.Fatal(err)
			}
			p, err := plan.Build(lab)
			if tt.wantErrSub != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErrSub) {
					t.Fatalf("Build: %v, want an error with %q", err, tt.wantErrSub)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, s := range p.Segments {
				if s.Subnet.Bits() != tt.wantBits {
					t.Fatalf("segment %s has %s, want /%d", s.Name, s.Subnet, tt.wantBits)
				}
				if seen[s.Subnet.String()] {
					t.Fatalf("subnet %s given twice", s.Subnet)
				}
				seen[s.Subnet.String()] = true
			}
		})
	}
}
