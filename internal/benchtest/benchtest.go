// Package benchtest holds what tests of bench runs share. It is apart from labtest because it
// imports package bench, which imports the probes whose own tests use labtest.
package benchtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/bench"
)

// keptLines is how much of each kept log LogKeptLogs shows.
const keptLines = 60

// LogKeptLogs logs the end of every log a bench run in runDir kept for its failed trials
// (bench.FailedDir: servers' logs, VM guests' consoles and state), so that a test whose trial
// failed shows why although its temporary directory goes with it.
func LogKeptLogs(t testing.TB, runDir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(runDir, bench.FailedDir, "*", "*"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		t.Logf("kept %s, its last lines:\n%s", strings.TrimPrefix(f, runDir+"/"), strings.Join(lines[max(0, len(lines)-keptLines):], "\n"))
	}
}
