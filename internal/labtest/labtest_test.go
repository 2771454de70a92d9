package labtest

import (
	"os/exec"
	"testing"
	"time"
)

// TestExclusiveShared: parallel tests of one process hold the lock together (a second flock
// of the file by the process would wait for the first for ever), and another process cannot
// take it while they do.
func TestExclusiveShared(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skipf("SKIPPED LOUDLY: no flock(1) to try the lock from another process: %v", err)
	}
	both := make(chan struct{}, 2)
	for _, name := range []string{"a", "b"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			Exclusive(t)
			both <- struct{}{}
			// A bound, not a timing figure: without the shared hold the other one never comes.
			deadline := time.After(2 * time.Minute)
			for len(both) < 2 {
				select {
				case <-deadline:
					t.Fatal("the other parallel test never got the lock: Exclusive is not shared within the process")
				case <-time.After(10 * time.Millisecond):
				}
			}
			if err := exec.Command("flock", "-n", LockFile, "true").Run(); err == nil {
				t.Errorf("another process took %s while this one held it", LockFile)
			}
		})
	}
}
