package proc

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func startGroup(t *testing.T, script string) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return cmd.Process.Pid
}

func TestStopGroup(t *testing.T) {
	tests := []struct {
		name   string
		script string
		grace  time.Duration
	}{
		{"terminates politely", "sleep 30 & sleep 31; wait", time.Second},
		{"ignores TERM, killed", "trap '' TERM; sleep 32 & sleep 33; wait", 100 * time.Millisecond},
		{"killed at once", "sleep 34 & sleep 35; wait", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pgid := startGroup(t, tt.script)
			time.Sleep(50 * time.Millisecond)
			if !GroupAlive(pgid) {
				t.Fatal("group not alive after start")
			}
			if err := StopGroup(pgid, tt.grace); err != nil {
				t.Fatal(err)
			}
			if GroupAlive(pgid) {
				t.Error("group alive after StopGroup")
			}
			if err := StopGroup(pgid, tt.grace); err != nil {
				t.Errorf("stopping a gone group: %v", err)
			}
		})
	}
}

func TestGroupRuns(t *testing.T) {
	pgid := startGroup(t, "exec sleep 36 # marker-xyz")
	time.Sleep(50 * time.Millisecond)
	if !GroupRuns(pgid, "36") {
		t.Error("GroupRuns misses the group's sleep 36")
	}
	if GroupRuns(pgid, "no-such-marker") {
		t.Error("GroupRuns matches a marker no member has")
	}
	if err := StopGroup(pgid, 0); err != nil {
		t.Fatal(err)
	}
	if GroupRuns(pgid, "36") {
		t.Error("GroupRuns sees a stopped group")
	}
}
