package vm

import (
	"slices"
	"testing"
	"time"
)

// TestStaleBuilds: a build directory whose lock a live build holds stays however old; one
// unlocked with the marker (its build took the lock, then died) goes at once; one unlocked
// without it (an sfclab's from before the lock, still building perhaps) goes only once
// legacyBuildAge old.
func TestStaleBuilds(t *testing.T) {
	now := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		dirs   []buildDirState
		remove []string
		why    string // why the first removed went (start of)
	}{
		{"live build, a minute old", []buildDirState{{Name: ".build-1", Locked: true, Marked: true, ModTime: now.Add(-time.Minute)}}, nil, ""},
		{"live build, a week old", []buildDirState{{Name: ".build-1", Locked: true, Marked: true, ModTime: now.Add(-7 * 24 * time.Hour)}}, nil, ""},
		{"killed build, a second old", []buildDirState{{Name: ".build-1", Marked: true, ModTime: now.Add(-time.Second)}}, []string{".build-1"}, "its build is gone"},
		{"killed build, a day old", []buildDirState{{Name: ".build-1", Marked: true, ModTime: now.Add(-25 * time.Hour)}}, []string{".build-1"}, "its build is gone"},
		{"unmarked, an hour old", []buildDirState{{Name: ".build-1", ModTime: now.Add(-time.Hour)}}, nil, ""},
		{"unmarked, just under legacyBuildAge", []buildDirState{{Name: ".build-1", ModTime: now.Add(-legacyBuildAge + time.Second)}}, nil, ""},
		{"unmarked, legacyBuildAge old", []buildDirState{{Name: ".build-1", ModTime: now.Add(-legacyBuildAge)}}, []string{".build-1"}, "unlocked, unchanged for 24h0m0s"},
		{"unmarked but locked, old", []buildDirState{{Name: ".build-1", Locked: true, ModTime: now.Add(-48 * time.Hour)}}, nil, ""},
		{"a mix", []buildDirState{
			{Name: ".build-live", Locked: true, Marked: true, ModTime: now.Add(-time.Hour)},
			{Name: ".build-dead", Marked: true, ModTime: now.Add(-time.Hour)},
			{Name: ".build-legacy-young", ModTime: now.Add(-time.Hour)},
			{Name: ".build-legacy-old", ModTime: now.Add(-48 * time.Hour)},
		}, []string{".build-dead", ".build-legacy-old"}, "its build is gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remove, why := staleBuilds(tc.dirs, now)
			if !slices.Equal(remove, tc.remove) {
				t.Fatalf("removed %v, want %v", remove, tc.remove)
			}
			if len(remove) > 0 && why[remove[0]] != tc.why {
				t.Errorf("why %s: %q, want %q", remove[0], why[remove[0]], tc.why)
			}
			for _, d := range remove {
				if why[d] == "" {
					t.Errorf("%s removed without a why", d)
				}
			}
		})
	}
}
