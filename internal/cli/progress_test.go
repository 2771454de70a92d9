package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestProgress(t *testing.T) {
	clock := time.Unix(0, 0)
	for _, tty := range []bool{false, true} {
		var buf bytes.Buffer
		pr := &progress{w: &buf, tty: tty, start: clock, now: func() time.Time { return clock }}
		for i := 0; i <= 4; i++ {
			clock = clock.Add(10 * time.Second)
			pr.update(i, 4, "trial")
		}
		out := buf.String()
		if !strings.Contains(out, "[2/4] trial (elapsed 30s, ETA 30s)") && !tty {
			t.Errorf("plain progress lacks the ETA line:\n%s", out)
		}
		if tty && (!strings.Contains(out, "\r\033[K[###############---------------] 2/4 trial (elapsed 30s, ETA 30s)") || !strings.HasSuffix(out, "\n")) {
			t.Errorf("terminal progress = %q", out)
		}
		if !tty && strings.Count(out, "\n") != 5 {
			t.Errorf("plain progress has %d lines, want 5", strings.Count(out, "\n"))
		}
	}
}
