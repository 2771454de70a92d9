package vnf

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"time"
)

// StopDaemon stops a daemon a kind started with Node.Daemon and whose process group it wrote
// to pidFile: when the group still runs a process naming marker (GroupRuns, in the guest for
// a VM node; else it is gone already), SIGTERM to the group and SIGKILL after grace (at once for 0), then the pid
// file is removed. The pid file is in the node's file system (Files). A missing pid file is nothing to stop. what names the daemon in errors
// ("squid", "server"). It works after a partial Setup and twice in a row.
//
// Equivalent to: kill -TERM -PGID; sleep GRACE; kill -KILL -PGID; rm PIDFILE
func StopDaemon(env Env, what, pidFile, marker string, grace time.Duration) error {
	data, err := ReadFile(env.Node, pidFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return Errorf(env, "read %s pid: %w", what, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		return Errorf(env, "%s pid file %s: bad pid %q", what, pidFile, data)
	}
	if GroupRuns(env.Node, pid, marker) {
		if err := StopGroup(env.Node, pid, grace); err != nil {
			return Errorf(env, "stop %s (process group %d): %w", what, pid, err)
		}
	}
	if err := Remove(env.Node, pidFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return Errorf(env, "remove %s pid file: %w", what, err)
	}
	return nil
}
