package steer_test

import (
	"os"
	"slices"
	"testing"

	"github.com/sfclab/sfclab/steer"
)

// TestNodePins: the maps of two nodes' parts of one lab (steer.NodePin) are pinned apart,
// Pinned names the lab once for them, and Unpin of the lab removes both.
func TestNodePins(t *testing.T) {
	const lab = "steer-np"
	parts := []string{steer.NodePin(lab, "n1"), steer.NodePin(lab, "n2")}
	t.Cleanup(func() {
		for _, p := range parts {
			steer.Unpin(p)
		}
	})
	for _, p := range parts {
		dp, err := steer.Load(p, []uint32{1})
		if err != nil {
			t.Fatal(err)
		}
		dp.Close()
		if _, err := os.Stat(steer.PinDir(p)); err != nil {
			t.Fatalf("part %s not pinned: %v", p, err)
		}
	}
	pinned, err := steer.Pinned()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(slices.DeleteFunc(slices.Clone(pinned), func(l string) bool { return l != lab })); n != 1 {
		t.Errorf("Pinned() = %v: lab %s listed %d times, want once", pinned, lab, n)
	}
	if slices.Contains(pinned, parts[0]) {
		t.Errorf("Pinned() = %v lists a node's part, not its lab", pinned)
	}
	if err := steer.Unpin(lab); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if _, err := os.Stat(steer.PinDir(p)); err == nil {
			t.Errorf("Unpin(%s) left part %s", lab, p)
		}
	}
}
