package hosts

import "testing"

func TestRPSMask(t *testing.T) {
	for _, tc := range []struct {
		cores []int
		want  string
	}{
		{[]int{0}, "00000001"},
		{[]int{1}, "00000002"},
		{[]int{0, 1, 3}, "0000000b"},
		{[]int{33}, "00000002,00000000"},
	} {
		if got := rpsMask(tc.cores); got != tc.want {
			t.Errorf("rpsMask(%v) = %q, want %q", tc.cores, got, tc.want)
		}
	}
}

// TestHandleInOwn: the empty namespace name is the caller's own, whose loopback the handle
// finds (a node's half of a topology creates its VXLAN devices there: UnderlayNS "").
func TestHandleInOwn(t *testing.T) {
	h, err := handleIn("")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.LinkByName("lo"); err != nil {
		t.Errorf("find lo in the caller's own namespace: %v", err)
	}
}
