package api

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile is the file in the journal root that one `sfclab serve` holds locked, so two servers
// never keep diverging copies of the same labs' resources.
const LockFile = "sfc-serve.lock"

// ErrServing is returned by LockJournal when another server holds the journal.
var ErrServing = errors.New("another sfclab serve serves this journal")

// LockJournal takes the journal's server lock (non-blocking) and writes this process's pid in
// it; release drops it.
//
// Equivalent to: flock -n ROOT/sfc-serve.lock
func LockJournal(root string) (release func(), err error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("lock journal: %w", err)
	}
	path := filepath.Join(root, LockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock journal: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		data, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock journal %s: %w (pid %s); stop it or use its endpoint", root, ErrServing, strings.TrimSpace(string(data)))
		}
		return nil, fmt.Errorf("lock journal: %w", err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
