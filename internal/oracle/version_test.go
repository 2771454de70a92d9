package oracle

import (
	"strings"
	"testing"
)

// TestVersion reads the installed packages' versions (or says it could not).
func TestVersion(t *testing.T) {
	v := Version()
	if Available() == nil && !strings.HasPrefix(v, "networking-sfc ") {
		t.Errorf("Version() = %q with the oracle installed", v)
	}
	t.Log(v)
}
