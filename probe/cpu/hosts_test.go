package cpu

import (
	"math"
	"strings"
	"testing"
)

const statBefore = `cpu  300 0 200 1000 0 0 30 0 0 0
cpu0 100 0 100 500 0 0 10 0 0 0
cpu1 200 0 100 500 0 0 20 0 0 0
intr 1
`

// after: cpu0 spent 50 user (+10 nice), 20 system, 10 softirq, 10 idle, 10 steal of 110 ticks;
// cpu1 was idle for 100 ticks.
const statAfter = `cpu  0 0 0 0 0 0 0 0 0 0
cpu0 150 10 120 510 0 0 20 10 7 0
cpu1 200 0 100 600 0 0 20 0 0 0
`

func TestParseCoresAndHostPercent(t *testing.T) {
	b, err := ParseCores([]byte(statBefore))
	if err != nil {
		t.Fatal(err)
	}
	a, err := ParseCores([]byte(statAfter))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 2 || b[1].User != 200 || b[0].Total != 710 {
		t.Fatalf("before %+v", b)
	}
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	usr, sys, soft := HostPercent(b, a, []int{0})
	if !near(usr, 100*60/110.0) || !near(sys, 100*20/110.0) || !near(soft, 100*10/110.0) {
		t.Errorf("core 0: usr %.2f sys %.2f soft %.2f", usr, sys, soft)
	}
	if usr, sys, soft := HostPercent(b, a, []int{1}); usr != 0 || sys != 0 || soft != 0 {
		t.Errorf("idle core 1: %.2f %.2f %.2f", usr, sys, soft)
	}
	usr, _, _ = HostPercent(b, a, []int{0, 1})
	if !near(usr, 100*60/210.0) {
		t.Errorf("cores 0-1 usr %.2f, want the share of both cores' time", usr)
	}
	for _, bad := range []string{"cpu  1 2 3\n", "cpu0 1 2 3\n", "cpu0 1 2 3 4 5 6 x 8\n"} {
		if _, err := ParseCores([]byte(bad)); err == nil || !strings.Contains(err.Error(), "parse /proc/stat") {
			t.Errorf("ParseCores(%q) = %v", bad, err)
		}
	}
}
