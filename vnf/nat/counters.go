package nat

import (
	"bufio"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf"
)

// nftCounter matches one counted rule of `nft list table ip sfclab_nat` (NftRuleset names
// each by its comment: "dnat-N", "snat").
var nftCounter = regexp.MustCompile(`counter packets (\d+) bytes (\d+).*comment "([^"]+)"`)

// Counters reads the per-rule counters of one instance back from its node (vnf.RuleCounters,
// for inspect): "dnat-N" for the Nth destination NAT, "snat" for the source NAT. NAT rules
// see a connection's first packet only (conntrack translates the rest), so they count
// connections, not traffic. In a VM node they are read in the guest, through its agent.
//
// Equivalent to: nft list table ip sfclab_nat (or iptables -t nat -L SFCLAB-NAT-PRE -v -x -n
// and the same for SFCLAB-NAT-POST)
func (NAT) Counters(ctx context.Context, node vnf.Node, f *plan.Function) ([]vnf.Counter, error) {
	if params(f).Backend == spec.BackendIptables {
		var out []vnf.Counter
		for _, c := range []struct {
			chain, name string
			rules       int
		}{{IptPre, "dnat", len(f.DNAT)}, {IptPost, "snat", 0}} {
			text, err := node.Output(ctx, nil, "iptables", "-w", "-t", "nat", "-L", c.chain, "-v", "-x", "-n")
			if err != nil {
				return nil, fmt.Errorf("read nat counters: %w", err)
			}
			for i, cnt := range parseIptablesCounts(string(text)) {
				name := c.name
				if c.rules > 0 {
					name = fmt.Sprintf("%s-%d", c.name, i+1)
				}
				cnt.Rule = name
				out = append(out, cnt)
			}
		}
		return out, nil
	}
	text, err := node.Output(ctx, nil, "nft", "list", "table", "ip", NftTable)
	if err != nil {
		return nil, fmt.Errorf("read nat counters: %w", err)
	}
	return parseNftCounts(string(text)), nil
}

// parseNftCounts reads the counted rules of an nft listing, named by their comments.
func parseNftCounts(text string) []vnf.Counter {
	var out []vnf.Counter
	for _, m := range nftCounter.FindAllStringSubmatch(text, -1) {
		pk, _ := strconv.ParseUint(m[1], 10, 64)
		by, _ := strconv.ParseUint(m[2], 10, 64)
		out = append(out, vnf.Counter{Rule: m[3], Packets: pk, Bytes: by})
	}
	return out
}

// parseIptablesCounts reads the rules of one chain of `iptables -L CHAIN -v -x -n`, in order,
// unnamed (the chain's header and column titles skipped).
func parseIptablesCounts(text string) []vnf.Counter {
	var out []vnf.Counter
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		pk, err1 := strconv.ParseUint(fields[0], 10, 64)
		by, err2 := strconv.ParseUint(fields[1], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, vnf.Counter{Packets: pk, Bytes: by})
	}
	return out
}

var _ vnf.RuleCounters = NAT{}
