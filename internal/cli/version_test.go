package cli

import (
	"runtime/debug"
	"testing"
)

func TestVersionOf(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}}
	}
	tests := []struct {
		name, set string
		info      *debug.BuildInfo
		ok        bool
		want      string
	}{
		{"make build sets it", "v0.3-4-gabc", vcs("0123456789abcdef0123", "false"), true, "v0.3-4-gabc"},
		{"go build, clean tree", "dev", vcs("0123456789abcdef0123", "false"), true, "0123456789ab"},
		{"go build, changed tree", "dev", vcs("0123456789abcdef0123", "true"), true, "0123456789ab-dirty"},
		{"go install module@version", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, true, "v1.2.3"},
		{"go build -buildvcs=false", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "unknown (built without version control information: use make build, or go build -buildvcs=true in a git clone)"},
		{"no build info", "dev", nil, false, "unknown (no build information in the binary)"},
	}
	for _, tt := range tests {
		if got := versionOf(tt.set, tt.info, tt.ok); got != tt.want {
			t.Errorf("%s: versionOf = %q, want %q", tt.name, got, tt.want)
		}
	}
}
