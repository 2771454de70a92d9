// Package proc holds the process-group handling that function kinds and background load
// share: stopping a group politely then firmly, and telling whether any live (non-zombie)
// member is left.
package proc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// KillWait bounds the wait for a group to vanish after SIGKILL.
const KillWait = 2 * time.Second

// StopGroup sends SIGTERM to process group pgid, SIGKILL when it is still there after grace
// (grace 0: SIGKILL at once), and waits until no live member is left. A group already gone
// is not an error.
//
// Equivalent to: kill -TERM -PGID; sleep GRACE; kill -KILL -PGID
func StopGroup(pgid int, grace time.Duration) error {
	sig := syscall.SIGTERM
	if grace <= 0 {
		sig = syscall.SIGKILL
	}
	if err := syscall.Kill(-pgid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return fmt.Errorf("signal process group %d: %w", pgid, err)
	}
	if sig == syscall.SIGTERM {
		deadline := time.Now().Add(grace)
		for GroupAlive(pgid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if GroupAlive(pgid) {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
	deadline := time.Now().Add(KillWait)
	for GroupAlive(pgid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("stop process group %d: still alive after SIGKILL", pgid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// MaxLogTail bounds how much of a log LogTail returns.
const MaxLogTail = 2048

// LogTail returns what was written to a log file after offset — its last MaxLogTail bytes at
// most, trimmed — for error messages about a process that failed; "(empty)" when nothing was.
func LogTail(file string, offset int64) string {
	f, err := os.Open(file)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size()-offset > MaxLogTail {
		offset = st.Size() - MaxLogTail
	}
	b, err := io.ReadAll(io.NewSectionReader(f, offset, MaxLogTail))
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if s := strings.TrimSpace(string(b)); s != "" {
		return s
	}
	return "(empty)"
}

// GroupAlive reports whether process group pgid has a member that is not a zombie (children of
// a killed parent are re-parented and stay zombies until init reaps them).
func GroupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	return anyMember(pgid, func(string) bool { return true })
}

// GroupRuns reports whether process group pgid has a live process whose command line contains
// marker (e.g. its configuration path): a pid file outliving its processes must not make a
// teardown kill a group that reused the number.
func GroupRuns(pgid int, marker string) bool {
	return anyMember(pgid, func(pid string) bool {
		cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
		return strings.Contains(string(cmd), marker)
	})
}

// Runs reports whether process pid itself is alive (not a zombie) and its command line contains
// marker, whatever its group.
func Runs(pid int, marker string) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) == 0 || f[0] == "Z" || f[0] == "X" {
		return false
	}
	cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.Contains(string(cmd), marker)
}

// NSPid is the number host process pid has in its own PID namespace (a container's), from
// the NSpid line of /proc/PID/status; pid itself when it shares the host's or cannot be read.
func NSPid(pid int) int {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return pid
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return pid
			}
			if n, err := strconv.Atoi(f[len(f)-1]); err == nil {
				return n
			}
		}
	}
	return pid
}

// LeadGroup makes the calling process the leader of a new session and process group, unless
// it leads its group already (started by sfclab on netns, or by a shell): a long-running
// program started with `docker exec` is then stopped and checked by its group like on netns.
func LeadGroup() {
	if syscall.Getpgrp() != os.Getpid() {
		_, _ = syscall.Setsid()
	}
}

// anyMember reports whether fn is true for a live (not zombie) member of process group pgid,
// by its /proc entry; it answers true when /proc cannot be read, so callers err on "alive".
func anyMember(pgid int, fn func(pid string) bool) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	want := strconv.Itoa(pgid)
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) >= 3 && f[2] == want && f[0] != "Z" && f[0] != "X" && fn(e.Name()) {
			return true
		}
	}
	return false
}

// DaemonLog is a daemon's log file opened for appending, and the offset its new output starts
// at, so a daemon that dies during its start check is reported with what it just wrote.
type DaemonLog struct {
	// File is the log, for a process's standard output and error; the caller closes it.
	File   *os.File
	Path   string
	Offset int64
}

// OpenDaemonLog opens (creating) a daemon's log file for appending.
func OpenDaemonLog(path string) (*DaemonLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open daemon log: %w", err)
	}
	l := &DaemonLog{File: f, Path: path}
	if st, err := f.Stat(); err == nil {
		l.Offset = st.Size()
	}
	return l, nil
}

// ExitedAtOnce is the error of a daemon that exited during its start check: what was being
// started, why it ended, and the tail of what it wrote to its log.
func (l *DaemonLog) ExitedAtOnce(what string, cause error) error {
	return fmt.Errorf("%s: exited at once (%w); log %s: %s", what, cause, l.Path, LogTail(l.Path, l.Offset))
}
