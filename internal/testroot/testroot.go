// Package testroot holds the one check tests share before they touch the kernel: namespaces,
// veths, cgroups and netfilter need root.
package testroot

import (
	"os"
	"testing"
)

// Require skips the test, loudly, unless it runs as root; what says what the test builds.
func Require(tb testing.TB, what string) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skipf("SKIPPED LOUDLY: %s and needs root; run `make test` as root", what)
	}
}
