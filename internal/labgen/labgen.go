// Package labgen writes generated lab files for tests and benchmarks of large labs.
package labgen

import (
	"fmt"
	"strings"
)

// Big returns a lab of `chains` chains, each from its own client through `hops` forwarders
// in a row and then a fan-out group of `fan` forwarder instances to its own server:
// chains*(2+hops+fan) nodes, chains*(hops+2) segments.
func Big(name string, chains, hops, fan int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nendpoints:\n", name)
	for c := 1; c <= chains; c++ {
		fmt.Fprintf(&b, "  c%d: {kind: client}\n  s%d: {kind: server}\n", c, c)
	}
	b.WriteString("functions:\n")
	var lines []string
	for c := 1; c <= chains; c++ {
		var hs []string
		for i := 1; i <= hops; i++ {
			fmt.Fprintf(&b, "  c%df%d: {kind: forwarder}\n", c, i)
			hs = append(hs, fmt.Sprintf("c%df%d", c, i))
		}
		if fan > 0 {
			fmt.Fprintf(&b, "  c%dg: {kind: forwarder, instances: %d}\n", c, fan)
			hs = append(hs, fmt.Sprintf("c%dg", c))
		}
		lines = append(lines, fmt.Sprintf("  - {name: k%d, from: c%d, to: s%d, hops: [%s]}", c, c, c, strings.Join(hs, ", ")))
	}
	b.WriteString("chains:\n" + strings.Join(lines, "\n") + "\n")
	return b.String()
}
