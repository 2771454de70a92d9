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

// A process started without a group of its own (as `docker exec` starts one in a container) is
// seen by Runs, not by GroupRuns, until it leads a group of its own (setsid, as LeadGroup).
func TestRuns(t *testing.T) {
	// The child is not a group leader: it stays in this test's group until it runs setsid
	// (util-linux setsid without fork, as LeadGroup does, when it leads no group).
	cmd := exec.Command("sh", "-c", "read x; exec setsid sleep 37")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL); cmd.Wait() })
	time.Sleep(50 * time.Millisecond)
	for _, tc := range []struct {
		name       string
		runs, grup bool
		marker     string
	}{
		{"before setsid", true, false, "read x"},
		{"other marker", false, false, "no-such-marker"},
	} {
		if got := Runs(pid, tc.marker); got != tc.runs {
			t.Errorf("%s: Runs = %v, want %v", tc.name, got, tc.runs)
		}
		if got := GroupRuns(pid, tc.marker); got != tc.grup {
			t.Errorf("%s: GroupRuns = %v, want %v", tc.name, got, tc.grup)
		}
	}
	in.Write([]byte("go\n"))
	// The shell runs setsid when it has read the line: wait for the group it then leads (at
	// most 5 s), not a fixed 100 ms a loaded host may exceed. Runs sees "37" in the shell's
	// own command line from the start; GroupRuns only once setsid has run.
	for deadline := time.Now().Add(5 * time.Second); !GroupRuns(pid, "37") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if !GroupRuns(pid, "37") || !Runs(pid, "37") {
		t.Errorf("after setsid: GroupRuns %v, Runs %v; want both", GroupRuns(pid, "37"), Runs(pid, "37"))
	}
	if got := NSPid(pid); got != pid {
		t.Errorf("NSPid of a process in this PID namespace = %d, want %d", got, pid)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	cmd.Wait()
	if Runs(pid, "37") {
		t.Error("Runs sees a reaped process")
	}
	if got := NSPid(pid); got != pid {
		t.Errorf("NSPid of a gone process = %d, want the pid itself", got)
	}
}
