package api

import (
	"context"
	"errors"
	"net/http"
	"testing"
)

// checkingPlane is a Recorder whose checks answer what the test says.
type checkingPlane struct {
	Recorder
	chainErr, graphErr error
}

func (p *checkingPlane) CheckChain(context.Context, *Chain) error { return p.chainErr }
func (p *checkingPlane) CheckGraph(context.Context, *Graph) error { return p.graphErr }

// TestCheckerUpFront: a data plane's refusal comes before anything is stored or applied, its
// *Error as it is; a check that fails otherwise is a 500 SfcDriverError.
func TestCheckerUpFront(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		wantCode int
		wantType string
	}{
		{"refused", &Error{Status: 400, Type: "SfcBadRequest", Message: "cannot steer"}, 400, "SfcBadRequest"},
		{"check failed", errors.New("maps are gone"), 500, "SfcDriverError"},
		{"accepted", nil, 201, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dp := &checkingPlane{}
			h := newHarness(t, fixture(t, "api-a"), Config{DataPlane: dp})
			fc, _, ppgs, pc := h.chain("api-a", "f1")
			if code, _ := h.do("DELETE", "/v2.0/sfc/port_chains/"+pc, nil); code != http.StatusNoContent {
				t.Fatalf("delete chain: %d", code)
			}
			before := len(dp.Calls())
			dp.chainErr = tc.err
			code, m := h.do("POST", "/v2.0/sfc/port_chains", map[string]any{"port_chain": map[string]any{"port_pair_groups": ppgs, "flow_classifiers": []string{fc}}})
			if code != tc.wantCode || (tc.wantType != "" && errType(m) != tc.wantType) {
				t.Fatalf("create: %d %v, want %d %s", code, m, tc.wantCode, tc.wantType)
			}
			if code != 201 {
				if n := len(dp.Calls()); n != before {
					t.Errorf("a refused chain reached the data plane: %+v", dp.Calls()[before:])
				}
				if _, m := h.do("GET", "/v2.0/sfc/port_chains", nil); len(m["port_chains"].([]any)) != 0 {
					t.Errorf("a refused chain is stored: %v", m)
				}
			}
		})
	}
}
