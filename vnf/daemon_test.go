package vnf_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/vnf"
)

// TestStopDaemon stops a process group of its own (no lab, no root): the group is gone and the
// pid file removed; a second call, and a call without a pid file, do nothing; a bad pid file is
// an error naming the daemon.
func TestStopDaemon(t *testing.T) {
	env := vnf.Env{Plan: &plan.Node{Name: "n", Kind: "k"}, StateDir: t.TempDir()}
	pidFile := filepath.Join(env.StateDir, "daemon.pid")
	marker := "sfclab-stopdaemon-test"
	cmd := exec.Command("/bin/sh", "-c", "exec sleep 30", marker)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	// Once exec has replaced the shell, the marker is not in sleep's command line, so the
	// group is taken as gone: nothing is killed, the pid file is removed.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		cl, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cmdline")
		if strings.HasPrefix(string(cl), "sleep\x00") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shell did not exec sleep: %q", cl)
		}
	}
	if err := vnf.StopDaemon(env, "test", pidFile, marker, time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("a group that does not run the marker was stopped: %v", err)
	default:
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Fatalf("pid file left: %v", err)
	}
	// With the marker it names, the group is stopped.
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := vnf.StopDaemon(env, "test", pidFile, "sleep", time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon's group still runs")
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Fatalf("pid file left: %v", err)
	}
	if err := vnf.StopDaemon(env, "test", pidFile, "sleep", time.Second); err != nil {
		t.Fatalf("second call: %v", err)
	}
	if err := os.WriteFile(pidFile, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := vnf.StopDaemon(env, "test", pidFile, "sleep", time.Second)
	if err == nil || !strings.Contains(err.Error(), `test pid file `+pidFile+`: bad pid "one"`) {
		t.Fatalf("bad pid file: %v", err)
	}
}
