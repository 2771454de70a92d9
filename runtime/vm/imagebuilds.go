package vm

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sfclab/sfclab/runtime/debian"
)

// Build directories. A build writes its image into a directory .build-* under the image
// root and renames it to the image's key when complete; a build killed midway leaves it.
// A build holds an exclusive flock on its directory from right after creating it until it
// is gone or renamed, and then writes buildMarker into it: the kernel drops the lock when
// the process dies, whatever killed it, and the lock is the same for every PID namespace
// sharing the root. The next build (newBuildDir) removes the directories whose lock it can
// take that hold the marker: their build is gone. A directory without the marker whose lock
// is free is an sfclab's from before the lock (or one that died between mkdir and flock): it
// is removed only once legacyBuildAge old, far beyond any build (debootstrap: minutes).

// buildPrefix starts a build directory's name under the image root.
const buildPrefix = ".build-"

// buildMarker is written into a build directory once its build holds the lock.
const buildMarker = ".sfclab-build"

// legacyBuildAge is how old (its last change) an unlocked build directory without the
// marker must be to be removed.
const legacyBuildAge = 24 * time.Hour

// buildDirState is a build directory as staleBuilds sees it.
type buildDirState struct {
	Name    string
	Locked  bool      // a live build holds its lock
	Marked  bool      // holds buildMarker: its build took the lock
	ModTime time.Time // its last change
}

// staleBuilds chooses the build directories to remove, with why: unlocked ones with the
// marker (their build died), and unlocked ones without it once legacyBuildAge old. A locked
// one is a build running in some process, however old.
func staleBuilds(dirs []buildDirState, now time.Time) (remove []string, why map[string]string) {
	why = map[string]string{}
	for _, d := range dirs {
		switch {
		case d.Locked:
		case d.Marked:
			remove = append(remove, d.Name)
			why[d.Name] = "its build is gone"
		case now.Sub(d.ModTime) >= legacyBuildAge:
			remove = append(remove, d.Name)
			why[d.Name] = fmt.Sprintf("unlocked, unchanged for %s", now.Sub(d.ModTime).Round(time.Minute))
		}
	}
	return remove, why
}

// newBuildDir cleans the stale build directories (cleanBuilds) and makes a build directory
// under the image root, locked by this process until unlock (after it is removed or renamed).
func (b Builder) newBuildDir() (dir string, unlock func(), err error) {
	if err := os.MkdirAll(b.root(), 0o755); err != nil {
		return "", nil, fmt.Errorf("create image root: %w", err)
	}
	b.cleanBuilds()
	dir, err = os.MkdirTemp(b.root(), buildPrefix)
	if err != nil {
		return "", nil, fmt.Errorf("create image directory: %w", err)
	}
	f, err := os.Open(dir)
	if err == nil {
		// Blocking: a cleaner may hold it a moment, seeing it unmarked and young.
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, buildMarker), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("lock image build directory: %w", err)
	}
	return dir, func() { f.Close() }, nil
}

// cleanBuilds removes the build directories of builds gone (staleBuilds) and logs each. A
// directory's lock is held while it is judged and removed, so two cleaners do not both
// remove it; removal unmounts what a killed debootstrap left mounted in it first.
func (b Builder) cleanBuilds() []string {
	dirs, _ := filepath.Glob(filepath.Join(b.root(), buildPrefix+"*"))
	var states []buildDirState
	held := map[string]*os.File{}
	defer func() {
		for _, f := range held {
			f.Close()
		}
	}()
	for _, d := range dirs {
		f, err := os.Open(d)
		if err != nil {
			continue // gone meanwhile (stored or removed)
		}
		st := buildDirState{Name: filepath.Base(d)}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			st.Locked = true
		} else {
			held[d] = f
			// Read after taking the lock: a build that has the lock has written it by now
			// or is gone.
			_, merr := os.Stat(filepath.Join(d, buildMarker))
			st.Marked = merr == nil
			if fi, err := f.Stat(); err == nil {
				st.ModTime = fi.ModTime()
			}
		}
		states = append(states, st)
	}
	remove, why := staleBuilds(states, time.Now())
	var gone []string
	for _, name := range remove {
		d := filepath.Join(b.root(), name)
		size := dirBytes(d)
		if err := debian.RemoveTree(d); err != nil {
			b.logf("warning: remove stale guest image build %s: %v", name, err)
			continue
		}
		gone = append(gone, name)
		b.logf("removed stale guest image build %s (%s; %d MB)", name, why[name], size>>20)
	}
	return gone
}
