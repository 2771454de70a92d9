package studies

import (
	"strings"
	"testing"
)

// TestEveryClaimStatesItsRule: the report prints each claim's rule beside its outcome, so a
// claim without one would be decided by a rule nobody can read (docs/verdicts.md lists them).
func TestEveryClaimStatesItsRule(t *testing.T) {
	for study, claims := range map[string]int{"A": len(claimsA), "B": len(claimsB), "C": len(claimsC), "D": len(claimsD)} {
		if claims == 0 {
			t.Errorf("study %s has no claims", study)
		}
	}
	for _, c := range append(append(append(claimsA[:len(claimsA):len(claimsA)], claimsB...), claimsC...), claimsD...) {
		if strings.TrimSpace(c.Rule) == "" {
			t.Errorf("claim %q states no rule", c.Text)
		}
	}
}
